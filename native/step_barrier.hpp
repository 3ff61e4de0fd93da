// The step barrier of `gdsbench train`: every accelerator waits for every
// other after each step, as data-parallel training does. The accelerators are
// processes, so the barrier lives in memory they all map (a file under
// /dev/shm): an arrival count and a generation word, and waits on the
// generation with futex. No lock is ever held, so a process that dies holds
// nothing; whoever notices (the parent watches every child) raises `aborted`,
// and every waiter returns within a tenth of a second.
#pragma once
#include <atomic>
#include <cstdint>

namespace gds {

struct BarrierState {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> aborted;
  uint32_t parties;
};

class StepBarrier {
 public:
  // memory: at least sizeof(BarrierState) bytes, shared by every party; the
  // creator passes parties > 0 to initialise it, the others pass 0.
  StepBarrier(void* memory, uint32_t parties);
  // Blocks until every party has arrived; returns the nanoseconds waited.
  // Throws IoError once the barrier is aborted.
  uint64_t wait();
  void abort();
  uint32_t parties() const { return state_->parties; }

 private:
  BarrierState* state_;
};

}  // namespace gds
