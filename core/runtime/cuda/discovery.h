// Whether this process can use CUDA, and why not: the line a device list shows.
#pragma once

#include <string>
#include <vector>

#include "core/runtime/cuda/driver.h"

namespace polygrad {

struct CudaAvailability {
  bool available = false;  // a driver with at least one device, and NVRTC
  // Available: "cuda:0 NVIDIA H200 (sm_90); driver 13.0; NVRTC 13.0". Otherwise why not, e.g.
  // "libcuda.so.1 not found: ...", "no CUDA devices (driver 13.0)".
  std::string detail;
  std::vector<CudaDeviceProps> devices;
};

// Probed once per process, at the first call (loads libcuda.so.1 and NVRTC); thread-safe.
const CudaAvailability& cuda_availability();

}  // namespace polygrad
