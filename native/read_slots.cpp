#include "read_slots.hpp"

#include "error.hpp"
#include "pattern.hpp"

namespace gds {

ReadSlots::ReadSlots(const Job& job, int gpu, bool have_device_verify) : gpu_(gpu) {
  const unsigned slots = job.staged() ? 2 * job.qd : job.qd;
  bytes_ = size_t(job.bs) * slots;
  requests_.resize(slots);
  if (job.on_gpu()) {
    device_ = gpu::open_device(job.gpu_backend, gpu);
    device_->make_current();  // this thread's allocations, streams and cuFile calls use it
    device_memory_ = device_->alloc_device(bytes_, gpu::parse_device_memory(job.gpu_memory));
    if (job.staged()) {
      staging_ = device_->alloc_pinned(bytes_);
      copies_ = device_->stream(slots);
    }
    if (job.verify && !device_->simulated() && !have_device_verify)
      throw InputError(std::string("--verify in --mode ") + mode_name(job.mode) +
                       " checks GPU memory with cupy, which is not installed");
  } else {
    host_ = std::make_unique<HostBuffers>(bytes_);
  }
  char* read_base = host_ ? host_->data() : staging_ ? staging_.get() : device_memory_.get();
  for (unsigned i = 0; i < slots; ++i) {
    requests_[i].slot = i;
    requests_[i].buf = read_base + size_t(i) * job.bs;
    requests_[i].device_dst = staging_ ? device_memory_.get() + size_t(i) * job.bs : nullptr;
    requests_[i].length = uint32_t(job.bs);
  }
  if (job.direction == Direction::kWrite) fill_for_writes(job);
}

// What writes carry: each slot a buffer of pattern blocks (pattern::fill_reusable), in host
// memory, or in GPU memory by way of the pinned staging (bounce: copied there once, before any
// write) or of a host shadow (gds: kept, for stamping).
void ReadSlots::fill_for_writes(const Job& job) {
  GDS_EXPECT(job.bs % pattern::kBlock == 0, "writes carry 4 KiB pattern blocks: --bs must be a multiple of 4K");
  if (device_memory_ && !staging_ && !shadow_) shadow_ = std::make_unique<HostBuffers>(bytes_);
  for (auto& r : requests_) {
    char* blocks = shadow_ ? shadow_->data() + size_t(r.slot) * job.bs : r.buf;
    pattern::fill_reusable(blocks, job.bs, pattern::mix64(job.seed) + uint64_t(r.slot) * job.bs);
    if (staging_) copies_->copy(r.device_dst, r.buf, job.bs, r.slot, gpu::Toward::kDevice);
  }
  if (staging_)
    for (auto& r : requests_) copies_->wait(r.slot);
  if (shadow_) device_->put_rows(device_memory_.get(), shadow_->data(), bytes_, bytes_, 1);
}

// Host memory is stamped where it is. GPU memory (gds) is stamped in its host shadow, and the
// words that changed, w[1], w[2] and w[511] of each block (pattern.hpp), go to the GPU in two
// strided copies: 24 bytes a block, not the block.
void ReadSlots::stamp(IoRequest& r) const {
  if (!shadow_) return pattern::restamp(r.buf, r.length, r.offset);
  char* blocks = shadow_->data() + (r.buf - device_memory_.get());
  pattern::restamp(blocks, r.length, r.offset);
  const size_t n = r.length / pattern::kBlock;
  device_->put_rows(r.buf + 8, blocks + 8, 16, pattern::kBlock, n);
  device_->put_rows(r.buf + pattern::kBlock - 8, blocks + pattern::kBlock - 8, 8, pattern::kBlock, n);
}

// The copy stream first (it waits for copies in flight), then the memory it used.
ReadSlots::~ReadSlots() {
  copies_.reset();
  shadow_.reset();
  staging_.reset();
  device_memory_.reset();
  host_.reset();
}

void ReadSlots::make_current() const {
  if (device_) device_->make_current();
}

void ReadSlots::register_with(Engine& engine) const {
  if (device_memory_ && !staging_) return engine.register_buffer(device_memory_.get(), bytes_);
  engine.register_host_buffers(requests_[0].buf, bytes_ / requests_.size(), unsigned(requests_.size()));
}

std::vector<uint64_t> ReadSlots::bad_blocks(const IoRequest& r, uint64_t length,
                                            const DeviceVerifyFn& verify_device) const {
  const char* landed = r.device_dst ? r.device_dst : r.buf;
  std::vector<uint64_t> bad;
  if (host_ || device_->simulated())
    pattern::check(landed, length, r.offset, &bad);
  else
    verify_device(landed, length, r.offset, gpu_, &bad);
  return bad;
}

void check_transfer(const IoRequest& r, const std::string& path, bool direct, uint64_t end_of_file) {
  if (r.result == int64_t(r.length)) return;
  const bool read = r.direction == Direction::kRead;
  if (read && r.result >= 0 && r.offset + uint64_t(r.result) == end_of_file) return;
  std::string where = std::string(read ? " reading " : " writing ") + std::to_string(r.length) + " bytes at offset " +
                      std::to_string(r.offset) + " of " + path;
  if (r.result < 0) {
    std::string hint = (r.result == -EINVAL && direct) ? " (O_DIRECT needs --bs, --offset and buffers aligned to the "
                                                         "device's logical block size)"
                                                       : "";
    throw IoError(errno_text(int(r.result)) + where + hint);
  }
  throw IoError(std::string(read ? "short read: got " : "short write: put ") + std::to_string(r.result) + " bytes" +
                where + (read ? " (was the file truncated during the run?)" : ""));
}

void BadBlocks::add(const std::string& path, const std::vector<uint64_t>& offsets) {
  for (uint64_t offset : offsets) seen_.emplace(path, offset);
}

}  // namespace gds
