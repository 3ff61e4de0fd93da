// io_uring: up to `depth` reads or writes in flight per thread through liburing
// (fio's engines/io_uring.c). By default plain IORING_OP_READ and _WRITE on ordinary
// buffers, and the ring set up as fio sets it up by default (a CQ as deep as the
// SQ; cooperative, deferred task work for a single issuing thread, dropped one
// by one on kernels that refuse them), so the two are compared like for like.
// Its options are fio's, by fio's names and meaning:
//   submit_batch       reads queued before each submission (fio's iodepth_batch_submit); reap()
//                      submits any left over and waits in the same io_uring_enter call
//   complete_batch     completions reap() waits for at least, of those in flight
//                      (fio's iodepth_batch_complete_min)
//   fixedbufs          the request buffers registered once, moved by READ_FIXED/WRITE_FIXED
//   registerfiles      the file registered once, named by its index (IOSQE_FIXED_FILE)
//   sqthread_poll      a kernel thread polls the submission queue (IORING_SETUP_SQPOLL), so
//                      a submission is no system call; sqthread_poll_cpu binds it (SQ_AFF)
//   hipri              completions polled, not interrupt-driven (IORING_SETUP_IOPOLL): O_DIRECT
//                      only, on a device with polled queues (checked when the engine opens)
// and the job's --uncached (fio's uncached=1) puts RWF_DONTCACHE in every read's and write's rw_flags.
#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kIoUringCan = {
    Opens::kLocalFile,    /*supports_direct=*/true, /*buffered_flags=*/true, /*max_depth=*/32768, kReadWrite,
    /*gpu_buffers=*/false};
