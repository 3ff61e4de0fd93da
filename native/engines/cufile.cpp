// cufile: cuFileRead into device memory and cuFileWrite from it (GPUDirect
// Storage), one at a time per thread as psync does; concurrency comes from
// threads, since cuFile's synchronous API has no queue depth. Whether the read really went
// GPUDirect or through cuFile's compatibility mode (POSIX reads and a bounce
// inside libcufile) is decided by the platform, and recorded by the Python
// layer from nvidia-fs and cufile.json. Run on an H200 in compatibility mode only
// (results/device/); never yet with nvidia-fs. cuFileWrite has never run on a GPU.
#include <cerrno>

#include "../engine.hpp"
#include "../error.hpp"

namespace gds {
constexpr Capabilities kCuFileCan = {Opens::kLocalFile, /*supports_direct=*/true, /*max_depth=*/1, kReadWrite,
                                     /*gpu_buffers=*/true};
const std::vector<EngineOption> kCuFileOptions = {
    {"gds_register", "bool", "register the GPU buffers with cuFile (gds)", 0, 0, 1, /*at_most_depth=*/false}};
}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA
#include "../gpu/cuda.hpp"

namespace gds {
namespace {

class CuFileEngine final : public SynchronousEngine {
 public:
  CuFileEngine(const Target& target, bool register_buffers)
      : file_(target), api_(gpu::CuFileApi::get()), register_buffers_(register_buffers) {
    CUfileDescr_t descr{};
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = file_.fd();
    CUfileError_t status = api_.cuFileHandleRegister(&handle_, &descr);
    if (status.err != CU_FILE_SUCCESS)
      throw InputError("--mode gds: cuFileHandleRegister failed: " + gpu::CuFileApi::error_text(status) +
                       " (the file must be opened with O_DIRECT on a filesystem cuFile supports)");
  }
  ~CuFileEngine() override {
    if (registered_) api_.cuFileBufDeregister(registered_);
    api_.cuFileHandleDeregister(handle_);
  }
  uint64_t size() const override { return file_.size(); }
  int sync() override { return file_.sync(); }
  void register_buffer(void* base, size_t length) override {
    if (!register_buffers_) return;
    CUfileError_t status = api_.cuFileBufRegister(base, length, 0);
    if (status.err != CU_FILE_SUCCESS)
      throw InputError("--gds-register: cuFileBufRegister failed: " + gpu::CuFileApi::error_text(status));
    registered_ = base;
  }

 private:
  int64_t transfer(const IoRequest& r) override {
    // A registered buffer is addressed by its base and an offset into it.
    char* base = registered_ ? static_cast<char*>(registered_) : r.buf;
    const bool write = r.direction == Direction::kWrite;
    ssize_t n = write ? api_.cuFileWrite(handle_, base, r.length, off_t(r.offset), off_t(r.buf - base))
                      : api_.cuFileRead(handle_, base, r.length, off_t(r.offset), off_t(r.buf - base));
    if (n < -1)
      throw IoError(std::string(write ? "cuFileWrite of " : "cuFileRead of ") + std::to_string(r.length) +
                    " bytes at offset " + std::to_string(r.offset) + ": " + cufileop_status_error(CUfileOpError(-n)));
    return n == -1 ? -errno : n;
  }

  LocalFile file_;  // declared first, so closed last: after the handle is deregistered
  gpu::CuFileApi& api_;
  const bool register_buffers_;  // --gds-register
  CUfileHandle_t handle_ = nullptr;
  void* registered_ = nullptr;
};

}  // namespace

const EngineInfo kCuFileEngine = {
    "cufile",
    "cuFileRead into / cuFileWrite from GPU memory (GPUDirect Storage; --mode gds)",
    kCuFileCan,
    [](const Target& target, unsigned, const OptionValues& options) -> std::unique_ptr<Engine> {
      return std::make_unique<CuFileEngine>(target, kCuFileEngine.option(options, "gds_register") != 0);
    },
    [] { return gpu::CuFileApi::probe(); },
    kCuFileOptions};

}  // namespace gds

#else

namespace gds {
const EngineInfo kCuFileEngine = {
    "cufile",
    "cuFileRead into / cuFileWrite from GPU memory (GPUDirect Storage; --mode gds)",
    kCuFileCan,
    [](const Target&, unsigned, const OptionValues&) -> std::unique_ptr<Engine> {
      throw InputError("--mode gds: this build of gdsbench has no GPU support (CUDA headers not found at build time)");
    },
    [] { return std::string("built without CUDA headers"); },
    kCuFileOptions};
}  // namespace gds

#endif
