#include "engine.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.hpp"

namespace gds {

const char* direction_name(Direction d) { return d == Direction::kWrite ? "write" : "read"; }

Direction parse_direction(const std::string& name) {
  if (name == "read") return Direction::kRead;
  if (name == "write") return Direction::kWrite;
  throw InputError("direction " + name + ": unknown; use read or write");
}

// Never creates or truncates: a write goes only to a file that is already there (gdsbench
// writes only to files it created, which the Python layer checks before a job starts).
LocalFile::LocalFile(const Target& target) {
  const bool write = target.direction == Direction::kWrite;
  const int flags = (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | (target.direct ? O_DIRECT : 0);
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
  size_ = uint64_t(st.st_size);
}

LocalFile::~LocalFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gds
