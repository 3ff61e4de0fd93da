// One worker thread: its own engine, which opens its own descriptor (one
// shared descriptor caps throughput), its buffers and requests (all sized
// once, before the start gate: nothing is allocated per read), then the one
// transfer loop (transfer.hpp), timing and recording, until its stop condition.
#pragma once
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine.hpp"
#include "job.hpp"
#include "read_slots.hpp"

namespace gds {

// Shared between the runner and every worker of one run.
struct RunControl {
  std::atomic<bool> stop{false};      // cancel, error, or a peer's failure
  std::atomic<uint64_t> start_ns{0};  // 0 until the runner opens the start gate
  std::atomic<uint32_t> ready{0};     // workers set up and waiting at the gate
  uint32_t finished = 0;              // workers done (guarded by mu)
  std::mutex mu;                      // the runner sleeps on cv until a worker
  std::condition_variable cv;         // is ready or done, or a poll is due
  std::condition_variable gate;       // workers sleep on it until start_ns is set
  static constexpr std::chrono::milliseconds kGateRecheck{10};
  DeviceVerifyFn verify_device;            // for --verify with a real GPU
  std::atomic<uint64_t> first_done_ns{0};  // a worker here finished its work (monotonic ns; 0: none yet)
  std::atomic<bool> stonewall{false};      // note progress now: the first worker (here or elsewhere) is done

  // Process CPU over the measured window, one rule for every mode: the whole
  // process (CUDA's and cuFile's threads and io_uring's kernel workers
  // included), from the first worker to start measuring to the last to stop.
  uint32_t workers = 0;  // set by the runner before any worker starts
  std::atomic<bool> window_opened{false};
  std::atomic<uint32_t> workers_stopped{0};
  rusage window_cpu0{}, window_cpu1{};  // read by the runner after every worker is joined
  bool window_closed = false;

  void open_window() {
    if (!window_opened.exchange(true)) getrusage(RUSAGE_SELF, &window_cpu0);
  }
  void worker_stopped() {
    if (workers_stopped.fetch_add(1) + 1 == workers && window_opened.load()) {
      getrusage(RUSAGE_SELF, &window_cpu1);
      window_closed = true;
    }
  }

  void notify() {
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  }

  // The start gate. Workers sleep on it instead of polling start_ns: on a host whose
  // cores are shared (more ranks than cores), a few threads waking every few microseconds
  // held the one rank still setting up off the CPU for tens of seconds, and every other
  // rank waited for it at the barrier. A stop wakes them within kGateRecheck.
  void open_gate(uint64_t now) {
    {
      std::lock_guard<std::mutex> lock(mu);
      start_ns.store(now, std::memory_order_release);
    }
    gate.notify_all();
  }
  // Whether the gate opened (false: the run stopped first).
  bool wait_at_gate() {
    std::unique_lock<std::mutex> lock(mu);
    while (start_ns.load(std::memory_order_acquire) == 0 && !stop.load()) gate.wait_for(lock, kGateRecheck);
    return !stop.load();  // the loop ended: the gate opened, or the run stopped
  }

  // Rounds (--round-reads N): the reads completed in the window are counted across workers,
  // and the N-th, 2N-th, ... one's time is a round's end. Every round is N consecutive
  // completions of one run that never stops between rounds: no pipeline to drain or refill.
  uint64_t round_reads = 0;  // set by the runner before any worker starts
  std::atomic<uint64_t> window_reads{0};
  std::mutex round_mu;
  std::vector<uint64_t> round_end_ns;  // read by the runner after every worker is joined

  // The round a read completed `at` ns into the window belongs to; the round's end when it is its last.
  uint64_t count_round_read(uint64_t at) {
    const uint64_t n = window_reads.fetch_add(1, std::memory_order_relaxed) + 1;
    const uint64_t round = (n - 1) / round_reads;
    if (n % round_reads == 0) {
      std::lock_guard<std::mutex> lock(round_mu);  // once a round: never contended in earnest
      if (round_end_ns.size() <= round) round_end_ns.resize(round + 1, 0);
      round_end_ns[round] = at;
    }
    return round;
  }
};

struct WorkerPlan {
  uint32_t index = 0;
  uint64_t first_byte = 0;             // start of this worker's slice of the region
  uint64_t nblocks = 0;                // blocks in its slice
  uint64_t block_budget = UINT64_MAX;  // measured reads to issue (UINT64_MAX: no limit)
  int gpu = -1;                        // GPU index for GPU modes
};

class Worker {
 public:
  Worker(const Job& job, const WorkerPlan& plan, RunControl& control);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The thread's body: set up, wait at the gate, run. Never throws: a failure
  // is kept in error() and raises control.stop so peers end promptly.
  void run() noexcept;

  const ThreadResult& result() const { return result_; }
  std::exception_ptr error() const { return error_; }
  uint64_t started_ns() const { return started_ns_; }
  // Bytes measured so far; safe to read from another thread while running.
  uint64_t progress_bytes() const { return progress_bytes_.load(std::memory_order_relaxed); }

 private:
  void setup();
  void loop();
  void release() noexcept;
  void verify(const IoRequest& r);
  void sync();            // fsync through the engine, timed (--fsync-every, --fsync-end)
  BadBlocks bad_blocks_;  // --verify

  const Job& job_;
  const WorkerPlan plan_;
  RunControl& control_;
  std::unique_ptr<ReadSlots> slots_;  // buffers and requests, by mode
  std::unique_ptr<Engine> engine_;
  ThreadResult result_;
  std::exception_ptr error_;
  uint64_t started_ns_ = 0;
  std::atomic<uint64_t> progress_bytes_{0};  // written only by this worker: no contention
};

}  // namespace gds
