#include "sample_reader.hpp"

#include <algorithm>
#include <atomic>

#include "clock.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "transfer.hpp"

namespace gds {

namespace {

// A number for the calling thread, never given to another thread of this process: unlike a
// std::thread::id or a kernel tid, which a thread started after this one ends may be given again.
uint64_t thread_serial() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t serial = next.fetch_add(1);
  return serial;
}

}  // namespace

SampleReader::SampleReader(const Job& job, int gpu, DeviceVerifyFn verify_device)
    : job_(job), gpu_(gpu), verify_device_(std::move(verify_device)), slots_(job, gpu, bool(verify_device_)) {}

SampleReader::~SampleReader() { close(); }

void SampleReader::close() noexcept {
  engine_.reset();  // cuFile deregisters the file handle; the engine closes the file
  path_.clear();
  owner_ = 0;
}

void SampleReader::open(const std::string& path, uint64_t create_size, const std::string& mark) {
  const Target target = job_.target(path, create_size, mark);  // a reader moves one way: its job's
  if (!create_size && engine_ && thread_serial() == owner_ &&
      engine_->retarget(target)) {  // curl: the next object, same connections
    path_ = path;
    return;
  }
  close();
  engine_ = engine_by_name(job_.engine).open(target, job_.qd, job_.engine_options);
  slots_.register_with(*engine_);
  path_ = path;
  owner_ = thread_serial();
}

// The transfer loop (transfer.hpp) over one region, chunk by chunk. O_DIRECT
// chunks are whole logical blocks, so the first may start before the region
// and the last reach past the end of the file (the short read there is the
// file's end); only the region's bytes count.
SampleRead SampleReader::read(const std::string& path, uint64_t offset, uint64_t length) {
  if (job_.direction == Direction::kWrite)  // its buffers hold the pattern its writes restamp: a read would spoil them
    throw InputError("a writer made from a write job reads nothing: make the reader from a read job");
  return move(path, offset, length);
}

// A reader made from a read job writes nothing.
static void require_writer(const Job& job) {
  if (job.direction != Direction::kWrite)
    throw InputError("a reader made from a read job writes nothing: make the writer from a write job");
}

SampleRead SampleReader::write(const std::string& path, uint64_t offset, uint64_t length) {
  require_writer(job_);
  if (offset % pattern::kBlock || length % pattern::kBlock)  // the pattern's blocks, and O_DIRECT's
    throw InputError("writes are of whole " + std::to_string(pattern::kBlock) + "-byte blocks: " + path +
                     " was asked " + std::to_string(length) + " bytes at " + std::to_string(offset));
  return move(path, offset, length);
}

void SampleReader::reseed(uint64_t seed) {
  require_writer(job_);
  if (seed == job_.seed) return;
  job_.seed = seed;
  slots_.make_current();
  slots_.fill_for_writes(job_);
}

SampleRead SampleReader::create(const std::string& path, uint64_t length, const std::string& mark) {
  if (!engine_by_name(job_.engine).can.creates())
    throw InputError("creating " + path + ": the " + job_.engine +
                     " engine creates no objects or files on a server; "
                     "use the curl, nfs or smb engine");
  if (job_.direction != Direction::kWrite || !length || length % pattern::kBlock)
    throw InputError("creating " + path + ": a write job's writer creates objects of whole " +
                     std::to_string(pattern::kBlock) + "-byte blocks (asked " + std::to_string(length) + " bytes)");
  slots_.make_current();
  close();
  open(path, length, mark);
  return move(path, 0, length);
}

SampleRead SampleReader::move(const std::string& path, uint64_t offset, uint64_t length) {
  slots_.make_current();
  if (path != path_ || thread_serial() != owner_) open(path);
  const Direction direction = job_.direction;
  const bool reading = direction == Direction::kRead;
  const uint64_t file_size = reading ? engine_->size() : UINT64_MAX;
  const uint64_t end = std::min(offset + length, file_size);
  // O_DIRECT reads whole blocks: a sample at an unaligned offset (a TFRecord record) is read
  // from the block it starts in, and only its own bytes are counted
  const uint64_t align = job_.direct ? pattern::kBlock : 1;
  uint64_t next = offset / align * align;
  SampleRead out;
  TransferLoop transfers(*engine_, slots_, job_.qd, direction, path_, job_.direct, file_size);
  const uint64_t started = now_ns();

  auto next_chunk = [&](IoRequest& r, uint64_t) {
    if (next >= end) return false;
    const uint64_t want = std::min<uint64_t>(job_.bs, end - next);
    r.offset = next;
    r.length = uint32_t((want + align - 1) / align * align);
    next += want;
    return true;
  };
  auto landed = [&](IoRequest& r, uint64_t when) {
    latency_.add(when > r.submit_ns ? when - r.submit_ns : 0);
    const uint64_t got_end = r.offset + uint64_t(r.result);
    out.bytes += got_end > offset ? std::min(got_end, end) - std::max(r.offset, offset) : 0;
    ++out.chunks;
    if (reading && job_.verify) {
      const uint64_t whole = uint64_t(r.result) / pattern::kBlock * pattern::kBlock;
      bad_blocks_.add(path_, slots_.bad_blocks(r, whole, verify_device_));
      verified_blocks_ += whole / pattern::kBlock;
    }
  };
  try {
    transfers.run(next_chunk, landed);
  } catch (...) {  // requests may still be at the engine: it is not used again
    close();
    throw;
  }
  if (!reading && (job_.fsync_end || engine_->writes_need_sync())) {
    const int r = engine_->sync();
    if (r < 0) throw IoError("fsync of " + path_ + ": " + errno_text(r));
  }
  out.ns = now_ns() - started;
  return out;
}

}  // namespace gds
