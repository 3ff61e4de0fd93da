// psync: one pread(2) at a time, the request done before queue() returns
// (fio's engines/sync.c, ioengine=psync). Queue depth is 1 by nature;
// concurrency comes from threads.
#include <unistd.h>

#include <cerrno>

#include "../engine.hpp"

namespace gds {
namespace {

class PsyncEngine final : public SynchronousEngine {
 public:
  explicit PsyncEngine(int fd) : fd_(fd) {}

 private:
  int64_t read(const IoRequest& r) override {
    ssize_t n;
    do {
      n = ::pread(fd_, r.buf, r.length, off_t(r.offset));
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
  }

  int fd_;
};

}  // namespace

const EngineInfo kPsyncEngine = {
    "psync",
    1,
    true,
    "pread(2), one request at a time per thread",
    [](int fd, unsigned) -> std::unique_ptr<Engine> { return std::make_unique<PsyncEngine>(fd); },
    []() { return std::string(); }};

}  // namespace gds
