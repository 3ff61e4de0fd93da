#include "step_barrier.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <new>

#include "clock.hpp"
#include "error.hpp"

namespace gds {

namespace {

// The word's address, not the process: a shared futex wakes waiters in every process mapping it.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec timeout{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace

static_assert(std::atomic<uint32_t>::is_always_lock_free, "the barrier's words must be lock-free to be shared");

StepBarrier::StepBarrier(void* memory, uint32_t parties) : state_(static_cast<BarrierState*>(memory)) {
  if (parties > 0) {
    new (&state_->arrived) std::atomic<uint32_t>(0);
    new (&state_->generation) std::atomic<uint32_t>(0);
    new (&state_->aborted) std::atomic<uint32_t>(0);
    state_->parties = parties;
  }
}

uint64_t StepBarrier::wait() {
  const uint64_t started = now_ns();
  const uint32_t generation = state_->generation.load(std::memory_order_acquire);
  if (state_->aborted.load()) throw IoError("the step barrier was aborted: another accelerator failed");
  if (state_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == state_->parties) {
    state_->arrived.store(0, std::memory_order_relaxed);
    state_->generation.fetch_add(1, std::memory_order_release);
    futex_wake_all(&state_->generation);
    return now_ns() - started;
  }
  while (state_->generation.load(std::memory_order_acquire) == generation && !state_->aborted.load())
    futex_wait(&state_->generation, generation, 100000000);
  if (state_->aborted.load()) throw IoError("the step barrier was aborted: another accelerator failed");
  return now_ns() - started;
}

void StepBarrier::abort() {
  state_->aborted.store(1);
  state_->generation.fetch_add(1, std::memory_order_release);
  futex_wake_all(&state_->generation);
}

}  // namespace gds
