// The engine contract, after fio's ioengine_ops: an engine moves bytes from a
// file descriptor into caller-owned buffers and knows nothing of timing,
// statistics or offsets. The worker loop (worker.cpp) owns all of that.
//
//   queue(r)      hand over one read; the engine may do it at once (psync) or
//                 only remember it (io_uring)
//   submit()      start whatever is queued (a no-op where queue() already did)
//   reap(min,..)  submit whatever is still queued, wait until at least `min`
//                 reads have finished, and return the finished ones
//
// A finished request has result = bytes read, or -errno.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gds {

struct IoRequest {
  char* buf = nullptr;         // where the engine reads to (host, pinned staging or device memory)
  char* device_dst = nullptr;  // bounce modes: where the staged bytes are copied on the GPU
  unsigned slot = 0;           // index of this request in its worker
  uint64_t offset = 0;
  uint32_t length = 0;
  int64_t result = 0;
  uint64_t submit_ns = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual void queue(IoRequest* r) = 0;
  virtual void submit() {}
  // Tell the engine the buffers its reads will use (cuFile registration).
  virtual void register_buffer(void*, size_t) {}
  virtual unsigned reap(unsigned min, IoRequest** done, unsigned max) = 0;
};

// An engine whose reads finish inside queue() (pread, cuFileRead): depth 1,
// concurrency from threads. reap() hands back the one finished request.
class SynchronousEngine : public Engine {
 public:
  void queue(IoRequest* r) final {
    r->result = read(*r);
    done_ = r;
  }
  unsigned reap(unsigned, IoRequest** done, unsigned max) final {
    if (!done_ || max == 0) return 0;
    done[0] = done_;
    done_ = nullptr;
    return 1;
  }

 protected:
  // Read r.length bytes at r.offset into r.buf; bytes read, or -errno.
  virtual int64_t read(const IoRequest& r) = 0;

 private:
  IoRequest* done_ = nullptr;
};

struct EngineInfo {
  const char* name;
  unsigned max_depth;  // largest queue depth it supports
  bool reads_file;     // false: never opens the target (null)
  const char* about;
  std::unique_ptr<Engine> (*make)(int fd, unsigned depth);
  // Why the engine cannot run here ("" when it can).
  std::string (*unavailable_reason)();
};

// Every engine, in the order listed by `gdsbench info` (engines/registry.cpp).
const std::vector<EngineInfo>& engines();
const EngineInfo& engine_by_name(const std::string& name);

// Defined by each engine's own file.
extern const EngineInfo kNullEngine;
extern const EngineInfo kPsyncEngine;
extern const EngineInfo kIoUringEngine;
extern const EngineInfo kCuFileEngine;

}  // namespace gds
