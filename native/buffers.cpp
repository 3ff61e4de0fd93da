#include "buffers.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "error.hpp"

namespace gds {

namespace {
constexpr size_t kHugePage = 2u << 20;
}

HostBuffers::HostBuffers(size_t bytes) : size_(bytes) {
  mapped_ = bytes + kHugePage;
  mapping_ = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw InputError("cannot map " + std::to_string(bytes) +
                     " bytes of read buffers (--bs x --qd): " + errno_text(errno) + "; lower --bs or --qd");
  }
  auto start = (reinterpret_cast<uintptr_t>(mapping_) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  data_ = reinterpret_cast<char*>(start);
  ::madvise(data_, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages are simply 4 KiB
  std::memset(data_, 0, bytes);
}

HostBuffers::~HostBuffers() {
  if (mapping_) ::munmap(mapping_, mapped_);
}

}  // namespace gds
