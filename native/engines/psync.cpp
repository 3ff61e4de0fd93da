// psync: one pread(2) or pwrite(2) at a time, the request done before queue()
// returns (fio's engines/sync.c, ioengine=psync). Queue depth is 1 by nature;
// concurrency comes from threads.
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
    ssize_t n;
    do {
      n = r.direction == Direction::kWrite ? ::pwrite(file_.fd(), r.buf, r.length, off_t(r.offset))
                                           : ::pread(file_.fd(), r.buf, r.length, off_t(r.offset));
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }

  LocalFile file_;
};

}  // namespace

const EngineInfo kPsyncEngine = {"psync",
                                 "pread(2) and pwrite(2), one request at a time per thread",
                                 {Opens::kLocalFile, /*supports_direct=*/true, /*max_depth=*/1, kReadWrite,
                                  /*gpu_buffers=*/false},
                                 [](const Target& target, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
                                   return std::make_unique<PsyncEngine>(target);
                                 },
                                 []() { return std::string(); },
                                 {}};

}  // namespace gds
