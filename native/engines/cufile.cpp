// cufile: cuFileRead into device memory and cuFileWrite from it (GPUDirect Storage), one at a time per
// thread as psync does; concurrency comes from threads, since cuFile's synchronous API has no queue depth
// (cufile_batch and cufile_async have one). --gds-register registers the buffers with cuFile. Run on an
// H200 in compatibility mode only (results/device/); never yet with nvidia-fs. cuFileWrite has never run
// on a GPU.
#include <cerrno>

#include "cufile_target.hpp"

namespace gds {
namespace {
constexpr Capabilities kCuFileCan = {
    Opens::kLocalFile,   /*supports_direct=*/true, /*buffered_flags=*/false, /*max_depth=*/1, kReadWrite,
    /*gpu_buffers=*/true};
const char* const kCuFileAbout = "cuFileRead into / cuFileWrite from GPU memory (GPUDirect Storage; --mode gds)";
}  // namespace
const std::vector<EngineOption> kCuFileOptions = {
    {"gds_register", "bool", "register the GPU buffers with cuFile (gds)", 0, 0, 1, /*at_most_depth=*/false}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA

namespace gds {
namespace {

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

}  // namespace gds

#else

namespace gds {
const EngineInfo kCuFileEngine = {"cufile",      kCuFileAbout, kCuFileCan, cufile_not_built, cufile_not_built_reason,
                                  kCuFileOptions};
}  // namespace gds

#endif
