// The linearizer: a kernel AST (a DAG) into the ordered list a renderer prints. Loops nest in
// range order; every node is placed in the outermost loop whose variables it uses (so
// loop-invariant work is hoisted), and each REDUCE becomes DEFINE_ACC, its loops, ACCUMULATE.
// Upcast ranges (see upcast.h) nest innermost; a REDUCE whose value varies along them is
// emitted before they open, with an array accumulator (DEFINE_ACC's extra sources are the upcast
// ranges it is indexed by) and the upcast loops inside its own.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad {

struct LinearKernel {
  std::vector<UOpRef> ops;        // in program order; RANGE opens a loop, END_RANGE closes it
  std::vector<DType> params;      // dtype of each DEFINE_GLOBAL, by index
  int64_t outer_range_id = -1;    // the loop a runtime may split across threads (-1: none)
  int64_t outer_size = 1;         // its trip count
  std::vector<int64_t> upcast_ranges;  // range ids of the upcast lanes (constant, small trip counts)
  // A register-tiled kernel whose tiles go in squares (KernelAst::tile_square): tiles per side of
  // a square, whose tile_square^2 tiles are consecutive outer iterations; 0 otherwise.
  int64_t tile_square = 0;
};

absl::StatusOr<LinearKernel> linearize(const UOpRef& sink, const std::vector<int64_t>& upcast_ranges = {});

// How many loop iterations running the whole kernel takes: every loop's trip count times those of
// the loops around it, summed over the loops (1 for a kernel without loops), INT64_MAX when it
// overflows. Roughly what running it costs.
int64_t loop_iterations(const LinearKernel& kernel);

}  // namespace polygrad
