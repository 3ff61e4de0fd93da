#include "cuda.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "../error.hpp"

namespace gds::gpu {
namespace {

std::mutex g_mu;
std::map<std::string, std::vector<std::string>> g_extra;  // set by Python: wheel copies

// Each library's overriding environment variable and its usual sonames, tried in that order.
struct LibraryDefaults {
  const char* env;
  std::vector<std::string> names;
};

const std::map<std::string, LibraryDefaults>& defaults() {
  static const std::map<std::string, LibraryDefaults> d = {
      {"cudart", {"GDSBENCH_CUDART", {"libcudart.so", "libcudart.so.13", "libcudart.so.12"}}},
      {"cufile", {"GDSBENCH_CUFILE", {"libcufile.so", "libcufile.so.0"}}},
      {"cuda", {"GDSBENCH_LIBCUDA", {"libcuda.so.1", "libcuda.so"}}},
  };
  return d;
}

// dlopen the first candidate that loads; throws InputError listing what was tried.
void* open_library(const std::string& library, std::string* loaded) {
  std::string tried, last_error;
  for (const auto& path : library_candidates(library)) {
    if (void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *loaded = path;
      return h;
    }
    const char* e = ::dlerror();
    last_error = e ? e : "";
    tried += (tried.empty() ? "" : ", ") + path;
  }
  throw InputError("lib" + library + " not found (tried " + tried + "; last error: " + last_error + ")");
}

template <typename F>
void bind(void* handle, F& fn, const char* name, const std::string& library) {
  ::dlerror();
  void* sym = ::dlsym(handle, name);
  if (!sym) throw InputError("lib" + library + " has no " + name + " (too old?)");
  fn = reinterpret_cast<F>(sym);
}

// A process-wide singleton whose construction may fail: the failure is kept
// and reported again on every later get(), without retrying.
template <typename T>
struct Once {
  std::mutex mu;  // one per library: cuFile's construction takes CUDA's
  std::unique_ptr<T> value;
  std::string error;
  bool tried = false;

