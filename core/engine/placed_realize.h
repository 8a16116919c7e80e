// Realizes graphs that involve a device other than the CPU: COPY nodes become transfers between
// kernels, and each output is computed on its device, through the one pipeline (pipeline.h) on
// that device's backend. Only core/engine includes this.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"

namespace polygrad {

// `engine.realize` for a graph for which needs_placement() holds.
absl::StatusOr<RealizeResult> realize_placed(Engine& engine, Engine::Impl& impl, const std::vector<UOpRef>& outputs,
                                             const Bindings& bound, const RealizeOptions& options);

// OK when CUDA device `code` (placement.h) exists and CUDA is usable; FAILED_PRECONDITION
// "CUDA:<k> is not available: <reason>" otherwise. Probes without creating a context.
absl::Status cuda_device_usable(int64_t code);

}  // namespace polygrad
