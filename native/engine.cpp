#include "engine.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>

#include "error.hpp"

namespace gds {

const char* direction_name(Direction d) { return d == Direction::kWrite ? "write" : "read"; }

const char* opens_name(Opens o) {
  switch (o) {
    case Opens::kNothing:
      return "nothing";
    case Opens::kLocalFile:
      return "local file";
    case Opens::kUrl:
      return "url";
    case Opens::kNfsFile:
      return "nfs file";
    case Opens::kSmbFile:
      return "smb file";
  }
  return "?";
}

Direction parse_direction(const std::string& name) {
  if (name == "read") return Direction::kRead;
  if (name == "write") return Direction::kWrite;
  throw InputError("direction " + name + ": unknown; use read or write");
}

uint64_t EngineInfo::option(const OptionValues& values, const std::string& option_name) const {
  for (const EngineOption& o : options) {
    if (option_name != o.name) continue;
    auto it = values.find(option_name);
    return it == values.end() ? o.fallback : it->second;
  }
  throw std::logic_error(std::string(name) + " engine: no option " + option_name);
}

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x80  // Linux 6.14's uncached buffered I/O (glibc's headers before 2.42 lack it)
#endif

// Never creates or truncates: a write goes only to a file that is already there (gdsbench
// writes only to files it created, which the Python layer checks before a job starts).
LocalFile::LocalFile(const Target& target) {
  const bool write = target.direction == Direction::kWrite;
  // a write never follows a link, and goes only to a regular file (checked again below, on what was opened)
  const int flags = (write ? O_WRONLY | O_NOFOLLOW : O_RDONLY) | O_CLOEXEC | (target.direct ? O_DIRECT : 0);
  fd_ = ::open(target.path.c_str(), flags);
  if (fd_ < 0)
    throw InputError("path " + target.path + ": cannot open for " + (write ? "writing" : "reading") + ": " +
                     errno_text(errno));
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError("path " + target.path + ": cannot stat: " + errno_text(err));
  }
  if (write && !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InputError("path " + target.path + ": not a regular file: gdsbench writes only into files it made");
  }
  size_ = uint64_t(st.st_size);
  // (whether the filesystem does it is asked before the run: pagecache.uncached_refusal)
  if (target.uncached) rw_flags_ = RWF_DONTCACHE;
  // readahead is the descriptor's own (its open file), so the advice goes to this one
  if (target.fadvise) ::posix_fadvise(fd_, 0, 0, target.fadvise);
}

int LocalFile::sync() const {
  int r;
  do {
    r = ::fsync(fd_);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : 0;
}

LocalFile::~LocalFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gds