  T& get() {
    std::lock_guard<std::mutex> lock(mu);
    if (!tried) {
      tried = true;
      try {
        value.reset(new T());
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (!value) throw InputError(error);
    return *value;
  }
};

// "" when T::get() succeeds, else why it does not.
template <typename T>
std::string why_not() {
  try {
    T::get();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

void set_library_candidates(const std::string& library, const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_extra[library] = paths;
}

std::vector<std::string> library_candidates(const std::string& library) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> out;
  auto d = defaults().find(library);
  if (d != defaults().end()) {
    if (const char* p = std::getenv(d->second.env)) out.push_back(p);
    out.insert(out.end(), d->second.names.begin(), d->second.names.end());
  }
  auto e = g_extra.find(library);
  if (e != g_extra.end()) out.insert(out.end(), e->second.begin(), e->second.end());
  return out;
}

// A symbol only newer libraries have: left null where this one lacks it.
template <typename F>
void bind_optional(void* handle, F& fn, const char* name) {
  fn = reinterpret_cast<F>(::dlsym(handle, name));
}

#define GDS_BIND(lib, name) bind(handle, name, #name, lib)
#define GDS_BIND_OPTIONAL(name) bind_optional(handle, name, #name)

CudaRuntime::CudaRuntime() {
  void* handle = open_library("cudart", &path);
  GDS_BIND("cudart", cudaGetDeviceCount);
  GDS_BIND("cudart", cudaSetDevice);
  GDS_BIND("cudart", cudaGetDevice);
  GDS_BIND("cudart", cudaMalloc);
  GDS_BIND("cudart", cudaFree);
  GDS_BIND("cudart", cudaHostRegister);
  GDS_BIND("cudart", cudaHostUnregister);
  GDS_BIND("cudart", cudaMemcpyAsync);
  GDS_BIND("cudart", cudaMemcpy2D);
  GDS_BIND("cudart", cudaStreamCreateWithFlags);
  GDS_BIND("cudart", cudaStreamDestroy);
  GDS_BIND("cudart", cudaStreamSynchronize);
  GDS_BIND("cudart", cudaEventCreateWithFlags);
  GDS_BIND("cudart", cudaEventRecord);
  GDS_BIND("cudart", cudaEventQuery);
  GDS_BIND("cudart", cudaEventSynchronize);
  GDS_BIND("cudart", cudaEventDestroy);
  GDS_BIND("cudart", cudaEventElapsedTime);
  GDS_BIND("cudart", cudaGetErrorString);
  GDS_BIND("cudart", cudaDeviceGetPCIBusId);
  GDS_BIND("cudart", cudaDeviceSynchronize);
  GDS_BIND("cudart", cudaRuntimeGetVersion);
  GDS_BIND("cudart", cudaDriverGetVersion);
  GDS_BIND("cudart", cudaMemGetInfo);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    throw InputError("CUDA cannot see a GPU: cudaGetDeviceCount: " + std::string(cudaGetErrorString(err)) +
                     " (is the NVIDIA driver loaded?)");
  if (count == 0) throw InputError("CUDA sees no GPU on this machine");
}

void CudaRuntime::check(cudaError_t err, const std::string& what) const {
  if (err != cudaSuccess) throw IoError(what + ": " + cudaGetErrorString(err));
}

CudaRuntime& CudaRuntime::get() {
  static Once<CudaRuntime> once;
  return once.get();
}

std::string CudaRuntime::probe() { return why_not<CudaRuntime>(); }

CudaDriver::CudaDriver() {
  void* handle = open_library("cuda", &path);
  GDS_BIND("cuda", cuInit);
  GDS_BIND("cuda", cuDeviceGet);
  GDS_BIND("cuda", cuDeviceGetAttribute);
  GDS_BIND("cuda", cuGetErrorString);
  GDS_BIND("cuda", cuMemGetAllocationGranularity);
  GDS_BIND("cuda", cuMemCreate);
  GDS_BIND("cuda", cuMemRelease);
  GDS_BIND("cuda", cuMemAddressReserve);
  GDS_BIND("cuda", cuMemAddressFree);
  GDS_BIND("cuda", cuMemMap);
  GDS_BIND("cuda", cuMemUnmap);
  GDS_BIND("cuda", cuMemSetAccess);
  check(cuInit(0), "cuInit");
}

void CudaDriver::check(CUresult result, const std::string& what) const {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorString(result, &text);
  throw IoError(what + ": " + (text ? text : "CUDA driver error " + std::to_string(int(result))));
}

CudaDriver& CudaDriver::get() {
  static Once<CudaDriver> once;
  return once.get();
}

CuFileApi::CuFileApi() {
  CudaRuntime::get();  // cuFile needs a working CUDA runtime underneath
  void* handle = open_library("cufile", &path);
  GDS_BIND("cufile", cuFileDriverOpen);
  GDS_BIND("cufile", cuFileDriverGetProperties);
  GDS_BIND("cufile", cuFileHandleRegister);
  GDS_BIND("cufile", cuFileHandleDeregister);
  GDS_BIND("cufile", cuFileBufRegister);
  GDS_BIND("cufile", cuFileBufDeregister);
  GDS_BIND("cufile", cuFileRead);
  GDS_BIND("cufile", cuFileWrite);
  GDS_BIND_OPTIONAL(cuFileBatchIOSetUp);
  GDS_BIND_OPTIONAL(cuFileBatchIOSubmit);
  GDS_BIND_OPTIONAL(cuFileBatchIOGetStatus);
  GDS_BIND_OPTIONAL(cuFileBatchIOCancel);
  GDS_BIND_OPTIONAL(cuFileBatchIODestroy);
  GDS_BIND_OPTIONAL(cuFileReadAsync);
  GDS_BIND_OPTIONAL(cuFileWriteAsync);
  GDS_BIND_OPTIONAL(cuFileGetVersion);
  GDS_BIND_OPTIONAL(cuFileSetStatsLevel);
  GDS_BIND_OPTIONAL(cuFileStatsStart);
  GDS_BIND_OPTIONAL(cuFileGetStatsL3);
  CUfileError_t status = cuFileDriverOpen();
  if (status.err != CU_FILE_SUCCESS)
    throw InputError("cuFileDriverOpen failed: " + error_text(status) +
                     " (is nvidia-fs loaded, or compat mode allowed in cufile.json?)");
}

// Level 3 (per GPU: requests through nvidia-fs, by PCI P2PDMA, by POSIX) is the level that observes the
// path a request took; the counting is cuFile's, in this process, from here on.
const std::string& CuFileApi::start_stats() {
  std::call_once(stats_once_, [this] {
    const char* setting = std::getenv("GDSBENCH_CUFILE_STATS");
    if (setting && std::string(setting) == "0") {
      stats_off_ = "turned off (GDSBENCH_CUFILE_STATS=0)";
    } else if (!cuFileSetStatsLevel || !cuFileStatsStart || !cuFileGetStatsL3) {
      stats_off_ = path + " has no statistics API (cuFileGetStatsL3: libcufile 1.15, CUDA 13.0, on)";
    } else if (CUfileError_t s = cuFileSetStatsLevel(3); s.err != CU_FILE_SUCCESS) {
      stats_off_ = "cuFileSetStatsLevel(3): " + error_text(s);
    } else if (s = cuFileStatsStart(); s.err != CU_FILE_SUCCESS) {
      stats_off_ = "cuFileStatsStart: " + error_text(s);
    }
  });
  return stats_off_;
}

std::string CuFileApi::error_text(CUfileError_t status) {
  std::string text = cufileop_status_error(status.err);
  if (status.err == CU_FILE_CUDA_DRIVER_ERROR)
    text += " (CUDA driver error " + std::to_string(int(status.cu_err)) + ")";
  return text;
}

std::string CuFileApi::batch_missing() const {
  if (cuFileBatchIOSetUp && cuFileBatchIOSubmit && cuFileBatchIOGetStatus && cuFileBatchIOCancel &&
      cuFileBatchIODestroy)
    return "";
  return path + " has no batch API (cuFileBatchIOSubmit: libcufile from CUDA 12.0 on)";
}

std::string CuFileApi::async_missing() const {
  if (cuFileReadAsync && cuFileWriteAsync) return "";
  return path + " has no stream API (cuFileReadAsync: libcufile from CUDA 12.2 on)";
}

CuFileApi& CuFileApi::get() {
  static Once<CuFileApi> once;
  return once.get();
}

std::string CuFileApi::probe() { return why_not<CuFileApi>(); }

}  // namespace gds::gpu
