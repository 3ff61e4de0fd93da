#include "worker.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "error.hpp"
#include "offsets.hpp"
#include "pattern.hpp"

namespace gds {
namespace {

double seconds(const timeval& tv) { return double(tv.tv_sec) + double(tv.tv_usec) / 1e6; }

}  // namespace

Worker::Worker(const Job& job, const WorkerPlan& plan, RunControl& control)
    : job_(job), plan_(plan), control_(control) {}

Worker::~Worker() {
  engine_.reset();
  if (fd_ >= 0) ::close(fd_);
}

void Worker::setup() {
  const EngineInfo& engine = engine_by_name(job_.engine);
  if (engine.reads_file) {
    int flags = O_RDONLY | O_CLOEXEC | (job_.direct ? O_DIRECT : 0);
    fd_ = ::open(job_.path.c_str(), flags);
    if (fd_ < 0)
      throw InputError("path " + job_.path + ": cannot open for reading: " + errno_text(errno));
  }
  buffers_ = std::make_unique<HostBuffers>(size_t(job_.bs) * job_.qd);
  engine_ = engine.make(fd_, job_.qd);
}

void Worker::run() noexcept {
  // Signals go to the Python thread, which turns Ctrl-C into a prompt stop.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  try {
    setup();
  } catch (...) {
    error_ = std::current_exception();
    control_.stop = true;
  }
  control_.ready.fetch_add(1);
  control_.notify();
  if (error_) return;
  while (control_.start_ns.load(std::memory_order_acquire) == 0) {
    if (control_.stop.load()) return;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  try {
    loop();
  } catch (...) {
    error_ = std::current_exception();
    control_.stop = true;
  }
}

void Worker::check_read(const IoRequest& r) {
  if (r.result == int64_t(r.length)) return;
  std::string where = " reading " + std::to_string(r.length) + " bytes at offset " +
                      std::to_string(r.offset) + " of " + job_.path;
  if (r.result < 0) {
    std::string hint = (r.result == -EINVAL && job_.direct)
                           ? " (O_DIRECT needs --bs, --offset and buffers aligned to the "
                             "device's logical block size)"
                           : "";
    throw IoError(errno_text(int(r.result)) + where + hint);
  }
  throw IoError("short read: got " + std::to_string(r.result) + " bytes" + where +
                " (was the file truncated during the run?)");
}

void Worker::loop() {
  const uint64_t t0 = control_.start_ns.load();
  started_ns_ = now_ns();
  const uint64_t measure_start = t0 + job_.ramp_ns;
  const uint64_t deadline = job_.runtime_ns ? measure_start + job_.runtime_ns : UINT64_MAX;
  const uint64_t interval = job_.interval_ns;
  const unsigned depth = job_.qd;

  OffsetSequence offsets(plan_.first_byte, plan_.nblocks, job_.bs, job_.pattern == "rand",
                         pattern::mix64(job_.seed) + plan_.index);
  std::vector<IoRequest> requests(depth);
  std::vector<IoRequest*> idle(depth), done(depth);
  for (unsigned i = 0; i < depth; ++i) {
    requests[i].buf = buffers_->data() + size_t(i) * job_.bs;
    requests[i].length = uint32_t(job_.bs);
    idle[i] = &requests[i];
  }
  unsigned n_idle = depth, inflight = 0;
  uint64_t issued = 0;  // measured reads issued
  result_.timeline_bytes.reserve(job_.runtime_ns ? job_.runtime_ns / interval + 2 : 256);

  bool measuring = false, submitting = true;
  rusage cpu0{};
  uint64_t tick_end = measure_start + interval;
  size_t tick = 0;
  unsigned unsubmitted = 0;
  uint64_t now = 0;
  for (;;) {
    // Refill the queue. Each read is stamped just before it is queued, so its
    // latency runs from issue to the completion being seen (fio's "lat").
    while (submitting && n_idle) {
      now = now_ns();
      if (!measuring && now >= measure_start) {
        measuring = true;
        getrusage(RUSAGE_THREAD, &cpu0);
      }
      if (control_.stop.load(std::memory_order_relaxed) || now >= deadline ||
          issued >= plan_.block_budget) {
        submitting = false;
        break;
      }
      IoRequest* r = idle[--n_idle];
      r->offset = offsets.next();
      r->submit_ns = now;
      r->measured = measuring;
      engine_->queue(r);
      ++inflight;
      if (++unsubmitted >= job_.submit_batch) {
        engine_->submit();
        unsubmitted = 0;
      }
      if (measuring) {
        if (issued == 0) result_.first_submit_ns = now - measure_start;
        ++issued;
      }
    }
    if (inflight == 0) break;

    unsigned n = engine_->reap(1, done.data(), depth);  // also submits any still queued
    unsubmitted = 0;
    now = now_ns();
    for (unsigned i = 0; i < n; ++i) {
      IoRequest* r = done[i];
      --inflight;
      idle[n_idle++] = r;
      check_read(*r);
      if (job_.verify) {
        uint64_t first = 0;
        uint64_t bad = pattern::check(r->buf, r->length, r->offset, &first);
        if (bad && result_.verify_mismatches == 0) result_.first_mismatch_offset = first;
        result_.verify_mismatches += bad;
        result_.verified_blocks += r->length / pattern::kBlock;
      }
      if (!r->measured) continue;
      result_.latency.add(now - r->submit_ns);
      result_.bytes += r->length;
      progress_bytes_.store(result_.bytes, std::memory_order_relaxed);
      ++result_.ops;
      result_.last_complete_ns = now - measure_start;
      while (now >= tick_end) {
        ++tick;
        tick_end += interval;
      }
      if (tick >= result_.timeline_bytes.size()) result_.timeline_bytes.resize(tick + 1, 0);
      result_.timeline_bytes[tick] += r->length;
    }
  }
  if (measuring) {
    rusage cpu1{};
    getrusage(RUSAGE_THREAD, &cpu1);
    result_.cpu_user_s = seconds(cpu1.ru_utime) - seconds(cpu0.ru_utime);
    result_.cpu_sys_s = seconds(cpu1.ru_stime) - seconds(cpu0.ru_stime);
  }
  result_.passes = offsets.passes_started();
}

}  // namespace gds
