// Where reads land on the GPU side, and how host memory gets there.
//
// Two implementations behind one interface:
//   cuda_device.cpp  a real CUDA device, through the run-time loaded libcudart
//                    (cuda.hpp); compiled only when CUDA headers were found at
//                    build time, and usable only where libcudart loads
//   sim_device.cpp   a SIMULATION on the CPU: "device memory" is host memory
//                    and copies are memcpy on a background thread. It exists to
//                    test the staging pipeline (double buffering, ordering,
//                    errors mid-stream) on machines without a GPU, is never
//                    chosen unless asked for by name (--gpu-backend sim), and
//                    every result it produces is labelled as simulated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "../error.hpp"

namespace gds::gpu {

// Which way a copy goes: to the GPU after a read, from it before a write.
enum class Toward { kDevice, kHost };

// An in-order queue of copies between pinned host memory and the GPU for one
// worker thread. Each copy belongs to a request slot and reports when it
// finished, on the now_ns() clock: not when the worker happened to look (that
// can be a whole read later, while it waits for reads), and not by a host
// callback (CUDA runs those on one thread per device, which would then set the
// pace).
class CopyStream {
 public:
  virtual ~CopyStream() = default;
  virtual void copy(void* dst, const void* src, size_t n, unsigned slot, Toward toward) = 0;
  // Non-blocking: true (and when the copy finished) once slot's copy is done.
  // Throws IoError if the copy failed.
  virtual bool poll(unsigned slot, uint64_t* done_ns) = 0;
  // Blocks until slot's copy is done; returns when it finished.
  virtual uint64_t wait(unsigned slot) = 0;
};

// How GPU buffers are allocated (--gpu-memory): cudaMalloc, or CUDA's virtual memory management
// (VMM: physical memory made by cuMemCreate, mapped at addresses reserved apart, as PyTorch's
// expandable segments allocate), which cuFile and copies must reach as well.
enum class DeviceMemory { kCudaMalloc, kVmm };

// --gpu-memory's names (JobSpec checks them first); InputError for any other.
inline DeviceMemory parse_device_memory(const std::string& name) {
  if (name == "cudamalloc") return DeviceMemory::kCudaMalloc;
  if (name == "vmm") return DeviceMemory::kVmm;
  throw InputError("--gpu-memory " + name + ": choose cudamalloc or vmm");
}

// Memory is handed out as shared_ptr<char> whose deleter frees it the
// device's way, so a worker holds buffers without knowing which device.
using Memory = std::shared_ptr<char>;

class Device {
 public:
  virtual ~Device() = default;
  virtual bool simulated() const = 0;
  virtual void make_current() = 0;  // bind the calling thread to the device
  virtual Memory alloc_device(size_t n, DeviceMemory how) = 0;
  // Page-locked host memory the device can copy to and from: 2 MiB aligned, huge-page
  // backed where possible (buffers.hpp), registered with the device.
  virtual Memory alloc_pinned(size_t n) = 0;
  virtual std::unique_ptr<CopyStream> stream(unsigned slots) = 0;
  // Synchronous host-to-device copy of `height` rows of `width` bytes, rows `pitch` bytes
  // apart on both sides (cudaMemcpy2D): a few words of every 4 KiB block at once.
  virtual void put_rows(void* device_dst, const void* host_src, size_t width, size_t pitch, size_t height) = 0;
};

// backend: "cuda", or "sim" / "sim:fail-copy=N" (the N-th copy fails, to test
// errors mid-stream). Throws InputError naming what is missing.
std::unique_ptr<Device> open_device(const std::string& backend, int index);

// InputError, naming the fix, unless backend is "cuda" or a well-formed "sim[:...]": checked
// before a run starts, so a typo in a test hook is not found mid-run.
void check_backend(const std::string& backend);

}  // namespace gds::gpu
