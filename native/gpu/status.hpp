// What `gdsbench info` reports about CUDA and cuFile on this machine, in plain
// types (no CUDA headers needed to use it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gds::gpu {

struct DeviceStatus {
  int index = 0;
  std::string pci_bus_id;
  uint64_t total_bytes = 0, free_bytes = 0;
};

struct GpuStatus {
  bool built_with_cuda = false;
  std::string cudart_error;  // "" when libcudart loaded and sees a GPU
  std::string cudart_path;
  int runtime_version = 0, driver_version = 0;
  std::vector<DeviceStatus> devices;
  std::string cufile_error;  // "" when libcufile loaded and its driver opened
  std::string cufile_path;
  unsigned nvfs_major = 0, nvfs_minor = 0;  // nvidia-fs version as cuFile sees it
  bool compat_allowed = false;              // cufile.json allow_compat_mode
  bool p2pdma_supported = false;            // cuFile reports PCI P2PDMA (GPUDirect without nvidia-fs)
  uint64_t max_direct_io_size = 0;
};

GpuStatus gpu_status();

// What cuFile's own statistics say now in this process (cuFileGetStatsL3), as the bytes the library
// wrote, for gdsbench/system/cufile_stats.py to read by their number (the struct's size tells its layout).
struct CufileStats {
  std::string error;  // "" when read, else why not
  int version = 0;    // cuFileGetVersion: 1000 * major + 10 * minor, 0 where unknown
  std::string bytes;
};

CufileStats cufile_stats();

// Library files tried in order when loading "cudart", "cufile" or "cuda" (libcuda), after
// $GDSBENCH_CUDART, $GDSBENCH_CUFILE or $GDSBENCH_LIBCUDA and the usual sonames. The Python layer
// adds the nvidia-* wheels' copies before first use.
void set_library_candidates(const std::string& library, const std::vector<std::string>& paths);

}  // namespace gds::gpu
