// Built without CUDA headers: no real GPU device, only the simulation.
#include "../error.hpp"
#include "device.hpp"

namespace gds::gpu {

std::unique_ptr<Device> open_simulated_device(const std::string& backend, int index);

static const char* kWhy =
    "this build of gdsbench has no GPU support: CUDA headers (cuda_runtime_api.h, cufile.h) were not "
    "found at build time; reinstall with network access to PyPI (the build fetches them) or with the CUDA toolkit";

std::unique_ptr<Device> open_device(const std::string& backend, int index) {
  if (backend == "cuda") throw InputError(std::string("--mode: ") + kWhy);
  return open_simulated_device(backend, index);
}

}  // namespace gds::gpu

#include "status.hpp"

namespace gds::gpu {

void set_library_candidates(const std::string&, const std::vector<std::string>&) {}

GpuStatus gpu_status() {
  GpuStatus s;
  s.cudart_error = kWhy;
  s.cufile_error = kWhy;
  return s;
}

CufileStats cufile_stats() {
  CufileStats s;
  s.error = kWhy;
  return s;
}

}  // namespace gds::gpu
