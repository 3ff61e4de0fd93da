// A job as the native core runs it. Field names match gdsbench.spec.JobSpec
// one for one; the Python layer validates and resolves every field (a region
// length of 0 becomes the real length, and so on) before a Job reaches here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "histogram.hpp"

namespace gds {

constexpr uint64_t kMaxBlock = 1ull << 30;  // bytes per read: under Linux's 2 GiB cap on one read(2)
constexpr uint32_t kMaxThreads = 1024;      // per process; beyond this, threads only contend

// Where the bytes go. gdsbench/job/modes.py declares every mode; the native
// core runs these four (kvikio is driven from Python).
enum class Mode { kCpu, kBounce, kCachedBounce, kGds };
Mode parse_mode(const std::string& name);  // the one place a mode name is read; InputError if unknown
const char* mode_name(Mode mode);

struct Job {
  std::string path;
  std::string engine = "psync";
  uint64_t bs = 4096;         // bytes per read
  uint32_t qd = 1;            // reads in flight per thread
  uint32_t submit_batch = 1;  // reads queued before each submission (io_uring)
  uint32_t threads = 1;
  std::string pattern = "seq";       // "seq" or "rand"
  uint64_t offset = 0;               // region start, bytes
  uint64_t size = 0;                 // region length, bytes (resolved: never 0 here)
  uint64_t runtime_ns = 0;           // stop after this long (0: no time limit)
  uint64_t io_size = 0;              // stop after this many bytes (0: no byte limit)
  uint64_t ramp_ns = 0;              // run this long first, outside the statistics
  bool direct = true;                // O_DIRECT
  bool verify = false;               // check every block against the prepare pattern
  uint64_t seed = 1;                 // random order
  uint64_t interval_ns = 100000000;  // throughput timeline resolution
  Mode mode = Mode::kCpu;
  std::vector<int> gpu{0};           // GPU indexes: threads take them round-robin
  std::string gpu_backend = "cuda";  // "cuda", or "sim": a CPU stand-in for tests (gpu/device.hpp)
  bool gds_register = false;         // cuFileBufRegister the device buffers (gds)
  bool stonewall = false;            // when the first worker finishes, every worker notes what it had done
  uint64_t round_reads = 0;          // every N reads completed in the window are one round, timed (0: none)

  // Reads land in pinned host memory and are then copied to the GPU.
  bool staged() const { return mode == Mode::kBounce || mode == Mode::kCachedBounce; }
  bool on_gpu() const { return mode != Mode::kCpu; }
};

struct ThreadResult {
  int gpu = -1;  // GPU this thread read into (-1: none)
  LatencyHistogram latency;
  uint64_t bytes = 0;
  uint64_t ops = 0;
  uint64_t first_submit_ns = 0;          // relative to the measured window's start
  uint64_t last_complete_ns = 0;         // relative to the measured window's start
  std::vector<uint64_t> timeline_bytes;  // bytes completed per interval
  double cpu_user_s = 0, cpu_sys_s = 0;  // this thread, measured window only
  uint64_t verified_blocks = 0;
  uint64_t verify_mismatches = 0;
  uint64_t first_mismatch_offset = 0;
  uint64_t passes = 0;               // passes over its slice begun
  uint64_t reads_while_copying = 0;  // bounce: reads issued while a copy was in flight (overlap)
  // Stonewall: bytes and reads done when the first worker anywhere finished,
  // and when this worker noticed (ns after the window opened).
  uint64_t stonewall_bytes = 0, stonewall_ops = 0, stonewall_ns = 0;
  // --round-reads: the latency of this thread's reads in each round (empty where too many
  // rounds x threads would be kept: see kMaxRoundHistograms).
  std::vector<LatencyHistogram> round_latency;
};

// Per-round histograms kept at most, over every thread of a run (14.5 KiB each).
constexpr uint64_t kMaxRoundHistograms = 8192;

struct JobResult {
  std::vector<ThreadResult> threads;
  bool interrupted = false;
  uint64_t start_skew_ns = 0;     // spread of thread start times
  double process_cpu_user_s = 0;  // whole process, whole run: set-up, ramp and teardown included
  double process_cpu_sys_s = 0;
  double window_cpu_user_s = 0;  // whole process, measured window only (RunControl::open_window)
  double window_cpu_sys_s = 0;
  uint64_t wall_ns = 0;            // whole run, ramp included
  uint64_t start_realtime_ns = 0;  // CLOCK_REALTIME when the gate opened: a clock other processes share
  uint64_t first_done_ns = 0;      // when a worker here first finished its work (ns after the gate; 0: none)
  std::vector<uint64_t>
      round_end_ns;  // --round-reads: when each whole round's last read completed (ns into the window)
};

}  // namespace gds
