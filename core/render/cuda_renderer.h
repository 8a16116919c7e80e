// Renders a linearized kernel as CUDA C for NVRTC (compute capability 8.0 and newer). The entry
// point is
//   extern "C" __global__ void pg_kernel(T0* b0, const T1* b1, ..., int64_t n)
// with bi the device pointer of DEFINE_GLOBAL i (b0 the output) and n the trip count of the
// kernel's outer loop (LinearKernel::outer_size, 1 when it has none). The outer loop is spread
// over the grid, grid-stride, so any launch shape is correct; every other loop runs inside its
// thread (or its warp, below), with upcast lanes and array accumulators in registers as in C. The op table is the
// C-family base's (cstyle.h): the same expressions, constants, trap-free division and 16-bit
// floats stored as bits, so a kernel computes what the CPU's does. The source needs no header
// (NVRTC has no system headers); every name in it is the renderer's own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"

namespace polygrad {

absl::StatusOr<std::string> render_cuda(const LinearKernel& kernel);

// Shared-memory staging: a register-tiled kernel whose tiles go in 16 x 16 squares (a block's
// kBlockLanes threads compute one square per outer iteration) stages the loads that follow the
// tile's row or its column through __shared__ memory, 16 reduction iterations at a time
// (core/render/operand_staging.h). Such a kernel must be launched with blocks of exactly
// kBlockLanes threads, as launch_dims does; true for those kernels.
bool cuda_stages_operands(const LinearKernel& k);

// Reductions: a kernel whose reductions sit in its outer loop (not inside an upcast tile or
// another reduction), with one at least 64 long and at most 2^15 outer iterations (beyond that,
// a thread per iteration already fills the GPU), is rendered with one group of lanes per outer
// iteration (a kernel without an outer loop, e.g. the last stage of a full sum: one group in all):
// the lanes share each reduction's first loop (lane i takes iterations i, i + G, ...), combine
// their partial results with warp shuffles — and, for a block, through shared memory between
// two __syncthreads — after which every lane holds the same total, and lane 0 stores. The group
// is a warp (G = 32), or a whole block (G = kBlockLanes = 256) when there are at most 1024 outer
// iterations and a reduction of at least 2048 (or of a length known only at run time). It must be
// launched with cuda_threads_per_iteration(kernel) = G threads per outer iteration (1 for the
// other kernels), and a block kernel with blocks of exactly kBlockLanes threads (launch_dims'
// block): its barriers span the block. Any grid is still correct (grid-stride over groups).
// cuda_lane_ranges: the lane loops' range ids, empty for the other kernels.
inline constexpr int kWarpLanes = 32;
inline constexpr int kBlockLanes = 256;
std::vector<int64_t> cuda_lane_ranges(const LinearKernel& kernel);
int cuda_threads_per_iteration(const LinearKernel& kernel);

}  // namespace polygrad
