#include "worker.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "clock.hpp"
#include "error.hpp"
#include "offsets.hpp"
#include "pattern.hpp"

namespace gds {

Worker::Worker(const Job& job, const WorkerPlan& plan, RunControl& control)
    : job_(job), plan_(plan), control_(control) {}

Worker::~Worker() { release(); }

// Engine first (cuFile deregisters its buffers), then the copy stream (it
// waits for copies in flight), then the memory those used. Called on the
// worker thread at the end of run(), where the device is current.
void Worker::release() noexcept {
  try {
    engine_.reset();
    copies_.reset();
    staging_.reset();
    device_memory_.reset();
    host_.reset();
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Buffers per mode:
//   cpu            qd slots in host memory (buffers.hpp)
//   bounce         2 x qd slots, each a pinned staging buffer and its twin in
//                  device memory: while one slot's bytes are copied to the GPU,
//                  another is being read, so reads and copies overlap
//   gds            qd slots in device memory, read by cuFile directly
void Worker::setup() {
  const EngineInfo& engine = engine_by_name(job_.engine);
  const unsigned slots = job_.staged() ? 2 * job_.qd : job_.qd;
  const size_t bytes = size_t(job_.bs) * slots;
  requests_.resize(slots);
  if (job_.on_gpu()) {
    device_ = gpu::open_device(job_.gpu_backend, plan_.gpu);
    device_->make_current();  // this thread's allocations, streams and cuFile calls use it
    result_.gpu = plan_.gpu;
    device_memory_ = device_->alloc_device(bytes);
    if (job_.staged()) {
      staging_ = device_->alloc_pinned(bytes);
      copies_ = device_->stream(slots);
    }
    if (job_.verify && !device_->simulated() && !control_.verify_device)
      throw InputError(std::string("--verify in --mode ") + mode_name(job_.mode) + " checks GPU memory with cupy, which is not installed");
  } else {
    host_ = std::make_unique<HostBuffers>(bytes);
  }
  char* read_base = host_ ? host_->data() : staging_ ? staging_.get() : device_memory_.get();
  for (unsigned i = 0; i < slots; ++i) {
    requests_[i].slot = i;
    requests_[i].buf = read_base + size_t(i) * job_.bs;
    requests_[i].device_dst = staging_ ? device_memory_.get() + size_t(i) * job_.bs : nullptr;
    requests_[i].length = uint32_t(job_.bs);
  }
  if (engine.reads_file) {
    int flags = O_RDONLY | O_CLOEXEC | (job_.direct ? O_DIRECT : 0);
    fd_ = ::open(job_.path.c_str(), flags);
    if (fd_ < 0)
      throw InputError("path " + job_.path + ": cannot open for reading: " + errno_text(errno));
  }
  engine_ = engine.make(fd_, job_.qd);
  if (job_.gds_register) engine_->register_buffer(device_memory_.get(), bytes);
}

void Worker::run() noexcept {
  // Signals go to the Python thread, which turns Ctrl-C into a prompt stop.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  try {
    setup();
  } catch (...) {
    error_ = std::current_exception();
    control_.stop = true;
  }
  control_.ready.fetch_add(1);
  control_.notify();
  bool go = !error_;
  while (go && control_.start_ns.load(std::memory_order_acquire) == 0) {
    if (control_.stop.load()) go = false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  if (go) {
    try {
      loop();
    } catch (...) {
      error_ = std::current_exception();
      control_.stop = true;
    }
  }
  control_.worker_stopped();  // before release(): teardown is not part of the measured window
  release();
}

void Worker::check_read(const IoRequest& r) {
  if (r.result == int64_t(r.length)) return;
  std::string where = " reading " + std::to_string(r.length) + " bytes at offset " +
                      std::to_string(r.offset) + " of " + job_.path;
  if (r.result < 0) {
    std::string hint = (r.result == -EINVAL && job_.direct)
                           ? " (O_DIRECT needs --bs, --offset and buffers aligned to the "
                             "device's logical block size)"
                           : "";
    throw IoError(errno_text(int(r.result)) + where + hint);
  }
  throw IoError("short read: got " + std::to_string(r.result) + " bytes" + where +
                " (was the file truncated during the run?)");
}

// Checks the bytes where they finally landed: host memory, or GPU memory
// (natively for the simulated device, through the cupy hook for a real GPU).
void Worker::verify(const IoRequest& r) {
  const char* landed = r.device_dst ? r.device_dst : r.buf;
  uint64_t first = 0, bad;
  if (host_ || device_->simulated())
    bad = pattern::check(landed, r.length, r.offset, &first);
  else
    bad = control_.verify_device(landed, r.length, r.offset, plan_.gpu, &first);
  if (bad && result_.verify_mismatches == 0) result_.first_mismatch_offset = first;
  result_.verify_mismatches += bad;
  result_.verified_blocks += r.length / pattern::kBlock;
}

void Worker::loop() {
  const uint64_t t0 = control_.start_ns.load();
  started_ns_ = now_ns();
  const uint64_t measure_start = t0 + job_.ramp_ns;
  const uint64_t deadline = job_.runtime_ns ? measure_start + job_.runtime_ns : UINT64_MAX;
  const uint64_t interval = job_.interval_ns;
  const unsigned depth = job_.qd;
  const unsigned slots = unsigned(requests_.size());

  OffsetSequence offsets = OffsetSequence::for_worker(plan_.first_byte, plan_.nblocks, job_.bs,
                                                      job_.pattern == "rand", job_.seed, plan_.index);
  std::vector<IoRequest*> idle(slots), done(depth);
  for (unsigned i = 0; i < slots; ++i) idle[i] = &requests_[i];
  unsigned n_idle = slots, reading = 0;
  // Slots whose bytes are on their way to the GPU, oldest first (a ring).
  std::vector<IoRequest*> copying(slots);
  unsigned copy_head = 0, n_copying = 0;
  result_.timeline_bytes.reserve(job_.runtime_ns ? job_.runtime_ns / interval + 2 : 256);

  bool measuring = false, submitting = true, issued_in_window = false;
  rusage cpu0{};
  unsigned unsubmitted = 0;
  uint64_t now = 0;

  // The window opens when the ramp ends, noticed at the next issue or
  // completion. What counts is what completes inside it, as fio counts: a
  // read issued during the ramp that completes after it is measured, so
  // large blocks at depth do not read low by the bytes in flight. --io-size
  // counts completions in the window plus what is still outstanding, so
  // exactly the budget completes in it.
  auto start_measuring = [&]() {
    measuring = true;
    getrusage(RUSAGE_THREAD, &cpu0);
    control_.open_window();
  };
  // A request is complete when its bytes are where they are going: in host
  // memory, in device memory (gds), or copied to the GPU (bounce), at `when`:
  // when the worker saw a read finish, or when the GPU finished the copy.
  bool snapshot_taken = false;
  auto snapshot = [&](uint64_t when) {  // stonewall: what this worker had done by now
    snapshot_taken = true;
    result_.stonewall_bytes = result_.bytes;
    result_.stonewall_ops = result_.ops;
    result_.stonewall_ns = when > measure_start ? when - measure_start : 0;
  };
  auto account = [&](IoRequest* r, uint64_t when) {
    result_.latency.add(when - r->submit_ns);
    result_.bytes += r->length;
    progress_bytes_.store(result_.bytes, std::memory_order_relaxed);
    ++result_.ops;
    if (when - measure_start > result_.last_complete_ns) result_.last_complete_ns = when - measure_start;
    // copies and reads finish out of the order they are seen in: place each by its own time
    const size_t tick = (when - measure_start) / interval;
    if (tick >= result_.timeline_bytes.size()) result_.timeline_bytes.resize(tick + 1, 0);
    result_.timeline_bytes[tick] += r->length;
  };
  auto complete = [&](IoRequest* r, uint64_t when) {
    idle[n_idle++] = r;
    if (job_.verify) verify(*r);
    if (!measuring && when >= measure_start) start_measuring();
    if (measuring && when >= measure_start) account(r, std::max(when, r->submit_ns));
    if (job_.stonewall && !snapshot_taken && control_.stonewall.load(std::memory_order_relaxed)) snapshot(when);
  };
  auto oldest_copy = [&]() {
    IoRequest* r = copying[copy_head];
    copy_head = (copy_head + 1) % slots;
    --n_copying;
    return r;
  };

  for (;;) {
    // Refill the queue. Each read is stamped just before it is queued, so its
    // latency runs from issue to the completion being seen (fio's "clat" for a
    // synchronous engine, its "lat" for an asynchronous one), or in bounce
    // modes to its copy being seen done on the GPU.
    while (submitting && n_idle && reading < depth) {
      now = now_ns();
      if (!measuring && now >= measure_start) start_measuring();
      if (control_.stop.load(std::memory_order_relaxed) || now >= deadline) {
        submitting = false;
        break;
      }
      if (measuring && result_.ops + reading + n_copying >= plan_.block_budget) break;
      IoRequest* r = idle[--n_idle];
      r->offset = offsets.next();
      r->submit_ns = now;
      engine_->queue(r);
      ++reading;
      if (n_copying) ++result_.reads_while_copying;
      if (++unsubmitted >= job_.submit_batch) {
        engine_->submit();
        unsubmitted = 0;
      }
      if (measuring && !issued_in_window) {
        issued_in_window = true;
        result_.first_submit_ns = now - measure_start;
      }
    }
    if (reading == 0 && n_copying == 0) break;

    if (reading > 0) {
      unsigned n = engine_->reap(1, done.data(), depth);  // also submits any still queued
      unsubmitted = 0;
      now = now_ns();
      for (unsigned i = 0; i < n; ++i) {
        IoRequest* r = done[i];
        --reading;
        check_read(*r);
        if (copies_) {
          copies_->copy_to_device(r->device_dst, r->buf, r->length, r->slot);
          copying[(copy_head + n_copying++) % slots] = r;
        } else {
          complete(r, now);
        }
      }
    } else {  // nothing being read: every free slot waits on a copy
      IoRequest* r = oldest_copy();
      complete(r, copies_->wait(r->slot));
    }
    uint64_t when = 0;
    while (n_copying && copies_->poll(copying[copy_head]->slot, &when)) complete(oldest_copy(), when);
  }
  if (!control_.stop.load()) {  // this worker ran out of work (it was not stopped)
    uint64_t expected = 0;
    control_.first_done_ns.compare_exchange_strong(expected, now_ns());
    if (job_.stonewall) control_.stonewall = true;
  }
  if (!snapshot_taken) snapshot(now_ns());  // done before any stonewall: its snapshot is its total
  if (measuring) {
    rusage cpu1{};
    getrusage(RUSAGE_THREAD, &cpu1);
    result_.cpu_user_s = seconds(cpu1.ru_utime) - seconds(cpu0.ru_utime);
    result_.cpu_sys_s = seconds(cpu1.ru_stime) - seconds(cpu0.ru_stime);
  }
  result_.passes = offsets.passes_started();
}

}  // namespace gds
