// The CUDA driver API, loaded with dlopen("libcuda.so.1") (never linked: the toolkit's stub
// library would make the binary fail to start on machines without a driver): discovery here;
// contexts, memory, streams, modules and launches through api() (runtime/cuda/device.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace polygrad::cuda {
struct DriverApi;
}

namespace polygrad {

struct CudaDeviceProps {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int cc_major = 0;  // compute capability: 9.0 is sm_90
  int cc_minor = 0;
  int multiprocessors = 0;
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
  // The resolved entry points (driver_api.h), for runtime/cuda only.
  const cuda::DriverApi& api() const;

  // OK for CUDA_SUCCESS; else "<what> failed: CUDA_ERROR_<NAME> (<n>): <description>" as
  // RESOURCE_EXHAUSTED for CUDA_ERROR_OUT_OF_MEMORY and INTERNAL for anything else.
  absl::Status check(const char* what, int result) const;

 private:
  CudaDriver() = default;
  static absl::StatusOr<const CudaDriver*> load();
  // A failed call as a status: "<what>: CUDA_ERROR_...: <the driver's description>".
  absl::Status error(const char* what, int result) const;
  absl::Status status(const char* what, int result, absl::StatusCode code) const;

  const Api* api_ = nullptr;
  int version_ = 0;
};

}  // namespace polygrad
