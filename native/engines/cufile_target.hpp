// What the three cuFile engines share. Each is cuFile's way of moving bytes between a file and GPU memory
// (GPUDirect Storage), as gdsio's transfer types name them:
//   cufile        cuFileRead / cuFileWrite (gdsio -x 0; cufile.cpp)
//   cufile_batch  cuFileBatchIOSubmit / cuFileBatchIOGetStatus (gdsio -x 6; cufile_batch.cpp)
//   cufile_async  cuFileReadAsync / cuFileWriteAsync on CUDA streams (gdsio -x 5; cufile_async.cpp)
// Whether the bytes really went GPUDirect or through cuFile's compatibility mode (POSIX reads and a
// bounce inside libcufile) is decided by the platform, and recorded by the Python layer from nvidia-fs
// and cufile.json. A write's bytes are in GPU memory before any of them is called (ReadSlots stamps
// them synchronously).
#pragma once
#include <memory>
#include <string>

#include "../engine.hpp"
#include "../error.hpp"

namespace gds {

constexpr unsigned kCuFileQueue = 256;  // the batch and stream engines' deepest queue a thread

// A cuFile engine's open where the build had no CUDA headers: it says so.
inline std::unique_ptr<Engine> cufile_not_built(const Target&, unsigned, const OptionValues&) {
  throw InputError("--mode gds: this build of gdsbench has no GPU support (CUDA headers not found at build time)");
}
inline std::string cufile_not_built_reason() { return "built without CUDA headers"; }

}  // namespace gds

#ifdef GDSBENCH_HAVE_CUDA
#include "../gpu/cuda.hpp"

namespace gds {

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

// Why an engine needing one of cuFile's newer APIs cannot run here ("" when it can): cuFile itself, then
// that API (`missing`: CuFileApi::batch_missing or async_missing).
inline std::string cufile_unavailable(std::string (gpu::CuFileApi::*missing)() const) {
  const std::string why = gpu::CuFileApi::probe();
  return why.empty() ? (gpu::CuFileApi::get().*missing)() : why;
}

}  // namespace gds

#endif
