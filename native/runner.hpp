// Runs a job: plans each worker's slice of the region, starts the workers
// behind one gate, waits while polling for cancellation, and collects what
// each thread measured.
#pragma once
#include <functional>

#include "job.hpp"
#include "worker.hpp"

namespace gds {

// poll(bytes measured so far, ns since the measured window opened; 0 during
// the ramp) is called every few milliseconds from the calling thread;
// returning true stops the run promptly and marks the result interrupted.
using PollFn = std::function<bool(uint64_t bytes, uint64_t elapsed_ns)>;
// verify_device checks GPU memory for --verify in GPU modes (may be empty).
JobResult run_job(const Job& job, const PollFn& poll, const DeviceVerifyFn& verify_device = {});

}  // namespace gds
