// What the kernel says about a target file: page-cache residency (mincore),
// so a result can say whether its "storage" number came from RAM, and the
// alignment O_DIRECT needs (statx STATX_DIOALIGN).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

namespace gds {

// Fraction (0..1) of the pages of [offset, offset + length) of the open file
// fd resident in the page cache. Maps it read-only, a window at a time. Takes
// a descriptor, not a path: the caller holds the file it measured, even if
// its name is gone by now.
double resident_fraction(int fd, uint64_t offset, uint64_t length);

// (memory alignment, offset/length alignment) for O_DIRECT on this file, as
// statx reports them; (0, 0) when the kernel or filesystem does not say.
std::pair<uint32_t, uint32_t> dio_alignment(const std::string& path);

}  // namespace gds
