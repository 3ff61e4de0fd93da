// cufile_async: cuFile's stream API (gdsio -x 5), cuFileReadAsync / cuFileWriteAsync on a CUDA stream per
// request in flight, its end marked by an event the worker polls. It registers its buffers (cuFile's fast
// path). Never run on a GPU.
#include <cerrno>
#include <vector>

#include "cufile_target.hpp"

namespace gds {
namespace {
constexpr Capabilities kAsyncCan = {
    Opens::kLocalFile,    /*supports_direct=*/true,      /*buffered_flags=*/false, kCuFileQueue, kReadWrite,
    /*gpu_buffers=*/true, /*registers_gpu_buffers=*/true};
const char* const kAsyncAbout =
    "cuFile's stream API into / from GPU memory: cuFileReadAsync on a CUDA stream per request (--mode gds; gdsio -x 5)";
}  // namespace
}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA

namespace gds {
namespace {

// The stream API: each request in flight on a CUDA stream of its own (one stream would run them one
// after another), cuFile reading its sizes and offsets through pointers that live until it ends. The
// streams are not registered with cuFileStreamRegister (allowed; registering saves cuFile some setup a
// request).
class CuFileAsyncEngine final : public Engine {
 public:
  CuFileAsyncEngine(const Target& target, unsigned depth)
      : cufile_(target), cuda_(gpu::CudaRuntime::get()), ios_(depth) {
    if (const std::string why = cufile_.api_.async_missing(); !why.empty())
      throw InputError("--engine cufile_async: " + why);
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
  void register_buffer(void* base, size_t length) override { cufile_.register_buffer(base, length, "cufile_async"); }

  void queue(IoRequest* r) override {
    if (r->slot >= ios_.size())
      throw IoError("cufile_async: request slot " + std::to_string(r->slot) + " past --qd " +
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

}  // namespace

const EngineInfo kCuFileAsyncEngine = {
    "cufile_async",
    kAsyncAbout,
    kAsyncCan,
    [](const Target& target, unsigned depth, const OptionValues&) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileAsyncEngine>(target, depth);
    },
    [] { return cufile_unavailable(&gpu::CuFileApi::async_missing); },
    {}};

}  // namespace gds

#else

namespace gds {
const EngineInfo kCuFileAsyncEngine = {"cufile_async",          kAsyncAbout, kAsyncCan, cufile_not_built,
                                       cufile_not_built_reason, {}};
}  // namespace gds

#endif
