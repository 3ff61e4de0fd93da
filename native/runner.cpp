#include "runner.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "clock.hpp"
#include "engine.hpp"
#include "error.hpp"
#include "worker.hpp"

namespace gds {
namespace {

constexpr auto kPollPeriod = std::chrono::milliseconds(20);

// Internal invariants: gdsbench/job/spec.py checks every option and rule
// first, with messages for users; these catch a Job built some other way.
void check_job(const Job& job) {
  const EngineInfo& engine = engine_by_name(job.engine);
  GDS_EXPECT(job.bs > 0 && job.bs <= kMaxBlock, "--bs must be between 1 byte and 1 GiB");
  GDS_EXPECT(job.qd >= 1 && job.qd <= engine.can.max_depth, "--qd " + std::to_string(job.qd) + ": the " + engine.name +
                                                                " engine takes a queue depth from 1 to " +
                                                                std::to_string(engine.can.max_depth));
  GDS_EXPECT(engine.can.does(job.direction),
             std::string("the ") + engine.name + " engine does not " + direction_name(job.direction));
  for (const EngineOption& o : engine.options) {
    const uint64_t value = engine.option(job.engine_options, o.name);
    GDS_EXPECT(value >= o.low && value <= o.high && (!o.at_most_depth || value <= job.qd),
               std::string(o.name) + " is out of its bounds");
  }
  GDS_EXPECT(job.threads >= 1 && job.threads <= kMaxThreads, "--threads must be between 1 and 1024");
  GDS_EXPECT(job.pattern == "seq" || job.pattern == "rand", "--pattern must be seq or rand");
  // Under --gpu-backend sim a host engine stands in for cuFile: the stand-in's "device memory" is host memory.
  const bool gds_engine = job.mode == Mode::kGds && !job.simulated_gpu();
  GDS_EXPECT(gds_engine == engine.can.gpu_buffers,
             "--mode gds reads with an engine that takes GPU buffers, and only it does");
  GDS_EXPECT(job.size / job.bs >= job.threads, "the region (--size) must hold at least one --bs block per thread");
  GDS_EXPECT(job.runtime_ns || job.io_size, "give --runtime or --io-size: nothing would stop the run");
  GDS_EXPECT(job.interval_ns > 0, "--interval must be positive");
  GDS_EXPECT(!job.on_gpu() || !job.gpu.empty(), "--gpu: give at least one GPU index");
  GDS_EXPECT(!job.verify || (job.bs % 4096 == 0 && job.offset % 4096 == 0),
             "--verify checks 4 KiB pattern blocks: --bs and --offset must be multiples of 4 KiB");
}

std::vector<WorkerPlan> plan_workers(const Job& job) {
  const uint64_t nblocks = job.size / job.bs;
  const uint64_t budget_total = job.io_size ? job.io_size / job.bs : 0;
  std::vector<WorkerPlan> plans(job.threads);
  for (uint32_t i = 0; i < job.threads; ++i) {
    uint64_t lo = nblocks * i / job.threads, hi = nblocks * (i + 1) / job.threads;
    plans[i].index = i;
    plans[i].first_byte = job.offset + lo * job.bs;
    plans[i].nblocks = hi - lo;
    if (job.on_gpu()) plans[i].gpu = job.gpu[i % job.gpu.size()];  // round-robin over threads
    if (job.io_size) plans[i].block_budget = budget_total / job.threads + (i < budget_total % job.threads ? 1 : 0);
  }
  return plans;
}

// What every worker measured, once all are joined and none failed.
void collect(const RunControl& control, const std::vector<std::unique_ptr<Worker>>& workers, JobResult& result) {
  if (control.window_closed) {
    result.window_cpu_user_s = seconds(control.window_cpu1.ru_utime) - seconds(control.window_cpu0.ru_utime);
    result.window_cpu_sys_s = seconds(control.window_cpu1.ru_stime) - seconds(control.window_cpu0.ru_stime);
  }
  if (uint64_t done = control.first_done_ns.load()) result.first_done_ns = done - control.start_ns.load();
  result.round_end_ns = control.round_end_ns;
  uint64_t first = UINT64_MAX, last = 0;
  for (auto& w : workers) {
    result.threads.push_back(w->result());
    if (w->started_ns()) {
      first = std::min(first, w->started_ns());
      last = std::max(last, w->started_ns());
    }
  }
  result.start_skew_ns = last >= first && first != UINT64_MAX ? last - first : 0;
}

}  // namespace

namespace {

// Wait until done(), calling poll every kPollPeriod with the bytes done so
// far (GIL released by the caller): Ctrl-C cancels the run, a stonewall stops it.
template <typename Done>
void wait_polling(RunControl& control, const std::vector<std::unique_ptr<Worker>>& workers, const Job& job,
                  const PollFn& poll, JobResult& result, Done done) {
  std::unique_lock<std::mutex> lock(control.mu);
  while (!done()) {
    control.cv.wait_for(lock, kPollPeriod);
    if (done()) break;
    lock.unlock();
    uint64_t bytes = 0, start = control.start_ns.load(), now = now_ns();
    for (auto& w : workers) bytes += w->progress_bytes();
    uint64_t measured_since = start ? start + job.ramp_ns : now;
    PollAction action =
        poll({bytes, now > measured_since ? now - measured_since : 0, control.first_done_ns.load() != 0});
    if (action == PollAction::kCancel && !result.interrupted) {
      result.interrupted = true;
      control.stop = true;
    } else if (action == PollAction::kStonewall) {
      control.stonewall = true;
    }
    lock.lock();
  }
}

// Open the start gate, after on_ready (a caller's barrier across processes);
// its error, if it failed, stops the run and is rethrown once threads are joined.
std::exception_ptr open_gate(RunControl& control, const ReadyFn& on_ready, JobResult& result) {
  std::exception_ptr ready_error;
  if (!control.stop.load() && on_ready) {
    try {
      on_ready();
    } catch (...) {
      ready_error = std::current_exception();
      control.stop = true;
    }
  }
  if (!control.stop.load()) {
    result.start_realtime_ns = realtime_ns();
    control.open_gate(now_ns());
  }
  return ready_error;
}

}  // namespace

JobResult run_job(const Job& job, const PollFn& poll, const DeviceVerifyFn& verify_device, const ReadyFn& on_ready) {
  check_job(job);
  RunControl control;
  control.verify_device = verify_device;
  control.workers = job.threads;
  control.round_reads = job.round_reads;
  std::vector<std::unique_ptr<Worker>> workers;
  for (const WorkerPlan& plan : plan_workers(job)) workers.push_back(std::make_unique<Worker>(job, plan, control));

  std::vector<std::thread> threads;
  rusage cpu0{}, cpu1{};
  getrusage(RUSAGE_SELF, &cpu0);
  const uint64_t wall0 = now_ns();
  JobResult result;
  std::exception_ptr ready_error;
  // Whatever goes wrong below, every started thread is stopped and joined
  // before the error leaves: a joinable std::thread must never be destroyed.
  try {
    for (auto& w : workers)
      threads.emplace_back([&control, w = w.get()] {
        w->run();
        std::lock_guard<std::mutex> lock(control.mu);
        ++control.finished;
        control.cv.notify_all();
      });
    // The gate opens once every worker is set up, so no thread's setup
    // (open, allocation, ring creation) lands inside another's measurement.
    wait_polling(control, workers, job, poll, result,
                 [&] { return control.ready.load() == job.threads || control.stop.load(); });
    ready_error = open_gate(control, on_ready, result);
    wait_polling(control, workers, job, poll, result, [&] { return control.finished == job.threads; });
    for (auto& t : threads) t.join();
  } catch (...) {
    control.stop = true;
    for (auto& t : threads)
      if (t.joinable()) t.join();
    throw;
  }
  result.wall_ns = now_ns() - wall0;
  getrusage(RUSAGE_SELF, &cpu1);
  result.process_cpu_user_s = seconds(cpu1.ru_utime) - seconds(cpu0.ru_utime);
  result.process_cpu_sys_s = seconds(cpu1.ru_stime) - seconds(cpu0.ru_stime);
  if (ready_error) std::rethrow_exception(ready_error);
  for (auto& w : workers)
    if (w->error()) std::rethrow_exception(w->error());
  collect(control, workers, result);
  return result;
}

}  // namespace gds
