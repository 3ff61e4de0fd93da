#include "sample_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "clock.hpp"
#include "error.hpp"
#include "pattern.hpp"

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
  engine_.reset();  // first: cuFile deregisters the file handle
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
  owner_ = 0;
}

void SampleReader::open(const std::string& path) {
  close();
  const int flags = O_RDONLY | O_CLOEXEC | (job_.direct ? O_DIRECT : 0);
  fd_ = ::open(path.c_str(), flags);
  if (fd_ < 0) throw InputError("sample file " + path + ": cannot open for reading: " + errno_text(errno));
  struct stat st{};
  if (::fstat(fd_, &st) != 0) throw InputError("sample file " + path + ": cannot stat: " + errno_text(errno));
  file_size_ = uint64_t(st.st_size);
  engine_ = engine_by_name(job_.engine).make(fd_, job_.qd);
  if (job_.gds_register) slots_.register_with(*engine_);
  path_ = path;
  owner_ = thread_serial();
}

// queue -> reap -> [copy to the GPU] -> land, chunk by chunk, until the whole
// region has landed. O_DIRECT chunks are whole logical blocks, so the first may
// start before the region and the last reach past the end of the file (the
// short read there is the file's end); only the region's bytes count.
SampleRead SampleReader::read(const std::string& path, uint64_t offset, uint64_t length) {
  slots_.make_current();
  if (path != path_ || thread_serial() != owner_) open(path);
  std::vector<IoRequest>& requests = slots_.requests();
  gpu::CopyStream* copies = slots_.copies();
  const unsigned depth = job_.qd, slots = unsigned(requests.size());
  std::vector<IoRequest*> idle(slots), done(depth);
  for (unsigned i = 0; i < slots; ++i) idle[i] = &requests[i];
  unsigned n_idle = slots, reading = 0;
  CopyRing copying(slots);
  const uint64_t end = std::min(offset + length, file_size_);
  // O_DIRECT reads whole blocks: a sample at an unaligned offset (a TFRecord record) is read
  // from the block it starts in, and only its own bytes are counted
  const uint64_t align = job_.direct ? pattern::kBlock : 1;
  uint64_t next = offset / align * align;
  SampleRead out;
  const uint64_t started = now_ns();

  auto land = [&](IoRequest* r, uint64_t when) {
    idle[n_idle++] = r;
    latency_.add(when > r->submit_ns ? when - r->submit_ns : 0);
    const uint64_t got_end = r->offset + uint64_t(r->result);
    out.bytes += got_end > offset ? std::min(got_end, end) - std::max(r->offset, offset) : 0;
    ++out.chunks;
    if (job_.verify) {
      std::vector<uint64_t> bad =
          slots_.bad_blocks(*r, uint64_t(r->result) / pattern::kBlock * pattern::kBlock, verify_device_);
      verified_blocks_ += uint64_t(r->result) / pattern::kBlock;
      if (!bad.empty() && verify_mismatches_ == 0) {
        first_mismatch_offset_ = bad.front();
        first_mismatch_path_ = path_;
      }
      verify_mismatches_ += bad.size();
    }
  };

  for (;;) {
    while (next < end && n_idle && reading < depth) {
      IoRequest* r = idle[--n_idle];
      const uint64_t want = std::min<uint64_t>(job_.bs, end - next);
      r->offset = next;
      r->length = uint32_t((want + align - 1) / align * align);
      r->submit_ns = now_ns();
      engine_->queue(r);
      ++reading;
      next += want;
    }
    engine_->submit();
    if (reading == 0 && copying.size() == 0) break;
    if (reading > 0) {
      const unsigned n = engine_->reap(1, done.data(), depth);
      const uint64_t now = now_ns();
      for (unsigned i = 0; i < n; ++i) {
        IoRequest* r = done[i];
        --reading;
        check_read(*r, path_, job_.direct, file_size_);
        if (copies) {
          copies->copy_to_device(r->device_dst, r->buf, size_t(r->result), r->slot);
          copying.push(r);
        } else {
          land(r, now);
        }
      }
    } else {
      IoRequest* r = copying.pop();
      land(r, copies->wait(r->slot));
    }
    uint64_t when = 0;
    while (copying.size() && copies->poll(copying.oldest()->slot, &when)) land(copying.pop(), when);
  }
  out.ns = now_ns() - started;
  return out;
}

}  // namespace gds
