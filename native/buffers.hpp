// Host memory for a worker's reads, sized once per run.
//
// Anonymous mmap, 2 MiB aligned, with MADV_HUGEPAGE: where transparent huge
// pages are available a 1 MiB read lands in one physically contiguous piece,
// so the kernel builds one DMA segment instead of 256 and can merge adjacent
// sequential reads as it does for fio's freshly mapped buffers. (Recycled heap
// pages in a long-lived process are scattered; a 1 MiB O_DIRECT read then
// exceeds a virtio disk's 254-segment limit and is split in two.) The pages are
// touched at allocation, so no page fault lands inside a measured read.
#pragma once
#include <cstddef>

namespace gds {

class HostBuffers {
 public:
  explicit HostBuffers(size_t bytes);
  ~HostBuffers();
  HostBuffers(const HostBuffers&) = delete;
  HostBuffers& operator=(const HostBuffers&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* mapping_ = nullptr;
  size_t mapped_ = 0;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gds
