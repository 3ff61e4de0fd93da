// SIMULATION: a CPU stand-in for a GPU, for testing the staging pipeline where
// no GPU exists. Not a measurement of any device: see device.hpp.
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "../buffers.hpp"
#include "../clock.hpp"
#include "../error.hpp"
#include "device.hpp"

namespace gds::gpu {
namespace {

// Copies run in order on one background thread, as on a CUDA stream.
struct SimOptions {
  long fail_copy = 0;      // the N-th copy fails (0: none)
  long copy_delay_us = 0;  // each copy also takes this long, like a slow link
  long devices = 1;        // how many simulated GPUs there are
};

class SimStream final : public CopyStream {
 public:
  SimStream(unsigned slots, SimOptions options) : done_ns_(slots, 0), state_(slots, kIdle), options_(options) {
    thread_ = std::thread([this] { copier(); });
  }
  ~SimStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void copy(void* dst, const void* src, size_t n, unsigned slot, Toward) override {  // memcpy either way
    std::lock_guard<std::mutex> lock(mu_);
    state_[slot] = kPending;
    queue_.push_back({dst, src, n, slot});
    cv_.notify_all();
  }

  bool poll(unsigned slot, uint64_t* done_ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    return finished(slot, done_ns);
  }

  uint64_t wait(unsigned slot) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return state_[slot] != kPending; });
    uint64_t t = 0;
    finished(slot, &t);
    return t;
  }

 private:
  enum State { kIdle, kPending, kDone, kFailed };
  struct Copy {
    void* dst;
    const void* src;
    size_t n;
    unsigned slot;
  };

  bool finished(unsigned slot, uint64_t* done_ns) {  // mu_ held
    if (state_[slot] == kFailed)
      throw IoError("simulated device: copy failed (injected fault at copy " + std::to_string(options_.fail_copy) +
                    ")");
    if (state_[slot] != kDone) return false;
    *done_ns = done_ns_[slot];
    state_[slot] = kIdle;
    return true;
  }

  void copier() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Copy c = queue_.front();
      queue_.pop_front();
      lock.unlock();
      bool fail = ++copies_ == options_.fail_copy;
      if (!fail) std::memcpy(c.dst, c.src, c.n);
      if (options_.copy_delay_us) std::this_thread::sleep_for(std::chrono::microseconds(options_.copy_delay_us));
      uint64_t t = now_ns();  // when the copy finished, as a GPU's event would say
      lock.lock();
      done_ns_[c.slot] = t;
      state_[c.slot] = fail ? kFailed : kDone;
      cv_.notify_all();
    }
  }

  std::vector<uint64_t> done_ns_;
  std::vector<State> state_;
  std::deque<Copy> queue_;  // at most `slots` entries, allocated as the pipeline first fills
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  long copies_ = 0;
  const SimOptions options_;
  std::thread thread_;
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(SimOptions options) : options_(options) {}
  bool simulated() const override { return true; }
  void make_current() override {}
  Memory alloc_device(size_t n, DeviceMemory how) override {  // "device memory" is host memory
    return how == DeviceMemory::kVmm ? alloc_mapped(n) : alloc_pinned(n);
  }
  Memory alloc_pinned(size_t n) override {
    auto buffers = std::make_shared<HostBuffers>(n);
    return Memory(buffers, buffers->data());
  }
  std::unique_ptr<CopyStream> stream(unsigned slots) override { return std::make_unique<SimStream>(slots, options_); }
  void put_rows(void* device_dst, const void* host_src, size_t width, size_t pitch, size_t height) override {
    for (size_t row = 0; row < height; ++row)
      std::memcpy(static_cast<char*>(device_dst) + row * pitch, static_cast<const char*>(host_src) + row * pitch,
                  width);
  }

 private:
  // --gpu-memory vmm's stand-in, made as VMM makes it: a range of addresses reserved (PROT_NONE),
  // then memory of its own (a memfd, as cuMemCreate's handle) mapped over all of it. What it tests
  // is gdsbench's side: buffers that are a mapping, not one allocator's block.
  static Memory alloc_mapped(size_t n) {
    constexpr size_t kGranularity = size_t(2) << 20;  // VMM's on today's GPUs
    const size_t size = (n + kGranularity - 1) / kGranularity * kGranularity;
    void* range = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED) throw IoError("mmap (reserving the stand-in's VMM range): " + errno_text(errno));
    const int fd = ::memfd_create("gdsbench-vmm-stand-in", MFD_CLOEXEC);
    const bool mapped = fd >= 0 && ::ftruncate(fd, off_t(size)) == 0 &&
                        ::mmap(range, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
    const std::string why = mapped ? "" : errno_text(errno);
    if (fd >= 0) ::close(fd);  // the mapping keeps the memory, as VMM's does after cuMemRelease
    if (!mapped) {
      ::munmap(range, size);
      throw IoError("memfd_create/mmap (the stand-in's VMM memory): " + why);
    }
    std::memset(range, 0, size);  // its pages made now, not in a measured read
    return Memory(static_cast<char*>(range), [size](char* p) { ::munmap(p, size); });
  }

  const SimOptions options_;
};

}  // namespace

namespace {

// "sim", or "sim:fail-copy=N,copy-delay-us=M,devices=K" (test hooks); InputError otherwise.
SimOptions parse_sim_options(const std::string& backend) {
  const std::string usage = "--gpu-backend " + backend +
                            ": use cuda, or sim[:fail-copy=N,copy-delay-us=M,devices=K] (a CPU stand-in for tests)";
  if (backend.rfind("sim", 0) != 0 || (backend.size() > 3 && backend[3] != ':')) throw InputError(usage);
  SimOptions options;
  size_t at = 4;
  while (at < backend.size()) {
    size_t end = backend.find(',', at);
    std::string item = backend.substr(at, end == std::string::npos ? std::string::npos : end - at);
    size_t eq = item.find('=');
    if (eq == std::string::npos) throw InputError(usage);
    char* end_of_number = nullptr;
    long value = std::strtol(item.c_str() + eq + 1, &end_of_number, 10);
    if (eq + 1 == item.size() || *end_of_number != '\0' || value < 0) throw InputError(usage);
    std::string key = item.substr(0, eq);
    if (key == "fail-copy")
      options.fail_copy = value;
    else if (key == "copy-delay-us")
      options.copy_delay_us = value;
    else if (key == "devices")
      options.devices = value;
    else
      throw InputError(usage);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (options.devices < 1) throw InputError(usage);
  return options;
}

}  // namespace

void check_backend(const std::string& backend) {
  if (backend != "cuda") parse_sim_options(backend);
}

std::unique_ptr<Device> open_simulated_device(const std::string& backend, int index) {
  const SimOptions options = parse_sim_options(backend);
  if (index < 0 || index >= options.devices)
    throw InputError("--gpu " + std::to_string(index) + ": the simulated machine has " +
                     std::to_string(options.devices) + " GPU(s), numbered 0 to " + std::to_string(options.devices - 1));
  return std::make_unique<SimDevice>(options);
}

}  // namespace gds::gpu
