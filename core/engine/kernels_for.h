// The code-generation half of a realize, without compiling or running anything: the linearized
// kernels a graph becomes, exactly as the engine produces them. Renderers for devices that
// cannot run here (CUDA on a machine without a GPU) are checked against these.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/ir/uop.h"

namespace polygrad {

// One scheduled kernel root through the per-kernel passes, in order: lower_kernel (tensor node
// to kernel AST), graph_rewrite(symbolic), apply_upcasts (register tiles), linearize.
struct LoweredKernel {
  LinearKernel linear;
  std::vector<const UOp*> params;  // tensor node behind each DEFINE_GLOBAL; params[0] is the output
  UOpRef simplified;               // the kernel AST before optimize: what tuning tiles otherwise
};
absl::StatusOr<LoweredKernel> lower_to_linear(const UOpRef& root,
                                              const std::function<bool(const UOp*)>& materialized);

// The same for a CUDA kernel: every output element in one outer loop (the grid's threads, or
// warps or blocks for reductions: render/cuda_renderer.h) — a GPU's parallelism is its threads.
// Only a reducing kernel with 2^20 outputs or more (a big matmul or convolution) whose last two
// long axes divide by 4 gets register tiles: an outer iteration per 4 x 4 tile of those axes.
absl::StatusOr<LoweredKernel> lower_for_cuda(const UOpRef& root, const std::function<bool(const UOp*)>& materialized);

// create_schedule, then lower_to_linear (lower_for_cuda when `cuda`) for every kernel with at
// least one element, in execution order. `is_bound` as for create_schedule (every BUFFER leaf
// must be bound).
absl::StatusOr<std::vector<LinearKernel>> kernels_for(const std::vector<UOpRef>& outputs,
                                                      const std::function<bool(const UOp*)>& is_bound,
                                                      bool cuda = false);

}  // namespace polygrad
