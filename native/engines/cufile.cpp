// cufile, cufile-batch, cufile-async: cuFile's three ways of moving bytes between a file and GPU
// memory (GPUDirect Storage), as gdsio's transfer types name them:
//   cufile        cuFileRead / cuFileWrite (gdsio -x 0): synchronous, one request a thread at a time
//                 as psync does; concurrency from threads; --gds-register registers the buffers
//   cufile-batch  cuFileBatchIOSubmit / cuFileBatchIOGetStatus (gdsio -x 6): up to --cufile-batch
//                 requests submitted together, several batches in flight up to --qd
//   cufile-async  cuFileReadAsync / cuFileWriteAsync on CUDA streams (gdsio -x 5): a stream per request
//                 in flight, its end marked by an event
// A write's bytes are in GPU memory before any of them is called (ReadSlots stamps them synchronously).
// The batch and stream engines always register their buffers (cuFile's fast path; unregistered
// buffers go through cuFile's own bounce buffers). Whether the bytes really went GPUDirect or through
// cuFile's compatibility mode (POSIX reads and a bounce inside libcufile) is decided by the platform,
// and recorded by the Python layer from nvidia-fs and cufile.json.
// cuFileRead ran on an H200 in compatibility mode only (results/device/); never yet with nvidia-fs.
// cuFileWrite, the batch and the stream engines have never run on a GPU.
#include <algorithm>
#include <cerrno>
#include <ctime>
#include <vector>

#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
namespace {
constexpr unsigned kCuFileQueue = 256;  // the batch and stream engines' deepest queue a thread
constexpr unsigned kMaxBatch = 128;     // cufile.json's properties.io_batchsize default: a batch's largest
constexpr Capabilities kCuFileCan = {Opens::kLocalFile, /*supports_direct=*/true, /*max_depth=*/1, kReadWrite,
                                     /*gpu_buffers=*/true};
constexpr Capabilities kCuFileQueuedCan = {Opens::kLocalFile, /*supports_direct=*/true, kCuFileQueue, kReadWrite,
                                           /*gpu_buffers=*/true};
const char* const kCuFileAbout = "cuFileRead into / cuFileWrite from GPU memory (GPUDirect Storage; --mode gds)";
const char* const kBatchAbout =
    "cuFile's batch API into / from GPU memory: cuFileBatchIOSubmit, cuFileBatchIOGetStatus (--mode gds; gdsio -x 6)";
const char* const kAsyncAbout =
    "cuFile's stream API into / from GPU memory: cuFileReadAsync on a CUDA stream per request (--mode gds; gdsio -x 5)";
}  // namespace

const std::vector<EngineOption> kCuFileOptions = {
    {"gds_register", "bool", "register the GPU buffers with cuFile (gds)", 0, 0, 1, /*at_most_depth=*/false}};
