// CUDA runtime and cuFile, loaded at run time (dlopen/dlsym), in the manner
// of kvikio's shim/: headers at build time, never a link-time dependency, so
// one build runs with or without a GPU. Each library is a singleton whose
// get() throws InputError naming what is missing, and whose probe() says why
// it cannot load ("" when it can).
#pragma once
#include <cuda.h>  // the driver API: cufile.h includes it too, so every GPU build has it
#include <cuda_runtime_api.h>
#include <cufile.h>

#include <mutex>
#include <string>
#include <vector>

#include "status.hpp"

namespace gds::gpu {

std::vector<std::string> library_candidates(const std::string& library);

#define GDS_SHIM_FN(name) decltype(&::name) name = nullptr

class CudaRuntime {
 public:
  static CudaRuntime& get();
  static std::string probe();

  std::string path;  // the file that was loaded
  GDS_SHIM_FN(cudaGetDeviceCount);
  GDS_SHIM_FN(cudaSetDevice);
  GDS_SHIM_FN(cudaGetDevice);
  GDS_SHIM_FN(cudaMalloc);
  GDS_SHIM_FN(cudaFree);
  GDS_SHIM_FN(cudaHostRegister);
  GDS_SHIM_FN(cudaHostUnregister);
  GDS_SHIM_FN(cudaMemcpyAsync);
  GDS_SHIM_FN(cudaMemcpy2D);
  GDS_SHIM_FN(cudaStreamCreateWithFlags);
  GDS_SHIM_FN(cudaStreamDestroy);
  GDS_SHIM_FN(cudaStreamSynchronize);
  GDS_SHIM_FN(cudaEventCreateWithFlags);
  GDS_SHIM_FN(cudaEventRecord);
  GDS_SHIM_FN(cudaEventQuery);
  GDS_SHIM_FN(cudaEventSynchronize);
  GDS_SHIM_FN(cudaEventDestroy);
  GDS_SHIM_FN(cudaEventElapsedTime);
  GDS_SHIM_FN(cudaGetErrorString);
  GDS_SHIM_FN(cudaDeviceGetPCIBusId);
  GDS_SHIM_FN(cudaDeviceSynchronize);
  GDS_SHIM_FN(cudaRuntimeGetVersion);
  GDS_SHIM_FN(cudaDriverGetVersion);
  GDS_SHIM_FN(cudaMemGetInfo);

  // Throws IoError "<what>: <CUDA's message>" unless err is cudaSuccess.
  void check(cudaError_t err, const std::string& what) const;

  CudaRuntime();  // loads and checks; use get(), which does this once per process
};

// The driver API's virtual memory management (--gpu-memory vmm), which the runtime does not offer:
// from libcuda, the driver's own library (the one the runtime loads), loaded only when asked for.
class CudaDriver {
 public:
  static CudaDriver& get();

  std::string path;
  GDS_SHIM_FN(cuInit);
  GDS_SHIM_FN(cuDeviceGet);
  GDS_SHIM_FN(cuDeviceGetAttribute);
  GDS_SHIM_FN(cuGetErrorString);
  GDS_SHIM_FN(cuMemGetAllocationGranularity);
  GDS_SHIM_FN(cuMemCreate);
  GDS_SHIM_FN(cuMemRelease);
  GDS_SHIM_FN(cuMemAddressReserve);
  GDS_SHIM_FN(cuMemAddressFree);
  GDS_SHIM_FN(cuMemMap);
  GDS_SHIM_FN(cuMemUnmap);
  GDS_SHIM_FN(cuMemSetAccess);

  // Throws IoError "<what>: <the driver's message>" unless result is CUDA_SUCCESS.
  void check(CUresult result, const std::string& what) const;

  CudaDriver();  // loads and initialises; use get()
};

class CuFileApi {
 public:
  static CuFileApi& get();  // also opens the cuFile driver, once per process
  static std::string probe();

  std::string path;
  GDS_SHIM_FN(cuFileDriverOpen);
  GDS_SHIM_FN(cuFileDriverGetProperties);
  GDS_SHIM_FN(cuFileHandleRegister);
  GDS_SHIM_FN(cuFileHandleDeregister);
  GDS_SHIM_FN(cuFileBufRegister);
  GDS_SHIM_FN(cuFileBufDeregister);
  GDS_SHIM_FN(cuFileRead);
  GDS_SHIM_FN(cuFileWrite);
  // The batch API (gdsio -x 6) and the stream API (gdsio -x 5): null where this libcufile lacks them
  // (batch_missing() and async_missing() say so), so the synchronous API still runs there.
  GDS_SHIM_FN(cuFileBatchIOSetUp);
  GDS_SHIM_FN(cuFileBatchIOSubmit);
  GDS_SHIM_FN(cuFileBatchIOGetStatus);
  GDS_SHIM_FN(cuFileBatchIOCancel);
  GDS_SHIM_FN(cuFileBatchIODestroy);
  GDS_SHIM_FN(cuFileReadAsync);
  GDS_SHIM_FN(cuFileWriteAsync);
  std::string batch_missing() const;  // "" where the batch API is there, else why not
  std::string async_missing() const;
  // cuFile's own statistics (libcufile 1.15, CUDA 13.0, on), null where this libcufile lacks them. Typed
  // here, not by cufile.h, whose older releases do not declare them; the level-3 struct is taken as bytes
  // (its layout changed in CUDA 13.4: gdsbench/system/cufile_stats.py reads it).
  CUfileError_t (*cuFileGetVersion)(int*) = nullptr;
  CUfileError_t (*cuFileSetStatsLevel)(int) = nullptr;
  CUfileError_t (*cuFileStatsStart)() = nullptr;
  CUfileError_t (*cuFileGetStatsL3)(void*) = nullptr;
  // Turns level-3 statistics on, the first time only: "" once they count, else why they do not.
  // Left off in processes that never read them (info, --procs workers, kvikio), as cufile.json has it.
  const std::string& start_stats();

  static std::string error_text(CUfileError_t status);

  CuFileApi();  // loads and opens the driver; use get()

 private:
  std::once_flag stats_once_;
  std::string stats_off_;
};

#undef GDS_SHIM_FN

}  // namespace gds::gpu
