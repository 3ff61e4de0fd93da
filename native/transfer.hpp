// The one transfer loop every native reader runs, a benchmark Worker's and a
// training SampleReader's: up to qd requests at the engine, each staged by its
// direction,
//   read    queue -> reap -> [copy to the GPU] -> landed
//   write   [copy from the GPU] -> queue -> reap -> landed
// where the copy is the bounce modes' (2 x qd slots, so copies overlap the
// engine's work). The caller says what to move next and what to do with each
// request whose bytes are where they are going; the loop owns the order of the
// slots and the copies.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "clock.hpp"
#include "engine.hpp"
#include "read_slots.hpp"

namespace gds {

class TransferLoop {
 public:
  // target: named in errors; end_of_target: a read may stop short only there (UINT64_MAX: nowhere).
  TransferLoop(Engine& engine, ReadSlots& slots, unsigned depth, Direction direction, std::string target, bool direct,
               uint64_t end_of_target = UINT64_MAX)
      : engine_(engine),
        slots_(slots),
        copies_(slots.copies()),
        depth_(depth),
        direction_(direction),
        target_(std::move(target)),
        direct_(direct),
        end_of_target_(end_of_target),
        idle_(slots.requests().size()),
        done_(depth),
        copying_(unsigned(slots.requests().size())) {
    for (auto& r : slots.requests()) {
      r.direction = direction;
      idle_[n_idle_++] = &r;
    }
  }

  // next(r, now) -> bool: set r's offset and length to the next transfer, or say there is none
  //   for now (asked again once something lands; the loop ends when nothing is outstanding and
  //   next still has none).
  // landed(r, when): r's bytes are where they are going, since `when` (now_ns()).
  // A request is stamped (submit_ns) when next fills it, so its latency runs from issue to
  // landing: a copy included in bounce modes, either way.
  template <class Next, class Landed>
  void run(Next&& next, Landed&& landed) {
    const bool reading = direction_ == Direction::kRead;
    for (;;) {
      while (n_idle_ && (!reading || at_engine_ < depth_)) {  // refill
        IoRequest* r = idle_[n_idle_ - 1];
        const uint64_t now = now_ns();
        if (!next(*r, now)) break;
        --n_idle_;
        r->submit_ns = now;
        if (!reading && copies_) {  // a write's bytes come from the GPU first
          copies_->copy(r->buf, r->device_dst, r->length, r->slot, gpu::Toward::kHost);
          copying_.push(r);
        } else {
          queue(r);
        }
      }
      uint64_t when = 0;
      while (!reading && copying_.size() && at_engine_ < depth_ && copies_->poll(copying_.oldest()->slot, &when))
        queue(copying_.pop());
      if (at_engine_ == 0 && copying_.size() == 0) break;

      if (at_engine_ > 0) {
        const unsigned n = engine_.reap(1, done_.data(), depth_);  // also starts any still queued
        const uint64_t now = now_ns();
        for (unsigned i = 0; i < n; ++i) {
          IoRequest* r = done_[i];
          --at_engine_;
          check_transfer(*r, target_, direct_, end_of_target_);
          if (reading && copies_) {  // a read's bytes go on to the GPU
            copies_->copy(r->device_dst, r->buf, size_t(r->result), r->slot, gpu::Toward::kDevice);
            copying_.push(r);
          } else {
            land(r, now, landed);
          }
        }
      } else if (reading) {  // nothing at the engine: every free slot waits on a copy
        IoRequest* r = copying_.pop();
        land(r, copies_->wait(r->slot), landed);
      } else {
        IoRequest* r = copying_.pop();
        copies_->wait(r->slot);
        queue(r);
      }
      while (reading && copying_.size() && copies_->poll(copying_.oldest()->slot, &when))
        land(copying_.pop(), when, landed);
    }
  }

  // Requests taken by next() and not yet landed.
  unsigned outstanding() const { return at_engine_ + copying_.size(); }
  // Requests queued while a copy was in flight: how much reading and copying overlapped.
  uint64_t queued_while_copying() const { return queued_while_copying_; }

 private:
  void queue(IoRequest* r) {
    if (direction_ == Direction::kWrite) slots_.stamp(*r);  // its blocks say where they land (after any copy)
    engine_.queue(r);
    ++at_engine_;
    if (copying_.size()) ++queued_while_copying_;
  }
  template <class Landed>
  void land(IoRequest* r, uint64_t when, Landed& landed) {
    idle_[n_idle_++] = r;
    landed(*r, when);
  }

  Engine& engine_;
  const ReadSlots& slots_;
  gpu::CopyStream* copies_;
  const unsigned depth_;
  const Direction direction_;
  const std::string target_;
  const bool direct_;
  const uint64_t end_of_target_;
  std::vector<IoRequest*> idle_, done_;
  unsigned n_idle_ = 0, at_engine_ = 0;
  CopyRing copying_;
  uint64_t queued_while_copying_ = 0;
};

}  // namespace gds
