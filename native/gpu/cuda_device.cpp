// A real CUDA device, through the run-time loaded runtime (cuda.hpp).
// Run on an H200 (results/device/); CI has no GPU: see README's GPU status.
#include <memory>
#include <vector>

#include "../buffers.hpp"
#include "../clock.hpp"
#include "../error.hpp"
#include "cuda.hpp"
#include "device.hpp"

namespace gds::gpu {
namespace {

// Each copy is followed by a timing event; poll and wait ask that event, and
// its GPU timestamp, carried onto the host clock by an anchor event whose
// host time is known, says when the copy finished. cudaEventElapsedTime is a
// float of milliseconds, so the anchor moves forward about once a second
// (through a second anchor event queued behind the copies) to keep its
// resolution near a microsecond however long the run.
class CudaStream final : public CopyStream {
 public:
  CudaStream(CudaRuntime& rt, unsigned slots) : rt_(rt), events_(slots, nullptr) {
    rt_.check(rt_.cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    for (auto& e : events_) rt_.check(rt_.cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
    for (auto& e : anchors_) rt_.check(rt_.cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate");
    // The first anchor: an empty stream reaches it at once; spin (not sleep)
    // so the host time taken lags the GPU's by about a microsecond.
    rt_.check(rt_.cudaEventRecord(anchors_[0], stream_), "cudaEventRecord");
    cudaError_t err;
    while ((err = rt_.cudaEventQuery(anchors_[0])) == cudaErrorNotReady) {
    }
    rt_.check(err, "cudaEventQuery");
    anchor_ns_ = now_ns();
  }
  ~CudaStream() override {
    if (stream_) rt_.cudaStreamSynchronize(stream_);  // no copy may outlive the buffers it reads
    for (auto e : events_)
      if (e) rt_.cudaEventDestroy(e);
    for (auto e : anchors_)
      if (e) rt_.cudaEventDestroy(e);
    if (stream_) rt_.cudaStreamDestroy(stream_);
  }

  void copy(void* dst, const void* src, size_t n, unsigned slot, Toward toward) override {
    if (!next_pending_ && now_ns() - anchor_ns_ > kAnchorPeriodNs) {  // move the anchor forward
      rt_.check(rt_.cudaEventRecord(anchors_[1 - current_], stream_), "cudaEventRecord");
      next_pending_ = true;
    }
    rt_.check(rt_.cudaMemcpyAsync(dst, src, n,
                                  toward == Toward::kDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync");
    rt_.check(rt_.cudaEventRecord(events_[slot], stream_), "cudaEventRecord");
  }

  bool poll(unsigned slot, uint64_t* done_ns) override {
    cudaError_t err = rt_.cudaEventQuery(events_[slot]);
    if (err == cudaErrorNotReady) return false;
    rt_.check(err, "copy between host and GPU (cudaMemcpyAsync)");
    *done_ns = finished_at(slot);
    return true;
  }

  uint64_t wait(unsigned slot) override {
    rt_.check(rt_.cudaEventSynchronize(events_[slot]), "copy between host and GPU (cudaMemcpyAsync)");
    return finished_at(slot);
  }

 private:
  static constexpr uint64_t kAnchorPeriodNs = 1000000000;

  // Host time of a completed event: the anchor's plus the GPU time between them.
  uint64_t since_anchor(cudaEvent_t event) {
    float ms = 0;
    rt_.check(rt_.cudaEventElapsedTime(&ms, anchors_[current_], event), "cudaEventElapsedTime");
    return uint64_t(int64_t(anchor_ns_) + int64_t(double(ms) * 1e6));
  }

  uint64_t finished_at(unsigned slot) {
    // The next anchor was queued before this copy, so it is done too: adopt it.
    if (next_pending_ && rt_.cudaEventQuery(anchors_[1 - current_]) == cudaSuccess) {
      anchor_ns_ = since_anchor(anchors_[1 - current_]);
      current_ = 1 - current_;
      next_pending_ = false;
    }
    return since_anchor(events_[slot]);
  }

  CudaRuntime& rt_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  cudaEvent_t anchors_[2] = {nullptr, nullptr};
  unsigned current_ = 0;       // which anchor's host time is known
  uint64_t anchor_ns_ = 0;     // that host time
  bool next_pending_ = false;  // the other anchor is queued and not yet adopted
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
  }
  bool simulated() const override { return false; }
  void make_current() override {
    rt_.check(rt_.cudaSetDevice(index_), "cudaSetDevice(" + std::to_string(index_) + ")");
  }
  Memory alloc_device(size_t n, DeviceMemory how) override {
    if (how == DeviceMemory::kVmm) return alloc_vmm(n);
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
  void put_rows(void* device_dst, const void* host_src, size_t width, size_t pitch, size_t height) override {
    rt_.check(rt_.cudaMemcpy2D(device_dst, pitch, host_src, pitch, width, height, cudaMemcpyHostToDevice),
              "cudaMemcpy2D (host to GPU)");
    // From pageable memory the copy may return before its bytes reach the GPU; a write's stamps must be
    // there before cuFile reads the buffer (from a stream of its own, or none that CUDA orders after this).
    rt_.check(rt_.cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after cudaMemcpy2D");
  }

 private:
  // CUDA's virtual memory management: physical memory made (cuMemCreate), addresses reserved for it
  // and the memory mapped there, readable and writable by this GPU. The GPUDirect RDMA flag is set
  // where the device takes it: cuFile's direct path pins GPU pages as RDMA does.
  Memory alloc_vmm(size_t n) {
    CudaDriver& d = CudaDriver::get();
    const std::string what = " (--gpu-memory vmm, " + std::to_string(n) + " bytes of buffers: --bs x --qd)";
    CUdevice device = 0;
    d.check(d.cuDeviceGet(&device, index_), "cuDeviceGet" + what);
    int rdma = 0;
    d.cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, device);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    size_t granularity = 0;
    d.check(d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity" + what);
    const size_t size = (n + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle memory = 0;
    d.check(d.cuMemCreate(&memory, size, &prop, 0), "cuMemCreate" + what);
    CUdeviceptr at = 0;
    CUresult result = d.cuMemAddressReserve(&at, size, granularity, 0, 0);
    if (result == CUDA_SUCCESS) {
      result = d.cuMemMap(at, size, 0, memory, 0);
      if (result != CUDA_SUCCESS) d.cuMemAddressFree(at, size);
    }
    d.cuMemRelease(memory);  // the mapping holds the memory from here; unmapping frees it
    d.check(result, "cuMemAddressReserve/cuMemMap" + what);
    // The device's work on the memory is done before it is unmapped, as cudaFree makes sure of (and
    // PyTorch's expandable segments before theirs); on the buffers' own device, from whatever thread
    // frees them (a SampleReader's go with Python's garbage), the thread's own device left as it was.
    auto unmap = [driver = &d, rt = &rt_, index = index_, size](char* p) {
      int current = index;
      rt->cudaGetDevice(&current);
      rt->cudaSetDevice(index);
      rt->cudaDeviceSynchronize();
      rt->cudaSetDevice(current);
      driver->cuMemUnmap(CUdeviceptr(p), size);
      driver->cuMemAddressFree(CUdeviceptr(p), size);
    };
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    result = d.cuMemSetAccess(at, size, &access, 1);
    if (result != CUDA_SUCCESS) unmap(reinterpret_cast<char*>(at));
    d.check(result, "cuMemSetAccess" + what);
    return Memory(reinterpret_cast<char*>(at), unmap);
  }

  CudaRuntime& rt_;
  int index_;
};

}  // namespace

std::unique_ptr<Device> open_simulated_device(const std::string& backend, int index);

std::unique_ptr<Device> open_device(const std::string& backend, int index) {
  if (backend == "cuda") return std::make_unique<CudaDevice>(CudaRuntime::get(), index);
  return open_simulated_device(backend, index);
}

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
      // fflags' CU_FILE_P2P_SUPPORTED (bit 4, cufile.h 1.16 on; spelled as a number so older headers build)
      s.p2pdma_supported = (props.fflags >> 4) & 1u;
      s.max_direct_io_size = props.nvfs.max_direct_io_size;
    }
  }
  return s;
}

CufileStats cufile_stats() {
  CufileStats out;
  out.error = CuFileApi::probe();
  if (!out.error.empty()) return out;
  CuFileApi& cf = CuFileApi::get();
  if (cf.cuFileGetVersion) cf.cuFileGetVersion(&out.version);
  if (const std::string& off = cf.start_stats(); !off.empty()) {
    out.error = "cuFile's statistics are not counting: " + off;
    return out;
  }
  // Read twice into room far larger than any known struct (5,112 bytes), filled with two patterns: a byte
  // the library wrote reads the same both times, one it left does not. Nothing it writes can overflow.
  constexpr size_t kRoom = 64 << 10;
  std::vector<unsigned char> first(kRoom, 0xA5), second(kRoom, 0x5A);
  for (auto* room : {&first, &second}) {
    CUfileError_t status = cf.cuFileGetStatsL3(room->data());
    if (status.err != CU_FILE_SUCCESS) {
      out.error = "cuFileGetStatsL3: " + CuFileApi::error_text(status);
      return out;
    }
  }
  size_t written = kRoom;
  while (written > 0 && first[written - 1] != second[written - 1]) --written;
  out.bytes.assign(first.begin(), first.begin() + written);
  return out;
}

}  // namespace gds::gpu
