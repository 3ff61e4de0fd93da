// Runs a job: plans each worker's slice of the region, starts the workers
// behind one gate, waits while polling for cancellation, and collects what
// each thread measured.
#pragma once
#include <functional>

#include "job.hpp"

namespace gds {

// should_cancel is called every few milliseconds from the calling thread;
// returning true stops the run promptly and marks the result interrupted.
JobResult run_job(const Job& job, const std::function<bool()>& should_cancel);

}  // namespace gds
