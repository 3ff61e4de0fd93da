// What every native reader (a benchmark worker, a training sample reader)
// reads into, or writes from, chosen by mode and sized once before any transfer:
//   cpu            qd slots in host memory (buffers.hpp)
//   bounce         2 x qd slots, each a pinned staging buffer and its twin in
//                  device memory: while one slot's bytes are copied to the GPU,
//                  another is being read, so reads and copies overlap
//   gds            qd slots in device memory, read by cuFile directly; for writes,
//                  a host shadow of them where each write's stamp is made
// and the checks every reader makes of a finished request.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "engine.hpp"
#include "gpu/device.hpp"
#include "job.hpp"

namespace gds {

// Checks bytes that landed in GPU memory against the prepare pattern: returns
// the number of bad 4 KiB blocks and appends their file offsets to
// *bad_offsets. Supplied by the Python layer (cupy, on the GPU); the simulated
// device is checked natively.
using DeviceVerifyFn = std::function<uint64_t(const void* device_ptr, size_t length, uint64_t file_offset, int gpu,
                                              std::vector<uint64_t>* bad_offsets)>;

class ReadSlots {
 public:
  // Opens the GPU (bound to the calling thread) in GPU modes. Throws InputError
  // where --verify would need a GPU checker that was not supplied.
  ReadSlots(const Job& job, int gpu, bool have_device_verify);
  ~ReadSlots();
  ReadSlots(const ReadSlots&) = delete;
  ReadSlots& operator=(const ReadSlots&) = delete;

  std::vector<IoRequest>& requests() { return requests_; }
  gpu::CopyStream* copies() const { return copies_.get(); }  // staged modes only
  void make_current() const;                                 // bind the calling thread to the GPU (if any)
  void register_with(Engine& engine) const;                  // the device memory reads go into, if any
  // A write's bytes, about to go to the engine, made the pattern blocks of where they land.
  void stamp(IoRequest& r) const;
  // Every slot's payload, for writes, from job.seed: once when made, and again for a new seed.
  void fill_for_writes(const Job& job);
  // The file offsets of the bad blocks among the bytes of r where they finally landed.
  std::vector<uint64_t> bad_blocks(const IoRequest& r, uint64_t length, const DeviceVerifyFn& verify_device) const;

 private:
  int gpu_;
  size_t bytes_;
  std::unique_ptr<HostBuffers> host_;    // cpu mode: reads land here
  std::unique_ptr<gpu::Device> device_;  // GPU modes
  gpu::Memory staging_, device_memory_;  // bounce: pinned staging -> device; gds: device only
  std::unique_ptr<HostBuffers> shadow_;  // gds writes: the device slots' blocks, as host memory
  std::unique_ptr<gpu::CopyStream> copies_;
  std::vector<IoRequest> requests_;
};

// IoError unless r moved all it asked for; a short read is allowed only where
// it ends at end_of_file (pass UINT64_MAX where none is allowed).
void check_transfer(const IoRequest& r, const std::string& path, bool direct, uint64_t end_of_file = UINT64_MAX);

// --verify: the distinct bad blocks a reader has seen, so a block read again
// (a benchmark's next pass, a training run's next epoch) counts once.
class BadBlocks {
 public:
  void add(const std::string& path, const std::vector<uint64_t>& offsets);
  uint64_t count() const { return seen_.size(); }
  // The first bad block, by path and then offset: the same whatever order the reads ran in.
  uint64_t first_offset() const { return seen_.empty() ? 0 : seen_.begin()->second; }
  std::string first_path() const { return seen_.empty() ? std::string() : seen_.begin()->first; }

 private:
  std::set<std::pair<std::string, uint64_t>> seen_;
};

// Slots whose bytes are on their way to the GPU, oldest first (bounce modes).
class CopyRing {
 public:
  explicit CopyRing(unsigned slots) : ring_(slots) {}
  unsigned size() const { return n_; }
  IoRequest* oldest() const { return ring_[head_]; }
  void push(IoRequest* r) { ring_[(head_ + n_++) % ring_.size()] = r; }
  IoRequest* pop() {
    IoRequest* r = ring_[head_];
    head_ = (head_ + 1) % unsigned(ring_.size());
    --n_;
    return r;
  }

 private:
  std::vector<IoRequest*> ring_;
  unsigned head_ = 0, n_ = 0;
};

}  // namespace gds
