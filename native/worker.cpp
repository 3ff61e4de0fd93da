#include "worker.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>

#include "clock.hpp"
#include "error.hpp"
#include "offsets.hpp"
#include "pattern.hpp"
#include "transfer.hpp"
#include "window_rule.hpp"

namespace gds {

Worker::Worker(const Job& job, const WorkerPlan& plan, RunControl& control)
    : job_(job), plan_(plan), control_(control) {}

Worker::~Worker() { release(); }

// Engine first (cuFile deregisters its buffers; the engine closes its
// target), then the buffers (the copy stream waits for copies in flight).
// Called on the worker thread at the end of run(), where the device is current.
void Worker::release() noexcept {
  try {
    engine_.reset();
    slots_.reset();
  } catch (...) {
  }
}

void Worker::setup() {
  const EngineInfo& engine = engine_by_name(job_.engine);
  slots_ = std::make_unique<ReadSlots>(job_, plan_.gpu, bool(control_.verify_device));
  if (job_.on_gpu()) result_.gpu = plan_.gpu;
  engine_ = engine.open(job_.target(job_.path), job_.qd, job_.engine_options);
  slots_->register_with(*engine_);
}

void Worker::run() noexcept {
  // Signals go to the Python thread, which turns Ctrl-C into a prompt stop.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  // A name top, gdb and py-spy show (at most 15 characters)
  pthread_setname_np(pthread_self(), ("gds-worker-" + std::to_string(plan_.index % 10000)).c_str());
  try {
    setup();
  } catch (...) {
    error_ = std::current_exception();
    control_.stop = true;
  }
  control_.ready.fetch_add(1);
  control_.notify();
  if (!error_ && control_.wait_at_gate()) {
    try {
      loop();
    } catch (...) {
      error_ = std::current_exception();
      control_.stop = true;
    }
  }
  control_.worker_stopped();  // before release(): teardown is not part of the measured window
  release();
}

// fsync(2) through the engine, timed; a failure ends the run naming it.
void Worker::sync() {
  const uint64_t started = now_ns();
  const int r = engine_->sync();
  if (r < 0) throw IoError("fsync of " + job_.path + ": " + errno_text(r));
  result_.fsync_latency.add(now_ns() - started);
  ++result_.fsyncs;
}

// Checks the bytes where they finally landed: host memory, or GPU memory
// (natively for the simulated device, through the cupy hook for a real GPU).
void Worker::verify(const IoRequest& r) {
  bad_blocks_.add(job_.path, slots_->bad_blocks(r, r.length, control_.verify_device));
  result_.verify_mismatches = bad_blocks_.count();
  result_.first_mismatch_offset = bad_blocks_.first_offset();
  result_.verified_blocks += r.length / pattern::kBlock;
}

namespace {

// The measured window of one worker, by its rule (window_rule.hpp), and what
// completes inside it. The window opens when the ramp ends, noticed at the
// next issue or completion.
class Window {
 public:
  // keep_rounds: the rounds whose latency this thread keeps a histogram of (0: none).
  Window(ThreadResult& out, std::atomic<uint64_t>& progress, RunControl& control, const WindowRule& rule,
         uint64_t interval, uint64_t keep_rounds)
      : out_(out), progress_(progress), control_(control), rule_(rule), interval_(interval), keep_rounds_(keep_rounds) {
    out_.round_latency.reserve(std::min<uint64_t>(keep_rounds, 64));
  }

  const WindowRule& rule() const { return rule_; }
  bool opened() const { return opened_; }
  // Opens the window if `now` is past its start; whether it is open.
  bool reached(uint64_t now, RunControl& control) {
    if (!opened_ && rule_.open_at(now)) {
      opened_ = true;
      getrusage(RUSAGE_THREAD, &cpu0_);
      control.open_window();
    }
    return opened_;
  }
  // A request whose bytes are where they are going at `when`.
  void completed(const IoRequest& r, uint64_t when) {
    when = std::max(when, r.submit_ns);
    out_.latency.add(when - r.submit_ns);
    if (r.first_byte_ns) out_.first_byte_latency.add(r.first_byte_ns);
    const uint64_t at = when - rule_.start;
    if (r.reread) {
      out_.reread_latency.add(when - r.submit_ns);
    } else {
      out_.first_pass_latency.add(when - r.submit_ns);
      out_.first_pass_bytes += r.length;
      ++out_.first_pass_ops;
      out_.first_pass_last_ns = std::max(out_.first_pass_last_ns, at);
    }
    out_.bytes += r.length;
    progress_.store(out_.bytes, std::memory_order_relaxed);
    ++out_.ops;
    if (at > out_.last_complete_ns) out_.last_complete_ns = at;
    if (control_.round_reads) {
      const uint64_t round = control_.count_round_read(at);
      if (round < keep_rounds_) {  // grows once a round, never per read
        if (round >= out_.round_latency.size()) out_.round_latency.resize(round + 1);
        out_.round_latency[round].add(when - r.submit_ns);
      }
    }
    // copies and reads are seen out of the order they finish in: place each by its own time
    const size_t tick = at / interval_;
    if (tick >= out_.timeline_bytes.size()) out_.timeline_bytes.resize(tick + 1, 0);
    out_.timeline_bytes[tick] += r.length;
  }
  // The window's last event is at `when` (an end fsync), if later than the last completion.
  void extend_to(uint64_t when) {
    if (opened_ && when > rule_.start) out_.last_complete_ns = std::max(out_.last_complete_ns, when - rule_.start);
  }
  void issued(uint64_t now) {
    if (!issued_) out_.first_submit_ns = now - rule_.start;
    issued_ = true;
  }
  // Stonewall: what this worker had done by `when` (once).
  void snapshot(uint64_t when) {
    if (snapshot_taken_) return;
    snapshot_taken_ = true;
    out_.stonewall_bytes = out_.bytes;
    out_.stonewall_ops = out_.ops;
    out_.stonewall_ns = when > rule_.start ? when - rule_.start : 0;
  }
  void close() {
    snapshot(now_ns());  // done before any stonewall: its snapshot is its total
    if (!opened_) return;
    rusage cpu1{};
    getrusage(RUSAGE_THREAD, &cpu1);
    out_.cpu_user_s = seconds(cpu1.ru_utime) - seconds(cpu0_.ru_utime);
    out_.cpu_sys_s = seconds(cpu1.ru_stime) - seconds(cpu0_.ru_stime);
  }