constexpr uint64_t kAnyCpu = 4096;  // sqthread_poll_cpu's default: the polling thread not bound
const std::vector<EngineOption> kIoUringOptions = {
    {"submit_batch", "int", "reads queued before each submission to the kernel (io_uring; fio's iodepth_batch_submit)",
     1, 1, 65536,
     /*at_most_depth=*/true},
    {"complete_batch", "int",
     "completions to wait for at least, of those in flight, each time (io_uring; fio's iodepth_batch_complete_min)", 1,
     1, 65536, /*at_most_depth=*/true},
    {"fixedbufs", "bool",
     "register the buffers once and move them by READ_FIXED/WRITE_FIXED (io_uring; fio's fixedbufs)", 0, 0, 1,
     /*at_most_depth=*/false},
    {"registerfiles", "bool", "register the file once and name it by its index (io_uring; fio's registerfiles)", 0, 0,
     1, /*at_most_depth=*/false},
    {"sqthread_poll", "bool",
     "a kernel thread polls the submission queue, so submitting is no system call (io_uring SQPOLL; fio's "
     "sqthread_poll)",
     0, 0, 1, /*at_most_depth=*/false},
    {"sqthread_poll_cpu", "int",
     "the CPU --sqthread-poll's kernel thread is bound to (io_uring; fio's sqthread_poll_cpu; 4096, the default: not "
     "bound)",
     kAnyCpu, 0, kAnyCpu, /*at_most_depth=*/false},
    {"hipri", "bool",
     "poll for completions instead of waiting for interrupts (io_uring IOPOLL; fio's hipri): O_DIRECT, on a device "
     "with polled queues",
     0, 0, 1, /*at_most_depth=*/false}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_LIBURING
#include <liburing.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <fstream>

namespace gds {
namespace {

// The engine's options, as the job set them (kIoUringOptions).
struct RingOptions {
  unsigned submit_batch = 1, complete_batch = 1;
  bool fixedbufs = false, registerfiles = false, sqthread_poll = false, hipri = false;
  unsigned sqthread_poll_cpu = kAnyCpu;
};

class IoUringEngine final : public Engine {
 public:
  IoUringEngine(const Target& target, unsigned depth, const RingOptions& options)
      : file_(target), cqes_(depth), options_(options) {
    if (options.hipri) check_polled(target);
    int r = init_ring(depth, options, &ring_);
    if (r < 0)
      throw InputError("--engine io_uring: io_uring_queue_init(" + std::to_string(depth) +
                       ") failed: " + errno_text(r) + "; " + hint(r, options));
    if (options.registerfiles) {
      const int fd = file_.fd();
      r = io_uring_register_files(&ring_, &fd, 1);
      if (r < 0) {
        io_uring_queue_exit(&ring_);
        throw InputError("--registerfiles: io_uring_register_files failed: " + errno_text(r));
      }
    }
  }
  ~IoUringEngine() override { io_uring_queue_exit(&ring_); }
  uint64_t size() const override { return file_.size(); }
  // fsync(2) from the issuing thread (fio queues it on the ring instead): it covers the writes
  // completed before it
  int sync() override { return file_.sync(); }

  // --fixedbufs: each request slot's buffer, registered as buffer `slot`.
  void register_host_buffers(char* base, size_t slot_bytes, unsigned slots) override {
    if (!options_.fixedbufs) return;
    std::vector<iovec> buffers(slots);
    for (unsigned i = 0; i < slots; ++i) buffers[i] = {base + size_t(i) * slot_bytes, slot_bytes};
    const int r = io_uring_register_buffers(&ring_, buffers.data(), slots);
    if (r < 0)
      throw InputError("--fixedbufs: io_uring_register_buffers failed: " + errno_text(r) +
                       (r == -ENOMEM ? "; raise the locked-memory limit (ulimit -l) or lower --qd x --bs" : ""));
    fixed_ = true;
  }

  void queue(IoRequest* r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe && options_.sqthread_poll) {  // the kernel's polling thread has not taken the earlier ones yet (a
      submit();                            // busy machine): wake it if it sleeps, and wait for room
      if (io_uring_sqring_wait(&ring_) >= 0) sqe = io_uring_get_sqe(&ring_);
    }
    if (!sqe) throw IoError("io_uring: submission queue full (worker queued more than --qd)");
    const int fd = options_.registerfiles ? 0 : file_.fd();  // a registered file is named by its index
    const bool write = r->direction == Direction::kWrite;
    if (fixed_ && write)
      io_uring_prep_write_fixed(sqe, fd, r->buf, r->length, r->offset, int(r->slot));
    else if (fixed_)
      io_uring_prep_read_fixed(sqe, fd, r->buf, r->length, r->offset, int(r->slot));
    else if (write)
      io_uring_prep_write(sqe, fd, r->buf, r->length, r->offset);
    else
      io_uring_prep_read(sqe, fd, r->buf, r->length, r->offset);
    if (options_.registerfiles) sqe->flags |= IOSQE_FIXED_FILE;
    sqe->rw_flags = file_.rw_flags();
    io_uring_sqe_set_data(sqe, r);
    ++in_flight_;
    if (++unsubmitted_ >= options_.submit_batch) submit();
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
    if (min) min = std::max(min, std::min(options_.complete_batch, in_flight_));  // --complete-batch
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
    in_flight_ -= n;
    return n;
  }

  // Must run on the thread that will submit (SINGLE_ISSUER): workers create
  // their engine in their own thread.
  // The options' own flags are kept; the default ones are dropped one by one where refused
  // (SQPOLL refuses DEFER_TASKRUN: its thread, not this one, issues).
  static int init_ring(unsigned depth, const RingOptions& options, io_uring* ring) {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = depth;
    if (options.sqthread_poll) p.flags |= IORING_SETUP_SQPOLL;
    if (options.sqthread_poll && options.sqthread_poll_cpu != kAnyCpu) {
      p.flags |= IORING_SETUP_SQ_AFF;
      p.sq_thread_cpu = options.sqthread_poll_cpu;
    }
    if (options.hipri) p.flags |= IORING_SETUP_IOPOLL;
    for (unsigned drop : {0u, unsigned(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN),
                          unsigned(IORING_SETUP_COOP_TASKRUN), unsigned(IORING_SETUP_CQSIZE)}) {
      p.flags &= ~drop;
      io_uring_params attempt = p;
      int r = io_uring_queue_init_params(depth, ring, &attempt);
      if (r != -EINVAL) return r;
    }
    return -EINVAL;
  }

  // --hipri: IOPOLL reaps by polling the device's queues, so the reads must go to the device
  // (O_DIRECT) and the device must have polled queues (its queue/io_poll), else each one fails.
  void check_polled(const Target& target) const {
    if (!target.direct) throw InputError("--hipri: polled completions need O_DIRECT reads and writes; add --direct");
    struct stat st{};
    if (fstat(file_.fd(), &st) != 0) return;  // (LocalFile opened it: not expected)
    const dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    const std::string block = "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    for (const std::string& queue :
         {block + "/queue/io_poll", block + "/../queue/io_poll"}) {  // a partition: its disk's
      std::ifstream in(queue);
      int polled = 0;
      if (!(in >> polled)) continue;
      if (polled) return;
      throw InputError("--hipri: " + target.path + " is on a device without polled queues (" + queue +
                       " is 0), so IOPOLL cannot complete its reads; drop --hipri (for NVMe: load the nvme module with "
                       "poll_queues=N)");
    }
    throw InputError("--hipri: " + target.path + " is on no block device with a queue that says it polls (" + block +
                     "); drop --hipri");
  }

  static std::string hint(int err, const RingOptions& options = {}) {
    if (err == -EINVAL && options.sqthread_poll && options.sqthread_poll_cpu != kAnyCpu)
      return "--sqthread-poll-cpu " + std::to_string(options.sqthread_poll_cpu) + " is not a CPU this process may use";
    if (err == -EPERM && options.sqthread_poll)
      return "--sqthread-poll needs CAP_SYS_NICE on kernels before 5.11; drop it";
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
  const RingOptions options_;
  bool fixed_ = false;  // buffers registered (--fixedbufs, once the worker handed them over)
  unsigned unsubmitted_ = 0;
  unsigned in_flight_ = 0;
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
      auto get = [&](const char* name) { return unsigned(kIoUringEngine.option(options, name)); };
      const RingOptions ring{get("submit_batch"),       get("complete_batch"),     get("fixedbufs") != 0,
                             get("registerfiles") != 0, get("sqthread_poll") != 0, get("hipri") != 0,
                             get("sqthread_poll_cpu")};
      return std::make_unique<IoUringEngine>(target, depth, ring);
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
