// The code-generation half of a realize, without compiling or running anything: the linearized
// kernels a graph becomes, exactly as the engine produces them. Renderers for devices that
// cannot run here (CUDA on a machine without a GPU) are checked against these.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/engine/pipeline.h"
#include "core/ir/uop.h"

namespace polygrad {

// One scheduled kernel root through the per-kernel passes as the CPU runs them
// (generate_kernel, pipeline.h: lower, simplify, optimize, linearize).
absl::StatusOr<GeneratedKernel> lower_to_linear(const UOpRef& root,
                                                const std::function<bool(const UOp*)>& materialized);

// The same for a CUDA kernel: every output element in one outer loop (the grid's threads, or
// warps or blocks for reductions: render/cuda_renderer.h) — a GPU's parallelism is its threads.
// Only a reducing kernel with 2^20 outputs or more (a big matmul or convolution) whose last two
// long axes divide by 4 gets register tiles: an outer iteration per 4 x 4 tile of those axes.
absl::StatusOr<GeneratedKernel> lower_for_cuda(const UOpRef& root, const std::function<bool(const UOp*)>& materialized);

// create_schedule, then lower_to_linear (lower_for_cuda when `cuda`) for every kernel with at
// least one element, in execution order. `is_bound` as for create_schedule (every BUFFER leaf
// must be bound).
absl::StatusOr<std::vector<LinearKernel>> kernels_for(const std::vector<UOpRef>& outputs,
                                                      const std::function<bool(const UOp*)>& is_bound,
                                                      bool cuda = false);

}  // namespace polygrad
