#include "core/runtime/cuda/driver.h"

#include <dlfcn.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/runtime/cuda/dl.h"
#include "core/runtime/cuda/driver_api.h"

namespace polygrad {
using namespace cuda;  // NOLINT: the driver's own names, as in cuda.h

struct CudaDriver::Api : DriverApi {};

absl::StatusOr<const CudaDriver*> CudaDriver::load() {
  constexpr const char* kLibrary = "libcuda.so.1";
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return absl::FailedPreconditionError(absl::StrCat(kLibrary, " not found: ", dlerror()));
  auto api = std::make_unique<Api>();
  // A revised entry point first, then its first version (same signature) for older drivers.
  auto either = [&](const char* revised, const char* plain, auto& fn) {
    return resolve_symbol(lib, revised, fn) || resolve_symbol(lib, plain, fn);
  };
  bool ok = resolve_symbol(lib, "cuInit", api->cuInit) &&
            resolve_symbol(lib, "cuDriverGetVersion", api->cuDriverGetVersion) &&
            resolve_symbol(lib, "cuGetErrorName", api->cuGetErrorName) &&
            resolve_symbol(lib, "cuGetErrorString", api->cuGetErrorString) &&
            resolve_symbol(lib, "cuDeviceGetCount", api->cuDeviceGetCount) &&
            resolve_symbol(lib, "cuDeviceGet", api->cuDeviceGet) &&
            resolve_symbol(lib, "cuDeviceGetName", api->cuDeviceGetName) &&
            resolve_symbol(lib, "cuDeviceGetAttribute", api->cuDeviceGetAttribute) &&
            resolve_symbol(lib, "cuDevicePrimaryCtxRetain", api->cuDevicePrimaryCtxRetain) &&
            either("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", api->cuDevicePrimaryCtxRelease) &&
            resolve_symbol(lib, "cuCtxSetCurrent", api->cuCtxSetCurrent) &&
            resolve_symbol(lib, "cuMemGetInfo_v2", api->cuMemGetInfo) &&
            resolve_symbol(lib, "cuMemAlloc_v2", api->cuMemAlloc) &&
            resolve_symbol(lib, "cuMemFree_v2", api->cuMemFree) &&
            resolve_symbol(lib, "cuMemHostAlloc", api->cuMemHostAlloc) &&
            resolve_symbol(lib, "cuMemFreeHost", api->cuMemFreeHost) &&
            resolve_symbol(lib, "cuMemcpyHtoDAsync_v2", api->cuMemcpyHtoDAsync) &&
            resolve_symbol(lib, "cuMemcpyDtoHAsync_v2", api->cuMemcpyDtoHAsync) &&
            resolve_symbol(lib, "cuMemcpyDtoDAsync_v2", api->cuMemcpyDtoDAsync) &&
            resolve_symbol(lib, "cuMemsetD8Async", api->cuMemsetD8Async) &&
            resolve_symbol(lib, "cuStreamCreate", api->cuStreamCreate) &&
            either("cuStreamDestroy_v2", "cuStreamDestroy", api->cuStreamDestroy) &&
            resolve_symbol(lib, "cuStreamSynchronize", api->cuStreamSynchronize) &&
            resolve_symbol(lib, "cuEventCreate", api->cuEventCreate) &&
            either("cuEventDestroy_v2", "cuEventDestroy", api->cuEventDestroy) &&
            resolve_symbol(lib, "cuEventRecord", api->cuEventRecord) &&
            resolve_symbol(lib, "cuEventSynchronize", api->cuEventSynchronize) &&
            either("cuEventElapsedTime_v2", "cuEventElapsedTime", api->cuEventElapsedTime) &&
            resolve_symbol(lib, "cuModuleLoadData", api->cuModuleLoadData) &&
            resolve_symbol(lib, "cuModuleUnload", api->cuModuleUnload) &&
            resolve_symbol(lib, "cuModuleGetFunction", api->cuModuleGetFunction) &&
            resolve_symbol(lib, "cuLaunchKernel", api->cuLaunchKernel);
  if (!ok) {
    std::string why = dlerror();
    dlclose(lib);
    return absl::FailedPreconditionError(absl::StrCat(kLibrary, " lacks a driver entry point: ", why));
  }
  auto d = std::unique_ptr<CudaDriver>(new CudaDriver());
  d->api_ = api.get();
  // The library stays loaded even when cuInit fails: unloading a driver is never safe.
  if (CUresult r = api->cuInit(0); r != CUDA_SUCCESS) return d->error("cuInit", r);
  if (CUresult r = api->cuDriverGetVersion(&d->version_); r != CUDA_SUCCESS) return d->error("cuDriverGetVersion", r);
  api.release();  // owned by the driver object, which lives as long as the process
  return d.release();
}

absl::StatusOr<const CudaDriver*> CudaDriver::get() {
  static const absl::StatusOr<const CudaDriver*> loaded = load();
  return loaded;
}

absl::Status CudaDriver::error(const char* what, int result) const {
  return status(what, result, absl::StatusCode::kFailedPrecondition);
}

absl::Status CudaDriver::check(const char* what, int result) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  // Out of device memory fails the request that asked, not the daemon; anything else the
  // driver reports during execution is the daemon's own fault.
  return status(what, result,
                result == CUDA_ERROR_OUT_OF_MEMORY ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal);
}

absl::Status CudaDriver::status(const char* what, int result, absl::StatusCode code) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_->cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUDA error";
  if (api_->cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "";
  return absl::Status(code, absl::StrCat(what, " failed: ", name, " (", result, "): ", text));
}

const DriverApi& CudaDriver::api() const { return *api_; }

std::string CudaDriver::version_string() const { return absl::StrCat(version_ / 1000, ".", version_ % 1000 / 10); }

absl::StatusOr<std::vector<CudaDeviceProps>> CudaDriver::devices() const {
  const Api& f = *api_;
  int count = 0;
  if (CUresult r = f.cuDeviceGetCount(&count); r != CUDA_SUCCESS) return error("cuDeviceGetCount", r);
  std::vector<CudaDeviceProps> out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (CUresult r = f.cuDeviceGet(&dev, i); r != CUDA_SUCCESS) return error("cuDeviceGet", r);
    CudaDeviceProps p{.ordinal = i};
    char name[256] = {};
    if (CUresult r = f.cuDeviceGetName(name, sizeof(name) - 1, dev); r != CUDA_SUCCESS)
      return error("cuDeviceGetName", r);
    p.name = name;
    if (CUresult r = f.cuDeviceGetAttribute(&p.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        r != CUDA_SUCCESS)
      return error("cuDeviceGetAttribute", r);
    if (CUresult r = f.cuDeviceGetAttribute(&p.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        r != CUDA_SUCCESS)
      return error("cuDeviceGetAttribute", r);
    if (CUresult r = f.cuDeviceGetAttribute(&p.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        r != CUDA_SUCCESS)
      return error("cuDeviceGetAttribute", r);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace polygrad
