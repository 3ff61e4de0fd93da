// Runs a job: plans each worker's slice of the region, starts the workers
// behind one gate, waits while polling for cancellation, and collects what
// each thread measured.
#pragma once
#include <functional>

#include "job.hpp"
#include "worker.hpp"

namespace gds {

struct PollInfo {
  uint64_t bytes;       // measured so far, all workers
  uint64_t elapsed_ns;  // since the measured window opened (0 during the ramp)
  bool worker_done;     // a worker here has finished its work
};
enum class PollAction { kContinue, kCancel, kStonewall };
// Called every few milliseconds from the calling thread. kCancel stops the
// run promptly and marks it interrupted; kStonewall has every worker note its
// progress (another process finished first).
using PollFn = std::function<PollAction(const PollInfo&)>;
// Called once every worker here is set up, just before the start gate opens:
// the place for a barrier with other processes. May throw to abandon the run.
using ReadyFn = std::function<void()>;

// verify_device checks GPU memory for --verify in GPU modes (may be empty).
JobResult run_job(const Job& job, const PollFn& poll, const DeviceVerifyFn& verify_device = {},
                  const ReadyFn& on_ready = {});

}  // namespace gds
