// The CUDA driver API, loaded with dlopen("libcuda.so.1") (never linked: the toolkit's stub
// library would make the binary fail to start on machines without a driver). For now it offers
// discovery only; allocation, modules and launches come with GPU execution.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace polygrad {

struct CudaDeviceProps {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int cc_major = 0;  // compute capability: 9.0 is sm_90
  int cc_minor = 0;
  int arch() const { return cc_major * 10 + cc_minor; }
};

class CudaDriver {
 public:
  // The process's driver: libcuda.so.1 loaded and cuInit(0) done, once; thread-safe.
  // FAILED_PRECONDITION saying why when the library is missing or cuInit fails (no device, the
  // stub library, a driver too old for this build).
  static absl::StatusOr<const CudaDriver*> get();

  int version() const { return version_; }  // cuDriverGetVersion: 13000 for CUDA 13.0
  std::string version_string() const;      // "13.0"

  // Every device the driver sees (may be empty).
  absl::StatusOr<std::vector<CudaDeviceProps>> devices() const;

  struct Api;  // the entry points, resolved with dlsym

 private:
  CudaDriver() = default;
  static absl::StatusOr<const CudaDriver*> load();
  // A failed call as a status: "<what>: CUDA_ERROR_...: <the driver's description>".
  absl::Status error(const char* what, int result) const;

  const Api* api_ = nullptr;
  int version_ = 0;
};

}  // namespace polygrad
