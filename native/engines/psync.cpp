// psync: one pread(2) or pwrite(2) at a time, the request done before queue()
// returns (fio's engines/sync.c, ioengine=psync). Queue depth is 1 by nature;
// concurrency comes from threads. --uncached asks preadv2(2)/pwritev2(2) for
// RWF_DONTCACHE instead, as fio's pvsync2 does with uncached=1.
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "../engine.hpp"

namespace gds {
namespace {

class PsyncEngine final : public SynchronousEngine {
 public:
  explicit PsyncEngine(const Target& target) : file_(target) {}
  uint64_t size() const override { return file_.size(); }
  int sync() override { return file_.sync(); }

 private:
  int64_t transfer(const IoRequest& r) override {
    const bool write = r.direction == Direction::kWrite;
    const int flags = file_.rw_flags();
    iovec one{r.buf, r.length};
    ssize_t n;
    do {
      if (flags)
        n = write ? ::pwritev2(file_.fd(), &one, 1, off_t(r.offset), flags)
                  : ::preadv2(file_.fd(), &one, 1, off_t(r.offset), flags);
      else
        n = write ? ::pwrite(file_.fd(), r.buf, r.length, off_t(r.offset))
                  : ::pread(file_.fd(), r.buf, r.length, off_t(r.offset));
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }

  LocalFile file_;
};

}  // namespace

const EngineInfo kPsyncEngine = {
    "psync",
    "pread(2) and pwrite(2), one request at a time per thread",
    {Opens::kLocalFile, /*supports_direct=*/true, /*buffered_flags=*/true, /*max_depth=*/1, kReadWrite,
     /*gpu_buffers=*/false},
    [](const Target& target, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      return std::make_unique<PsyncEngine>(target);
    },
    []() { return std::string(); },
    {}};

}  // namespace gds
