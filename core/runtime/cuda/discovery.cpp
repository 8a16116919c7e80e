#include "core/runtime/cuda/discovery.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/cuda/nvrtc.h"

namespace polygrad {
namespace {

CudaAvailability probe() {
  CudaAvailability out;
  auto driver = CudaDriver::get();
  if (!driver.ok()) {
    out.detail = std::string(driver.status().message());
    return out;
  }
  auto devices = (*driver)->devices();
  if (!devices.ok()) {
    out.detail = std::string(devices.status().message());
    return out;
  }
  std::string driver_line = absl::StrCat("driver ", (*driver)->version_string());
  if (devices->empty()) {
    out.detail = absl::StrCat("no CUDA devices (", driver_line, ")");
    return out;
  }
  std::vector<std::string> names;
  for (const CudaDeviceProps& d : *devices)
    names.push_back(absl::StrCat("cuda:", d.ordinal, " ", d.name, " (sm_", d.arch(), ")"));
  std::string found = absl::StrJoin(names, ", ");
  auto nvrtc = Nvrtc::get();
  if (!nvrtc.ok()) {
    out.detail = absl::StrCat(found, "; ", driver_line, "; but ", nvrtc.status().message());
    return out;
  }
  out.available = true;
  out.devices = std::move(*devices);
  out.detail = absl::StrCat(found, "; ", driver_line, "; NVRTC ", (*nvrtc)->version());
  return out;
}

}  // namespace

const CudaAvailability& cuda_availability() {
  static const CudaAvailability probed = probe();
  return probed;
}

}  // namespace polygrad