 private:
  ThreadResult& out_;
  std::atomic<uint64_t>& progress_;
  RunControl& control_;
  const WindowRule rule_;
  const uint64_t interval_, keep_rounds_;
  bool opened_ = false, issued_ = false, snapshot_taken_ = false;
  rusage cpu0_{};
};

}  // namespace

// The transfer loop (transfer.hpp) until the deadline, the byte budget or a
// stop. Each request is stamped just before it is queued, so its latency runs
// from issue to the completion being seen (fio's "clat" for a synchronous
// engine, its "lat" for an asynchronous one), or in bounce modes to its copy
// finishing. --io-size counts completions in the window plus what is still
// outstanding, so exactly the budget completes in it.
void Worker::loop() {
  started_ns_ = now_ns();
  const uint64_t start = control_.start_ns.load() + job_.ramp_ns;
  Window window(result_, progress_bytes_, control_,
                WindowRule{start, job_.runtime_ns ? start + job_.runtime_ns : UINT64_MAX, plan_.block_budget},
                job_.interval_ns, job_.round_reads ? kMaxRoundHistograms / job_.threads : 0);
  const WindowRule& rule = window.rule();
  OffsetSequence offsets = OffsetSequence::for_worker(plan_.first_byte, plan_.nblocks, job_.bs, job_.pattern == "rand",
                                                      job_.seed, plan_.index);
  TransferLoop transfers(*engine_, *slots_, job_.qd, job_.direction, job_.path, job_.direct);
  // room for the timeline of an ordinary run up front; a very long one grows it as it goes
  result_.timeline_bytes.reserve(
      std::min<uint64_t>(job_.runtime_ns ? job_.runtime_ns / job_.interval_ns + 2 : 256, 65536));
  bool submitting = true;

  auto next = [&](IoRequest& r, uint64_t now) {
    const bool measuring = window.reached(now, control_);
    if (!submitting || control_.stop.load(std::memory_order_relaxed) || rule.ended_at(now)) {
      submitting = false;
      return false;
    }
    if (!rule.may_issue(now, result_.ops, transfers.outstanding())) return false;
    r.offset = offsets.next();
    r.reread = offsets.rereading();
    if (measuring) window.issued(now);
    return true;
  };
  uint64_t written = 0;  // writes landed since the start, for --fsync-every
  auto landed = [&](IoRequest& r, uint64_t when) {
    if (r.direction == Direction::kWrite && job_.fsync_every && ++written % job_.fsync_every == 0) sync();
    if (job_.verify && r.direction == Direction::kRead) verify(r);  // writes are read back after the run
    if (window.reached(when, control_) && rule.counts(when)) window.completed(r, when);
    if (job_.stonewall && control_.stonewall.load(std::memory_order_relaxed)) window.snapshot(when);
  };
  transfers.run(next, landed);

  if (!control_.stop.load()) {  // this worker ran out of work (it was not stopped)
    uint64_t expected = 0;
    control_.first_done_ns.compare_exchange_strong(expected, now_ns());
    if (job_.stonewall) control_.stonewall = true;
  }
  if ((job_.fsync_end || engine_->writes_need_sync()) && !control_.stop.load()) {  // fio's end_fsync: timed
    sync();
    window.extend_to(now_ns());
  }
  window.close();
  result_.passes = offsets.passes_started();
  result_.reads_while_copying = transfers.queued_while_copying();
  result_.connections = engine_->connections();
  result_.retries = engine_->retries();
  result_.streamed_bytes = engine_->streamed_bytes();
}

}  // namespace gds
