#include "files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "error.hpp"

namespace gds {

double resident_fraction(int fd, uint64_t offset, uint64_t length) {
  if (length == 0) return 0.0;
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t window = 1ull << 30;  // map at most 1 GiB at a time
  uint64_t begin = offset / page * page, end = offset + length;
  uint64_t resident = 0, total = 0;
  std::vector<unsigned char> vec;
  for (uint64_t at = begin; at < end; at += window) {
    uint64_t len = std::min(window, end - at);
    void* addr = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, off_t(at));
    if (addr == MAP_FAILED) throw IoError("mmap for mincore: " + errno_text(errno));
    uint64_t pages = (len + page - 1) / page;
    vec.resize(pages);
    int rc = ::mincore(addr, len, vec.data());
    int err = errno;
    ::munmap(addr, len);
    if (rc != 0) throw IoError("mincore: " + errno_text(err));
    for (unsigned char v : vec) resident += v & 1;
    total += pages;
  }
  return total ? double(resident) / double(total) : 0.0;
}

std::pair<uint32_t, uint32_t> dio_alignment(const std::string& path) {
#ifdef STATX_DIOALIGN
  struct statx stx{};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN))
    return {stx.stx_dio_mem_align, stx.stx_dio_offset_align};
#endif
  return {0, 0};
}

}  // namespace gds
