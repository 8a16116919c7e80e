#include "core/engine/device_streams.h"

#include "absl/strings/str_cat.h"
#include "core/engine/placement.h"
#include "core/runtime/cuda/device.h"

namespace polygrad {

absl::StatusOr<CudaDevice*> cuda_device_of(int64_t code) {
  if (code <= kCpuDevice) return absl::InvalidArgumentError(absl::StrCat(device_name(code), " is not a GPU"));
  auto dev = CudaDevice::get(static_cast<int>(code - 1));
  if (!dev.ok())
    return absl::FailedPreconditionError(absl::StrCat(device_name(code), " is not available: ", dev.status().message()));
  return dev;
}

DeviceStreams::DeviceStreams() = default;
DeviceStreams::~DeviceStreams() = default;

absl::StatusOr<CudaStream*> DeviceStreams::on(int64_t code) {
  std::lock_guard lock(mu_);
  if (auto it = streams_.find(code); it != streams_.end()) return it->second.get();
  auto dev = cuda_device_of(code);
  if (!dev.ok()) return dev.status();
  auto s = CudaStream::create(**dev);
  if (!s.ok()) return s.status();
  return streams_.emplace(code, std::move(*s)).first->second.get();
}

}  // namespace polygrad
