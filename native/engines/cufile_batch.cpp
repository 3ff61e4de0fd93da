// cufile_batch: cuFile's batch API (gdsio -x 6), cuFileBatchIOSubmit of up to --cufile-batch-size requests and
// cuFileBatchIOGetStatus to reap them, several batches in flight up to --qd. It registers its buffers
// (cuFile's fast path). Never run on a GPU.
#include <algorithm>
#include <ctime>
#include <vector>

#include "cufile_target.hpp"

namespace gds {
namespace {
constexpr unsigned kMaxBatch = 128;  // cufile.json's properties.io_batchsize default: a batch's largest
constexpr Capabilities kBatchCan = {
    Opens::kLocalFile,    /*supports_direct=*/true,      /*buffered_flags=*/false, kCuFileQueue, kReadWrite,
    /*gpu_buffers=*/true, /*registers_gpu_buffers=*/true};
const char* const kBatchAbout =
    "cuFile's batch API into / from GPU memory: cuFileBatchIOSubmit, cuFileBatchIOGetStatus (--mode gds; gdsio -x 6)";
}  // namespace
const std::vector<EngineOption> kCuFileBatchOptions = {
    {"cufile_batch_size", "int",
     "requests submitted together in one cuFileBatchIOSubmit (cufile_batch; 0: a quarter of --qd, rounded up, so "
     "four batches overlap; at most cufile.json's io_batchsize, 128 by default); batches stay in flight up to --qd",
     0, 0, kMaxBatch, /*at_most_depth=*/true}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA

namespace gds {
namespace {

// The batch API: what is queued goes out in batches of up to `batch` requests. A handle takes a new batch
// only once its last one is all collected (kvikio's rule for a batch handle), so several handles keep
// --qd in flight: by default batches of a quarter of --qd, four overlapping.
class CuFileBatchEngine final : public Engine {
 public:
  CuFileBatchEngine(const Target& target, unsigned depth, unsigned batch)
      : cufile_(target), batch_(std::min(batch ? batch : (depth + 3) / 4, largest_batch(cufile_.api_))) {
    if (const std::string why = cufile_.api_.batch_missing(); !why.empty())
      throw InputError("--engine cufile_batch: " + why);
    handles_.resize((depth + batch_ - 1) / batch_);
    params_.resize(batch_);
    events_.resize(batch_);
    for (auto& h : handles_) {
      CUfileError_t status = cufile_.api_.cuFileBatchIOSetUp(&h.id, batch_);
      if (status.err != CU_FILE_SUCCESS) {
        h.id = nullptr;
        close_handles();  // the destructor does not run for a constructor that throws
        throw InputError("--engine cufile_batch: cuFileBatchIOSetUp(" + std::to_string(batch_) +
                         ") failed: " + gpu::CuFileApi::error_text(status) +
                         " (cufile.json's properties.io_batchsize caps --cufile-batch-size)");
      }
    }
  }
  ~CuFileBatchEngine() override { close_handles(); }
  uint64_t size() const override { return cufile_.file_.size(); }
  int sync() override { return cufile_.file_.sync(); }
  void register_buffer(void* base, size_t length) override { cufile_.register_buffer(base, length, "cufile_batch"); }

  void queue(IoRequest* r) override {
    queued_.push_back(r);
    if (queued_.size() >= batch_) submit(false);
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    submit(true);
    unsigned got = 0;
    while (got < max) {
      for (auto& h : handles_)
        if (h.outstanding && got < max) got += collect(h, 0, &kNoWait, done + got, max - got);
      if (got >= min || busy() == 0 || got >= max) break;
      // Not enough yet: wait on the oldest batch, until one of its requests ends where it is the only one
      // out, else a moment (another batch may end first), then look at them all again.
      Batch* oldest = nullptr;
      for (auto& h : handles_)
        if (h.outstanding && (!oldest || h.submitted < oldest->submitted)) oldest = &h;
      got += collect(*oldest, 1, busy() == 1 ? nullptr : &kMoment, done + got, max - got);
    }
    return got;
  }

 private:
  struct Batch {
    CUfileBatchHandle_t id = nullptr;
    unsigned outstanding = 0;  // submitted, not yet collected: the handle takes no new submission until 0
    uint64_t submitted = 0;    // its submission's number: the oldest is waited on
  };
  static constexpr timespec kNoWait{0, 0};
  static constexpr timespec kMoment{0, 100000};  // 100 us

  // cuFileBatchIOSetUp's largest batch: the driver's (cufile.json's properties.io_batchsize), else its default.
  static unsigned largest_batch(gpu::CuFileApi& api) {
    CUfileDrvProps_t props{};
    if (api.cuFileDriverGetProperties(&props).err == CU_FILE_SUCCESS && props.max_batch_io_size > 0)
      return std::min(props.max_batch_io_size, kCuFileQueue);
    return kMaxBatch;
  }

  unsigned busy() const {
    unsigned n = 0;
    for (const auto& h : handles_) n += h.outstanding ? 1 : 0;
    return n;
  }

  // Requests still out are canceled and collected before their handle goes: their DMA must not outlive the
  // GPU buffers, which are freed after the engine.
  void close_handles() noexcept {
    for (auto& h : handles_) {
      if (!h.id) continue;
      if (h.outstanding && cufile_.api_.cuFileBatchIOCancel(h.id).err == CU_FILE_SUCCESS) {
        for (int tries = 0; h.outstanding && tries < 10000; ++tries) {  // about a second at the most
          unsigned nr = h.outstanding;
          timespec wait = kMoment;
          if (cufile_.api_.cuFileBatchIOGetStatus(h.id, 0, &nr, events_.data(), &wait).err != CU_FILE_SUCCESS) break;
          h.outstanding -= std::min(nr, h.outstanding);
          if (nr == 0) ::nanosleep(&kMoment, nullptr);
        }
      }
      cufile_.api_.cuFileBatchIODestroy(h.id);
      h.id = nullptr;
    }
  }

  // Submits full batches (and, with `partial`, what is left) on the handles that are free.
  void submit(bool partial) {
    for (auto& h : handles_) {
      if (queued_.empty() || (!partial && queued_.size() < batch_)) return;
      if (h.outstanding) continue;
      const unsigned n = std::min<unsigned>(batch_, unsigned(queued_.size()));
      for (unsigned i = 0; i < n; ++i) {
        IoRequest* r = queued_[i];
        CUfileIOParams_t& p = params_[i];
        p = CUfileIOParams_t{};
        p.mode = CUFILE_BATCH;
        char* base = cufile_.base_of(*r);
        p.u.batch.devPtr_base = base;
        p.u.batch.devPtr_offset = off_t(r->buf - base);
        p.u.batch.file_offset = off_t(r->offset);
        p.u.batch.size = r->length;
        p.fh = cufile_.handle_;
        p.opcode = r->direction == Direction::kWrite ? CUFILE_WRITE : CUFILE_READ;
        p.cookie = r;
      }
      CUfileError_t status = cufile_.api_.cuFileBatchIOSubmit(h.id, n, params_.data(), 0);
      if (status.err != CU_FILE_SUCCESS)
        throw IoError("cuFileBatchIOSubmit of " + std::to_string(n) +
                      " requests: " + gpu::CuFileApi::error_text(status));
      h.outstanding = n;
      h.submitted = ++submissions_;
      queued_.erase(queued_.begin(), queued_.begin() + n);
    }
  }

  // The requests of h that have ended, waiting for `min` of them at most `wait` (nullptr: until they have).
  unsigned collect(Batch& h, unsigned min, const timespec* wait, IoRequest** done, unsigned max) {
    unsigned nr = std::min(max, h.outstanding);
    timespec limit = wait ? *wait : timespec{};
    CUfileError_t status = cufile_.api_.cuFileBatchIOGetStatus(h.id, min, &nr, events_.data(), wait ? &limit : nullptr);
    if (status.err != CU_FILE_SUCCESS) throw IoError("cuFileBatchIOGetStatus: " + gpu::CuFileApi::error_text(status));
    for (unsigned i = 0; i < nr; ++i) {
      auto* r = static_cast<IoRequest*>(events_[i].cookie);
      const auto ret = static_cast<int64_t>(events_[i].ret);  // bytes moved, -errno, or cuFile's error
      const char* api = r->direction == Direction::kWrite ? "a batch write" : "a batch read";
      if (CuFileTarget::is_cufile_error(ret)) throw IoError(cufile_.failed(*r, api, ret));
      if (ret >= 0 && events_[i].status != CUFILE_COMPLETE)  // canceled, timed out or refused: no error number
        throw IoError(std::string(api) + " of " + std::to_string(r->length) + " bytes at offset " +
                      std::to_string(r->offset) + " ended with cuFile status " +
                      std::to_string(int(events_[i].status)) + " (cufile.h's CUfileStatus_t)");
      r->result = ret;  // bytes moved, or -errno (the loop reports it as any engine's)
      done[i] = r;
    }
    h.outstanding -= nr;
    return nr;
  }

  CuFileTarget cufile_;
  const unsigned batch_;
  std::vector<Batch> handles_;
  std::vector<IoRequest*> queued_;
  uint64_t submissions_ = 0;
  std::vector<CUfileIOParams_t> params_;
  std::vector<CUfileIOEvents_t> events_;
};

}  // namespace

const EngineInfo kCuFileBatchEngine = {
    "cufile_batch",
    kBatchAbout,
    kBatchCan,
    [](const Target& target, unsigned depth, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileBatchEngine>(target, depth,
                                                 unsigned(kCuFileBatchEngine.option(options, "cufile_batch_size")));
    },
    [] { return cufile_unavailable(&gpu::CuFileApi::batch_missing); },
    kCuFileBatchOptions};

}  // namespace gds

#else

namespace gds {
const EngineInfo kCuFileBatchEngine = {"cufile_batch",          kBatchAbout,        kBatchCan, cufile_not_built,
                                       cufile_not_built_reason, kCuFileBatchOptions};
}  // namespace gds

#endif
