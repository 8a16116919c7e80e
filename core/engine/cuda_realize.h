// The CUDA half of a realize: schedule, lower, render CUDA C, compile to a CUBIN through the
// kernel cache (runtime/cuda/cubin.h) and run every kernel on one stream of one GPU.
// Only core/engine includes this.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/runtime/cuda/device.h"

namespace polygrad {

// Computes `outputs`, every node of which lives on `stream`'s device (placement.h); bound
// buffers read by kernels must be on that device. Returns when the work has finished.
absl::StatusOr<RealizeResult> realize_on_cuda(Engine::Impl& impl, CudaStream& stream, const std::vector<UOpRef>& outputs,
                                              const Bindings& bound, const RealizeOptions& options);

}  // namespace polygrad
