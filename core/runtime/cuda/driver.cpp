#include "core/runtime/cuda/driver.h"

#include <dlfcn.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/runtime/cuda/dl.h"

namespace polygrad {
namespace {

// The few driver declarations used, as in cuda.h (so no toolkit is needed to build). These
// entry points have had one ABI since CUDA 2.0, so plain dlsym finds the right version.
using CUresult = int;
using CUdevice = int;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

}  // namespace

struct CudaDriver::Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
};

absl::StatusOr<const CudaDriver*> CudaDriver::load() {
  constexpr const char* kLibrary = "libcuda.so.1";
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return absl::FailedPreconditionError(absl::StrCat(kLibrary, " not found: ", dlerror()));
  auto api = std::make_unique<Api>();
  bool ok = resolve_symbol(lib, "cuInit", api->cuInit) &&
            resolve_symbol(lib, "cuDriverGetVersion", api->cuDriverGetVersion) &&
            resolve_symbol(lib, "cuGetErrorName", api->cuGetErrorName) &&
            resolve_symbol(lib, "cuGetErrorString", api->cuGetErrorString) &&
            resolve_symbol(lib, "cuDeviceGetCount", api->cuDeviceGetCount) &&
            resolve_symbol(lib, "cuDeviceGet", api->cuDeviceGet) &&
            resolve_symbol(lib, "cuDeviceGetName", api->cuDeviceGetName) &&
            resolve_symbol(lib, "cuDeviceGetAttribute", api->cuDeviceGetAttribute);
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
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_->cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUDA error";
  if (api_->cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "";
  return absl::FailedPreconditionError(absl::StrCat(what, " failed: ", name, " (", result, "): ", text));
}

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
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace polygrad
