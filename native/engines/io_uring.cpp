// io_uring: up to `depth` reads or writes in flight per thread through liburing
// (fio's engines/io_uring.c). Plain IORING_OP_READ and _WRITE on ordinary buffers, no
// registered buffers or files and no polling, and the ring set up as fio sets
// it up by default (a CQ as deep as the SQ; cooperative, deferred task work
// for a single issuing thread, dropped one by one on kernels that refuse
// them), so the two are compared like for like. Its own option submit_batch
// (--submit-batch, fio's iodepth_batch_submit, default 1) is how many reads it
// queues before each submission; reap() submits any left over and waits in the
// same io_uring_enter call.
#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kIoUringCan = {Opens::kLocalFile, /*supports_direct=*/true, /*max_depth=*/32768, kReadWrite,
                                      /*gpu_buffers=*/false};
const std::vector<EngineOption> kIoUringOptions = {
    {"submit_batch", "int", "reads queued before each submission to the kernel (io_uring; fio's iodepth_batch_submit)",
     1, 1, 65536,
     /*at_most_depth=*/true}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBURING
#include <liburing.h>

namespace gds {
namespace {

class IoUringEngine final : public Engine {
 public:
  IoUringEngine(const Target& target, unsigned depth, unsigned submit_batch)
      : file_(target), cqes_(depth), submit_batch_(submit_batch) {
    int r = init_ring(depth, &ring_);
    if (r < 0)
      throw InputError("--engine io_uring: io_uring_queue_init(" + std::to_string(depth) +
                       ") failed: " + errno_text(r) + "; " + hint(r));
  }
  ~IoUringEngine() override { io_uring_queue_exit(&ring_); }
  uint64_t size() const override { return file_.size(); }
  // fsync(2) from the issuing thread (fio queues it on the ring instead): it covers the writes
  // completed before it
  int sync() override { return file_.sync(); }

  void queue(IoRequest* r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) throw IoError("io_uring: submission queue full (worker queued more than --qd)");
    if (r->direction == Direction::kWrite)
      io_uring_prep_write(sqe, file_.fd(), r->buf, r->length, r->offset);
    else
      io_uring_prep_read(sqe, file_.fd(), r->buf, r->length, r->offset);
    io_uring_sqe_set_data(sqe, r);
    if (++unsubmitted_ >= submit_batch_) submit();
  }

  void submit() {
    unsubmitted_ = 0;
    int r;
    do {
      r = io_uring_submit(&ring_);
    } while (r == -EINTR);
    if (r < 0 && r != -EBUSY) throw IoError("io_uring_submit: " + errno_text(r));
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    unsubmitted_ = 0;
    for (;;) {
      int r = io_uring_submit_and_wait(&ring_, min);
      if (r >= 0 || r == -EBUSY) break;  // EBUSY: completions are pending, reap them
      if (r != -EINTR) throw IoError("io_uring_submit_and_wait: " + errno_text(r));
    }
    if (max > cqes_.size()) max = unsigned(cqes_.size());
    unsigned n = io_uring_peek_batch_cqe(&ring_, cqes_.data(), max);
    for (unsigned i = 0; i < n; ++i) {
      auto* req = static_cast<IoRequest*>(io_uring_cqe_get_data(cqes_[i]));
      req->result = cqes_[i]->res;
      done[i] = req;
    }
    io_uring_cq_advance(&ring_, n);
    return n;
  }

  // Must run on the thread that will submit (SINGLE_ISSUER): workers create
  // their engine in their own thread.
  static int init_ring(unsigned depth, io_uring* ring) {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = depth;
    for (unsigned drop : {0u, unsigned(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN),
                          unsigned(IORING_SETUP_COOP_TASKRUN), unsigned(IORING_SETUP_CQSIZE)}) {
      p.flags &= ~drop;
      io_uring_params attempt = p;
      int r = io_uring_queue_init_params(depth, ring, &attempt);
      if (r != -EINVAL) return r;
    }
    return -EINVAL;
  }

  static std::string hint(int err) {
    if (err == -EPERM)
      return "io_uring is disabled here (sysctl kernel.io_uring_disabled or a seccomp filter); "
             "use --engine psync";
    if (err == -ENOSYS) return "this kernel has no io_uring; use --engine psync";
    if (err == -ENOMEM) return "raise the locked-memory limit (ulimit -l) or lower --qd";
    return "lower --qd or use --engine psync";
  }

 private:
  LocalFile file_;
  io_uring ring_{};
  std::vector<io_uring_cqe*> cqes_;
  const unsigned submit_batch_;
  unsigned unsubmitted_ = 0;
};

std::string probe() {
  io_uring ring;
  int r = io_uring_queue_init(2, &ring, 0);
  if (r < 0) return "io_uring_queue_init failed: " + errno_text(r) + "; " + IoUringEngine::hint(r);
  io_uring_queue_exit(&ring);
  return "";
}

}  // namespace

const EngineInfo kIoUringEngine = {
    "io_uring",
    "io_uring (liburing), up to --qd reads or writes in flight per thread",
    kIoUringCan,
    [](const Target& target, unsigned depth, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<IoUringEngine>(target, depth, unsigned(kIoUringEngine.option(options, "submit_batch")));
    },
    probe,
    kIoUringOptions};

}  // namespace gds

#else  // built without liburing

namespace gds {
const EngineInfo kIoUringEngine = {
    "io_uring",
    "io_uring (liburing)",
    kIoUringCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError(
          "--engine io_uring: this build of gdsbench has no io_uring support; "
          "install liburing-dev and reinstall gdsbench, or use --engine psync");
    },
    []() { return std::string("built without liburing (install liburing-dev and reinstall gdsbench)"); },
    kIoUringOptions};
}  // namespace gds

#endif
