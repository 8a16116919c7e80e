// Renders a linearized kernel as CUDA C for NVRTC (compute capability 8.0 and newer). The entry
// point is
//   extern "C" __global__ void pg_kernel(T0* b0, const T1* b1, ..., int64_t n)
// with bi the device pointer of DEFINE_GLOBAL i (b0 the output) and n the trip count of the
// kernel's outer loop (LinearKernel::outer_size, 1 when it has none). The outer loop is spread
// over the grid, grid-stride, so any launch shape is correct; every other loop runs inside its
// thread, with upcast lanes and array accumulators in registers as in C. The op table is the
// C-family base's (cstyle.h): the same expressions, constants, trap-free division and 16-bit
// floats stored as bits, so a kernel computes what the CPU's does. The source needs no header
// (NVRTC has no system headers); every name in it is the renderer's own.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"

namespace polygrad {

absl::StatusOr<std::string> render_cuda(const LinearKernel& kernel);

}  // namespace polygrad
