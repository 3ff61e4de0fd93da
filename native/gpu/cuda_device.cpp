// A real CUDA device, through the run-time loaded runtime (cuda.hpp).
// Untested on a GPU in this project's CI: see README's GPU status.
#include <memory>
#include <vector>

#include "../buffers.hpp"
#include "../error.hpp"
#include "cuda.hpp"
#include "device.hpp"

namespace gds::gpu {
namespace {

// Each copy is followed by an event on the stream; poll and wait ask that event.
class CudaStream final : public CopyStream {
 public:
  CudaStream(CudaRuntime& rt, unsigned slots) : rt_(rt), events_(slots, nullptr) {
    rt_.check(rt_.cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    for (auto& e : events_) rt_.check(rt_.cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~CudaStream() override {
    if (stream_) rt_.cudaStreamSynchronize(stream_);  // no copy may outlive the buffers it reads
    for (auto e : events_)
      if (e) rt_.cudaEventDestroy(e);
    if (stream_) rt_.cudaStreamDestroy(stream_);
  }

  void copy_to_device(void* dst, const void* src, size_t n, unsigned slot) override {
    rt_.check(rt_.cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    rt_.check(rt_.cudaEventRecord(events_[slot], stream_), "cudaEventRecord");
  }

  bool poll(unsigned slot) override {
    cudaError_t err = rt_.cudaEventQuery(events_[slot]);
    if (err == cudaErrorNotReady) return false;
    rt_.check(err, "copy to device (cudaMemcpyAsync)");
    return true;
  }

  void wait(unsigned slot) override {
    rt_.check(rt_.cudaEventSynchronize(events_[slot]), "copy to device (cudaMemcpyAsync)");
  }

 private:
  CudaRuntime& rt_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

// Huge-page host buffers registered with CUDA (page-locked for DMA).
struct PinnedHost {
  PinnedHost(CudaRuntime& rt, size_t n) : rt(rt), buffers(n) {
    rt.check(rt.cudaHostRegister(buffers.data(), n, cudaHostRegisterPortable), "cudaHostRegister");
  }
  ~PinnedHost() { rt.cudaHostUnregister(buffers.data()); }
  CudaRuntime& rt;
  HostBuffers buffers;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(CudaRuntime& rt, int index) : rt_(rt), index_(index) {
    int count = 0;
    rt_.check(rt_.cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (index < 0 || index >= count)
      throw InputError("--gpu " + std::to_string(index) + ": this machine has " + std::to_string(count) +
                       " GPU(s), numbered 0 to " + std::to_string(count - 1));
    char bus[32] = {0};
    if (rt_.cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) bus_ = bus;
  }
  bool simulated() const override { return false; }
  std::string describe() const override { return "cuda:" + std::to_string(index_) + (bus_.empty() ? "" : " (" + bus_ + ")"); }
  void make_current() override { rt_.check(rt_.cudaSetDevice(index_), "cudaSetDevice(" + std::to_string(index_) + ")"); }
  Memory alloc_device(size_t n) override {
    void* p = nullptr;
    rt_.check(rt_.cudaMalloc(&p, n), "cudaMalloc(" + std::to_string(n) + " bytes) for read buffers (--bs x --qd)");
    CudaRuntime* rt = &rt_;
    return Memory(static_cast<char*>(p), [rt](char* q) { rt->cudaFree(q); });
  }
  Memory alloc_pinned(size_t n) override {
    auto pinned = std::make_shared<PinnedHost>(rt_, n);
    return Memory(pinned, pinned->buffers.data());
  }
  std::unique_ptr<CopyStream> stream(unsigned slots) override { return std::make_unique<CudaStream>(rt_, slots); }

 private:
  CudaRuntime& rt_;
  int index_;
  std::string bus_;
};

}  // namespace

std::unique_ptr<Device> open_simulated_device(const std::string& backend, int index);

std::unique_ptr<Device> open_device(const std::string& backend, int index) {
  if (backend == "cuda") return std::make_unique<CudaDevice>(CudaRuntime::get(), index);
  return open_simulated_device(backend, index);
}

std::string cuda_unavailable_reason() { return CudaRuntime::probe(); }

}  // namespace gds::gpu

#include "status.hpp"

namespace gds::gpu {

GpuStatus gpu_status() {
  GpuStatus s;
  s.built_with_cuda = true;
  s.cudart_error = CudaRuntime::probe();
  if (!s.cudart_error.empty()) {
    s.cufile_error = "not tried: cuFile needs the CUDA runtime";
    return s;
  }
  CudaRuntime& rt = CudaRuntime::get();
  s.cudart_path = rt.path;
  rt.cudaRuntimeGetVersion(&s.runtime_version);
  rt.cudaDriverGetVersion(&s.driver_version);
  int count = 0;
  rt.cudaGetDeviceCount(&count);
  for (int i = 0; i < count; ++i) {
    DeviceStatus d;
    d.index = i;
    char bus[32] = {0};
    if (rt.cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) d.pci_bus_id = bus;
    size_t free_b = 0, total_b = 0;
    if (rt.cudaSetDevice(i) == cudaSuccess && rt.cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      d.free_bytes = free_b;
      d.total_bytes = total_b;
    }
    s.devices.push_back(d);
  }
  s.cufile_error = CuFileApi::probe();
  if (s.cufile_error.empty()) {
    CuFileApi& cf = CuFileApi::get();
    s.cufile_path = cf.path;
    CUfileDrvProps_t props{};
    if (cf.cuFileDriverGetProperties(&props).err == CU_FILE_SUCCESS) {
      s.nvfs_major = props.nvfs.major_version;
      s.nvfs_minor = props.nvfs.minor_version;
      s.compat_allowed = (props.nvfs.dcontrolflags >> CU_FILE_ALLOW_COMPAT_MODE) & 1u;
      s.max_direct_io_size = props.nvfs.max_direct_io_size;
    }
  }
  return s;
}

}  // namespace gds::gpu
