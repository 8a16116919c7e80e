// The CUDA half of a realize: schedule, lower, render CUDA C, compile to a CUBIN through the
// kernel cache (runtime/cuda/cubin.h) and run every kernel on one stream of one GPU. Compiled
// plans (plan.cpp) build their kernels here too. Only core/engine includes this.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/runtime/cuda/device.h"
#include "core/schedule/schedule.h"

namespace polygrad {

struct CudaKernel {
  std::shared_ptr<const CudaProgram> program;  // null: no elements, nothing to launch
  std::vector<const UOp*> params;              // params[0] is the output
  int64_t outer_size = 0;
  int threads_per_iteration = 1;  // render/cuda_renderer.h: 32 when a warp computes each iteration
};

struct CudaSchedule {
  Schedule schedule;
  std::vector<CudaKernel> kernels;  // kernels[i] computes schedule.items[i]
};

// Schedules `roots` and builds each kernel for `dev` (steps 1-6 of a realize, with CUDA C and
// CUBINs). `what` names the caller in the CANCELLED message when options.should_stop fires.
absl::StatusOr<CudaSchedule> compile_for_cuda(Engine::Impl& impl, CudaDevice& dev, const std::vector<UOpRef>& roots,
                                              const std::function<bool(const UOp*)>& is_bound,
                                              const RealizeOptions& options, const char* what, RealizeStats& stats);

// Kernel times of one batch of launches on a stream, reported to the engine's observer once the
// stream has finished (event timing that never waits between launches). Without an observer it
// records nothing.
class KernelTimes {
 public:
  KernelTimes(Engine::Impl& impl, const CudaStream& stream) : impl_(impl), stream_(stream) {}
  // Launches the kernel, with events around it when there is an observer.
  absl::Status launch(const CudaKernel& k, const void* const* args, size_t nargs);
  // Call after the stream was synchronized: reports every timed launch.
  absl::Status report();

 private:
  Engine::Impl& impl_;
  const CudaStream& stream_;
  std::vector<std::unique_ptr<CudaDevice::Timer>> timers_;
};

// Computes `outputs`, every node of which lives on `stream`'s device (placement.h); bound
// buffers read by kernels must be on that device. Returns when the work has finished.
absl::StatusOr<RealizeResult> realize_on_cuda(Engine::Impl& impl, CudaStream& stream, const std::vector<UOpRef>& outputs,
                                              const Bindings& bound, const RealizeOptions& options);

}  // namespace polygrad
