// Reads whole samples for the training emulation (gdsbench train): one reader
// per read thread, as DLIO's data-loader workers each read one sample at a
// time. A sample is a region of a file, read in chunks of job.bs with up to
// job.qd chunks in flight, through the same engines and into the same memory
// as a benchmark worker's reads (read_slots.hpp): host memory, or GPU memory
// directly (gds) or through pinned staging (bounce). Buffers are sized once;
// the engine is opened per file, as a data loader opens each file it reads,
// and again whenever another thread reads with it (each epoch starts new read
// threads): an engine belongs to the thread that made it, as an io_uring ring
// set up SINGLE_ISSUER must.
//
// Made from a write job, the same object writes regions instead (write()):
// the KV-cache emulation's storage tier stores each entry so, its blocks
// stamped with the pattern as a benchmark's writes are, and fsync'd when the
// job says fsync_end.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine.hpp"
#include "histogram.hpp"
#include "job.hpp"
#include "read_slots.hpp"

namespace gds {

struct SampleRead {
  uint64_t bytes = 0;  // of the region, read (it stops short where the file ends; O_DIRECT's whole
                       // blocks around an unaligned region are read, not counted)
  uint64_t chunks = 0;
  uint64_t ns = 0;  // first chunk issued to the last one landed
};

class SampleReader {
 public:
  // job: mode, engine, bs (chunk size), qd (chunks in flight), direct, verify,
  // gpu_backend, engine_options; gpu: the GPU index in GPU modes.
  SampleReader(const Job& job, int gpu, DeviceVerifyFn verify_device);
  ~SampleReader();
  SampleReader(const SampleReader&) = delete;
  SampleReader& operator=(const SampleReader&) = delete;

  // Read [offset, offset + length) of path. Throws IoError (a failed or short
  // read) or InputError (the file cannot be opened).
  SampleRead read(const std::string& path, uint64_t offset, uint64_t length);
  // Write [offset, offset + length) of path, an existing file this job may write (a write job's
  // reader only, which reads nothing; InputError otherwise), then fsync it if job.fsync_end: ns
  // includes the fsync. Offset and length in whole 4 KiB pattern blocks. Throws IoError (a failed
  // or short write, a failed fsync); after a failure the engine is opened anew.
  SampleRead write(const std::string& path, uint64_t offset, uint64_t length);
  // Create the object at path (a URL its engine writes: S3), `length` bytes in whole pattern
  // blocks, written whole, carrying `mark`; only where none is there (the engine's answer
  // otherwise is an IoError). Its engine is opened for it alone.
  SampleRead create(const std::string& path, uint64_t length, const std::string& mark);
  // The payload of this writer's writes from now on: its slots refilled from `seed`, so that many
  // files or objects written by one writer are not alike block for block (pattern.file_seed). A
  // write job's reader only (InputError otherwise).
  void reseed(uint64_t seed);

  const LatencyHistogram& latency() const { return latency_; }  // per chunk, issue to landing
  uint64_t verified_blocks() const { return verified_blocks_; }
  uint64_t verify_mismatches() const { return bad_blocks_.count(); }  // distinct: epochs read them again
  uint64_t first_mismatch_offset() const { return bad_blocks_.first_offset(); }
  std::string first_mismatch_path() const { return bad_blocks_.first_path(); }

 private:
  void open(const std::string& path, uint64_t create_size = 0, const std::string& mark = "");
  SampleRead move(const std::string& path, uint64_t offset, uint64_t length);  // in the job's direction
  void close() noexcept;

  Job job_;
  int gpu_;
  DeviceVerifyFn verify_device_;
  ReadSlots slots_;
  std::string path_;                // the file open now
  uint64_t owner_ = 0;              // the thread that opened it (thread_serial()): its engine is that thread's
  std::unique_ptr<Engine> engine_;  // opened on path_
  LatencyHistogram latency_;
  uint64_t verified_blocks_ = 0;
  BadBlocks bad_blocks_;
};

}  // namespace gds
