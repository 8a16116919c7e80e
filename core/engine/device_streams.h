// The GPU streams one client session's work runs on. A session's kernels and transfers on a GPU
// are queued in order on its own stream, so one session's work never waits behind another's
// queue, and no realize pays for creating a stream. A realize without a session gets a set of
// its own (RealizeOptions::streams empty). Only core and the server's session include this.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"

namespace polygrad {

class CudaDevice;
class CudaStream;

// CUDA device `code` (placement.h: k + 1 is CUDA:k), opened at first use; FAILED_PRECONDITION
// "CUDA:k is not available: <reason>" when it cannot be used.
absl::StatusOr<CudaDevice*> cuda_device_of(int64_t code);

class DeviceStreams {
 public:
  DeviceStreams();
  // Waits for each stream's queued work, then destroys the streams.
  ~DeviceStreams();
  DeviceStreams(const DeviceStreams&) = delete;
  DeviceStreams& operator=(const DeviceStreams&) = delete;

  // The stream for GPU `code`, created at the first call for that device. Safe to call from
  // several threads; the stream lives as long as this object.
  absl::StatusOr<CudaStream*> on(int64_t code);

 private:
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<CudaStream>> streams_;
};

}  // namespace polygrad