const std::vector<EngineOption> kCuFileBatchOptions = {
    {"cufile_batch", "int",
     "requests submitted together in one cuFileBatchIOSubmit (cufile-batch; 0: a quarter of --qd, rounded up, so "
     "four batches overlap; at most cufile.json's io_batchsize, 128 by default); batches stay in flight up to --qd",
     0, 0, kMaxBatch, /*at_most_depth=*/true}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA
#include "../gpu/cuda.hpp"

namespace gds {
namespace {

// The file under cuFile: opened, its cuFile handle registered, and the GPU buffers registered where asked.
class CuFileTarget {
 public:
  explicit CuFileTarget(const Target& target) : file_(target), api_(gpu::CuFileApi::get()) {
    CUfileDescr_t descr{};
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = file_.fd();
    CUfileError_t status = api_.cuFileHandleRegister(&handle_, &descr);
    if (status.err != CU_FILE_SUCCESS)
      throw InputError("--mode gds: cuFileHandleRegister failed: " + gpu::CuFileApi::error_text(status) +
                       " (the file must be opened with O_DIRECT on a filesystem cuFile supports)");
  }
  ~CuFileTarget() {
    if (registered_) api_.cuFileBufDeregister(registered_);
    api_.cuFileHandleDeregister(handle_);
  }
  CuFileTarget(const CuFileTarget&) = delete;
  CuFileTarget& operator=(const CuFileTarget&) = delete;

  void register_buffer(void* base, size_t length, const char* asked_by) {
    CUfileError_t status = api_.cuFileBufRegister(base, length, 0);
    if (status.err != CU_FILE_SUCCESS)
      throw InputError(std::string(asked_by) + ": cuFileBufRegister failed: " + gpu::CuFileApi::error_text(status));
    registered_ = base;
  }
  // A registered buffer is addressed by its base and an offset into it.
  char* base_of(const IoRequest& r) const { return registered_ ? static_cast<char*>(registered_) : r.buf; }
  std::string failed(const IoRequest& r, const char* api, int64_t status) const {
    return std::string(api) + " of " + std::to_string(r.length) + " bytes at offset " + std::to_string(r.offset) +
           ": " + cufileop_status_error(CUfileOpError(-status));
  }
  // A negative result under CUFILEOP_BASE_ERR is -errno (the request's own failure, reported as any engine's);
  // from there on it is cuFile's error, which ends the run.
  static bool is_cufile_error(int64_t status) { return status < 0 && -status >= CUFILEOP_BASE_ERR; }

  LocalFile file_;  // declared first, so closed last: after the handle is deregistered
  gpu::CuFileApi& api_;
  CUfileHandle_t handle_ = nullptr;
  void* registered_ = nullptr;
};

class CuFileEngine final : public SynchronousEngine {
 public:
  CuFileEngine(const Target& target, bool register_buffers) : cufile_(target), register_buffers_(register_buffers) {}
  uint64_t size() const override { return cufile_.file_.size(); }
  int sync() override { return cufile_.file_.sync(); }
  void register_buffer(void* base, size_t length) override {
    if (register_buffers_) cufile_.register_buffer(base, length, "--gds-register");
  }

 private:
  int64_t transfer(const IoRequest& r) override {
    char* base = cufile_.base_of(r);
    const bool write = r.direction == Direction::kWrite;
    auto& api = cufile_.api_;
    ssize_t n = write ? api.cuFileWrite(cufile_.handle_, base, r.length, off_t(r.offset), off_t(r.buf - base))
                      : api.cuFileRead(cufile_.handle_, base, r.length, off_t(r.offset), off_t(r.buf - base));
    if (n < -1) throw IoError(cufile_.failed(r, write ? "cuFileWrite" : "cuFileRead", n));
    return n == -1 ? -errno : n;
  }

  CuFileTarget cufile_;
  const bool register_buffers_;  // --gds-register
};

// The batch API: what is queued goes out in batches of up to `batch` requests. A handle takes a new batch
// only once its last one is all collected (kvikio's rule for a batch handle), so several handles keep
// --qd in flight: by default batches of a quarter of --qd, four overlapping.
class CuFileBatchEngine final : public Engine {
 public:
  CuFileBatchEngine(const Target& target, unsigned depth, unsigned batch)
      : cufile_(target), batch_(std::min(batch ? batch : (depth + 3) / 4, largest_batch(cufile_.api_))) {
    if (const std::string why = cufile_.api_.batch_missing(); !why.empty())
      throw InputError("--engine cufile-batch: " + why);
    handles_.resize((depth + batch_ - 1) / batch_);
    params_.resize(batch_);
    events_.resize(batch_);
    for (auto& h : handles_) {
      CUfileError_t status = cufile_.api_.cuFileBatchIOSetUp(&h.id, batch_);
      if (status.err != CU_FILE_SUCCESS) {
        h.id = nullptr;
        close_handles();  // the destructor does not run for a constructor that throws
        throw InputError("--engine cufile-batch: cuFileBatchIOSetUp(" + std::to_string(batch_) +
                         ") failed: " + gpu::CuFileApi::error_text(status) +
                         " (cufile.json's properties.io_batchsize caps --cufile-batch)");
      }
    }
  }
  ~CuFileBatchEngine() override { close_handles(); }
  uint64_t size() const override { return cufile_.file_.size(); }
  int sync() override { return cufile_.file_.sync(); }
  void register_buffer(void* base, size_t length) override { cufile_.register_buffer(base, length, "cufile-batch"); }

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

// The stream API: each request in flight on a CUDA stream of its own (one stream would run them one
// after another), cuFile reading its sizes and offsets through pointers that live until it ends. The
// streams are not registered with cuFileStreamRegister (allowed; registering saves cuFile some setup a
// request).
class CuFileAsyncEngine final : public Engine {
 public:
  CuFileAsyncEngine(const Target& target, unsigned depth)
      : cufile_(target), cuda_(gpu::CudaRuntime::get()), ios_(depth) {
    if (const std::string why = cufile_.api_.async_missing(); !why.empty())
      throw InputError("--engine cufile-async: " + why);
    try {  // every stream and event now, outside the measured window
      for (auto& io : ios_) {
        cuda_.check(cuda_.cudaStreamCreateWithFlags(&io.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        cuda_.check(cuda_.cudaEventCreateWithFlags(&io.done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      }
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~CuFileAsyncEngine() override { release(); }
  uint64_t size() const override { return cufile_.file_.size(); }
  int sync() override { return cufile_.file_.sync(); }
  void register_buffer(void* base, size_t length) override { cufile_.register_buffer(base, length, "cufile-async"); }

  void queue(IoRequest* r) override {
    if (r->slot >= ios_.size())
      throw IoError("cufile-async: request slot " + std::to_string(r->slot) + " past --qd " +
                    std::to_string(ios_.size()));
    InFlight& io = ios_[r->slot];
    io.request = r;
    char* base = cufile_.base_of(*r);
    io.size = r->length;
    io.file_offset = off_t(r->offset);
    io.buf_offset = off_t(r->buf - base);
    io.moved = 0;
    const bool write = r->direction == Direction::kWrite;
    auto& api = cufile_.api_;
    CUfileError_t status = write ? api.cuFileWriteAsync(cufile_.handle_, base, &io.size, &io.file_offset,
                                                        &io.buf_offset, &io.moved, io.stream)
                                 : api.cuFileReadAsync(cufile_.handle_, base, &io.size, &io.file_offset, &io.buf_offset,
                                                       &io.moved, io.stream);
    if (status.err != CU_FILE_SUCCESS)
      throw IoError(std::string(write ? "cuFileWriteAsync: " : "cuFileReadAsync: ") +
                    gpu::CuFileApi::error_text(status));
    cuda_.check(cuda_.cudaEventRecord(io.done, io.stream), "cudaEventRecord after cuFileReadAsync");
    in_flight_.push_back(&io);
  }

  unsigned reap(unsigned min, IoRequest** done, unsigned max) override {
    unsigned got = 0;
    while (!in_flight_.empty() && got < max) {
      for (size_t i = 0; i < in_flight_.size() && got < max;) {
        InFlight& io = *in_flight_[i];
        const cudaError_t state = cuda_.cudaEventQuery(io.done);
        if (state == cudaErrorNotReady) {
          ++i;
          continue;
        }
        cuda_.check(state, "the stream of a cuFile request");
        done[got++] = finish(io);
        in_flight_.erase(in_flight_.begin() + long(i));
      }
      if (got >= min || in_flight_.empty()) break;
      cuda_.check(cuda_.cudaEventSynchronize(in_flight_.front()->done), "waiting for a cuFile request");
    }
    return got;
  }

 private:
  struct InFlight {
    IoRequest* request = nullptr;
    size_t size = 0;  // cuFile reads these four when the stream reaches the request, not at the call
    off_t file_offset = 0;
    off_t buf_offset = 0;
    ssize_t moved = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
  };

  void release() noexcept {
    for (auto& io : ios_) {
      if (io.stream) cuda_.cudaStreamSynchronize(io.stream);  // cuFile may still hold this one's pointers
      if (io.done) cuda_.cudaEventDestroy(io.done);
      if (io.stream) cuda_.cudaStreamDestroy(io.stream);
      io.done = nullptr;
      io.stream = nullptr;
    }
  }

  IoRequest* finish(const InFlight& io) {
    IoRequest* r = io.request;
    if (io.moved < -1)
      throw IoError(
          cufile_.failed(*r, r->direction == Direction::kWrite ? "cuFileWriteAsync" : "cuFileReadAsync", io.moved));
    r->result = io.moved == -1 ? -EIO : io.moved;  // -1: a filesystem error, its errno set on another thread
    return r;
  }

  CuFileTarget cufile_;
  gpu::CudaRuntime& cuda_;
  std::vector<InFlight> ios_;  // by request slot (--qd of them): a slot's pointers stay put while cuFile holds them
  std::vector<InFlight*> in_flight_;
};

std::string batch_unavailable() {
  const std::string why = gpu::CuFileApi::probe();
  return why.empty() ? gpu::CuFileApi::get().batch_missing() : why;
}

std::string async_unavailable() {
  const std::string why = gpu::CuFileApi::probe();
  return why.empty() ? gpu::CuFileApi::get().async_missing() : why;
}

}  // namespace

const EngineInfo kCuFileEngine = {
    "cufile",
    kCuFileAbout,
    kCuFileCan,
    [](const Target& target, unsigned, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileEngine>(target, kCuFileEngine.option(options, "gds_register") != 0);
    },
    [] { return gpu::CuFileApi::probe(); },
    kCuFileOptions};

const EngineInfo kCuFileBatchEngine = {
    "cufile-batch",
    kBatchAbout,
    kCuFileQueuedCan,
    [](const Target& target, unsigned depth, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileBatchEngine>(target, depth,
                                                 unsigned(kCuFileBatchEngine.option(options, "cufile_batch")));
    },
    batch_unavailable,
    kCuFileBatchOptions};

const EngineInfo kCuFileAsyncEngine = {
    "cufile-async",
    kAsyncAbout,
    kCuFileQueuedCan,
    [](const Target& target, unsigned depth, const OptionValues&) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileAsyncEngine>(target, depth);
    },
    async_unavailable,
    {}};

}  // namespace gds

#else

namespace gds {
namespace {
std::unique_ptr<Engine> no_cuda(const Target&, unsigned, const OptionValues&) {
  throw InputError("--mode gds: this build of gdsbench has no GPU support (CUDA headers not found at build time)");
}
std::string no_cuda_reason() { return "built without CUDA headers"; }
}  // namespace

const EngineInfo kCuFileEngine = {"cufile", kCuFileAbout, kCuFileCan, no_cuda, no_cuda_reason, kCuFileOptions};
const EngineInfo kCuFileBatchEngine = {"cufile-batch", kBatchAbout,    kCuFileQueuedCan,
                                       no_cuda,        no_cuda_reason, kCuFileBatchOptions};
const EngineInfo kCuFileAsyncEngine = {"cufile-async", kAsyncAbout, kCuFileQueuedCan, no_cuda, no_cuda_reason, {}};
}  // namespace gds

#endif
