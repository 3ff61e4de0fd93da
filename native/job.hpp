// A job as the native core runs it, and what it reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine.hpp"
#include "histogram.hpp"

namespace gds {

constexpr uint64_t kMaxBlock = 1ull << 30;  // bytes per read: under Linux's 2 GiB cap on one read(2)
constexpr uint32_t kMaxThreads = 1024;      // per process; beyond this, threads only contend

// Where the bytes go. gdsbench/job/modes.py declares every mode; the native
// core runs these four (kvikio is driven from Python).
enum class Mode { kCpu, kBounce, kCachedBounce, kGds };
Mode parse_mode(const std::string& name);  // the one place a mode name is read; InputError if unknown
const char* mode_name(Mode mode);

// Every field of a job that the Python layer sets from JobSpec's native
// options, listed once: the struct below and its binding (bindings.cpp) are
// made from this list, and gdsbench.execution.native checks it against JobSpec
// on import, so a field added on one side only fails at once. What each means,
// and its bounds, is JobSpec's (gdsbench/job/spec.py): the Python layer
// validates and resolves every field (a region length of 0 becomes the real
// length, and so on) before a Job reaches here, so none has a default of its own.
// clang-format off
#define GDS_JOB_SPEC_FIELDS(X)                                                                              \
  X(std::string, path) X(std::string, engine) X(uint64_t, bs) X(uint32_t, qd)                               \
  X(uint32_t, threads) X(std::string, pattern) X(uint64_t, offset) X(uint64_t, size)                        \
  X(uint64_t, runtime_ns) X(uint64_t, io_size) X(uint64_t, ramp_ns) X(bool, direct) X(bool, uncached)       \
  X(bool, fadvise_hint) X(bool, verify) X(uint64_t, seed) X(uint64_t, interval_ns) X(std::vector<int>, gpu) \
  X(std::string, gpu_backend) X(std::string, gpu_memory) X(bool, stonewall) X(uint64_t, round_reads)       \
  X(uint64_t, fsync_every) X(bool, fsync_end)
// clang-format on

struct Job {
#define GDS_DECLARE(type, name) type name{};
  GDS_JOB_SPEC_FIELDS(GDS_DECLARE)
#undef GDS_DECLARE
  Mode mode = Mode::kCpu;                  // set from its name (parse_mode)
  Direction direction = Direction::kRead;  // set from JobSpec's --rw
  OptionValues engine_options;             // the options its engine declares (EngineInfo::options)

  // Transfers go through pinned host memory, copied to or from the GPU.
  bool staged() const { return mode == Mode::kBounce || mode == Mode::kCachedBounce; }
  bool on_gpu() const { return mode != Mode::kCpu; }
  bool simulated_gpu() const { return on_gpu() && gpu_backend.rfind("sim", 0) == 0; }  // gpu/sim_device.cpp
  // What its engine opens for one file or object: the job's way with the page cache and direction.
  Target target(const std::string& at, uint64_t create_size = 0, const std::string& mark = "") const;
};

// What a run reports, each field listed once: the structs below, the dicts the
// binding builds, and the names gdsbench.execution.record checks its records
// against on import (a field added on one side only fails at once). Units are
// in the names; times are ns from the measured window's start unless noted.
// clang-format off
#define GDS_THREAD_RESULT_FIELDS(X)                                                                        \
  X(int, gpu, -1)                       /* the GPU it read into (-1: none) */                              \
  X(LatencyHistogram, latency, {})                                                                         \
  X(uint64_t, bytes, 0) X(uint64_t, ops, 0)                                                                \
  X(uint64_t, first_submit_ns, 0) X(uint64_t, last_complete_ns, 0)                                         \
  X(std::vector<uint64_t>, timeline_bytes, {})  /* bytes completed per interval */                         \
  X(double, cpu_user_s, 0) X(double, cpu_sys_s, 0)  /* this thread, measured window only */                \
  X(uint64_t, verified_blocks, 0) X(uint64_t, verify_mismatches, 0) X(uint64_t, first_mismatch_offset, 0)  \
  X(uint64_t, passes, 0)                /* passes over its slice begun */                                  \
  X(uint64_t, reads_while_copying, 0)   /* bounce: reads issued while a copy was in flight (overlap) */    \
  X(uint64_t, connections, 0)           /* connections its engine opened (curl) */                         \
  X(uint64_t, retries, 0)               /* requests its engine tried again (curl --retries), apart from ops */ \
  X(uint64_t, streamed_bytes, 0)        /* of its reads (ramp too), copied with streaming stores (copy.hpp) */ \
  X(uint64_t, fsyncs, 0) X(LatencyHistogram, fsync_latency, {})  /* writes: fsync(2) calls and their time */ \
  X(LatencyHistogram, first_byte_latency, {})  /* issue to the answer's first byte, where the engine sees it */ \
  /* reads of blocks read for the first time in this run (its first pass) and of blocks read again, apart */ \
  X(uint64_t, first_pass_bytes, 0) X(uint64_t, first_pass_ops, 0) X(uint64_t, first_pass_last_ns, 0)      \
  X(LatencyHistogram, first_pass_latency, {}) X(LatencyHistogram, reread_latency, {})                      \
  /* stonewall: bytes and reads done when the first worker anywhere finished, and when this one noticed */ \
  X(uint64_t, stonewall_bytes, 0) X(uint64_t, stonewall_ops, 0) X(uint64_t, stonewall_ns, 0)               \
  /* --round-reads: its reads' latency per round (empty where too many would be kept: kMaxRoundHistograms) */ \
  X(std::vector<LatencyHistogram>, round_latency, {})
#define GDS_JOB_RESULT_FIELDS(X)                                                                           \
  X(std::vector<ThreadResult>, threads, {})                                                                \
  X(bool, interrupted, false)                                                                              \
  X(uint64_t, start_skew_ns, 0)         /* spread of thread start times */                                 \
  /* whole process, whole run (set-up, ramp and teardown included); then the measured window only */       \
  X(double, process_cpu_user_s, 0) X(double, process_cpu_sys_s, 0)                                         \
  X(double, window_cpu_user_s, 0) X(double, window_cpu_sys_s, 0)                                           \
  X(uint64_t, wall_ns, 0)               /* whole run, ramp included */                                     \
  X(uint64_t, start_realtime_ns, 0)     /* CLOCK_REALTIME when the gate opened: a clock processes share */ \
  X(uint64_t, first_done_ns, 0)         /* when a worker here first finished (ns after the gate; 0: none) */ \
  X(std::vector<uint64_t>, round_end_ns, {})  /* --round-reads: when each whole round's last read completed */
// clang-format on

#define GDS_DECLARE_RESULT(type, name, initial) type name = type(initial);
struct ThreadResult {
  GDS_THREAD_RESULT_FIELDS(GDS_DECLARE_RESULT)
};

// Per-round histograms kept at most, over every thread of a run (14.5 KiB each).
constexpr uint64_t kMaxRoundHistograms = 8192;

struct JobResult {
  GDS_JOB_RESULT_FIELDS(GDS_DECLARE_RESULT)
};
#undef GDS_DECLARE_RESULT

}  // namespace gds
