// Lowering: one scheduled tensor node into a kernel AST. Every movement op becomes arithmetic on
// the index (reshape: div/mod, permute: reordering, expand: zero, shrink/pad: offsets, pad also a
// validity mask, flip: n-1-i), composed from the output's loop variables down to each load, so
// fused views never copy. Inline reductions become REDUCE over fresh RANGEs.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad {

struct KernelAst {
  // SINK(STORE(DEFINE_GLOBAL 0, index, value)); DEFINE_GLOBAL i is params[i], 0 the output.
  UOpRef sink;
  std::vector<const UOp*> params;
  // With an output tile: the ids of the tile's two lane ranges, for the linearizer to place
  // innermost (register tiles); empty otherwise.
  std::vector<int64_t> tile_ranges;
  // With an output tile: when each run of tile_square^2 consecutive iterations of range 0 is a
  // tile_square x tile_square square of tiles, columns fastest (see Lowerer::tiled); else 0.
  int64_t tile_square = 0;
};

// `root` is computed (not loaded) even though it is materialized; every other materialized node
// it reaches is loaded from a parameter. The kernel loops over the root's axes (sizes 1 need no
// loop), or with `flat_output` over one range of all its elements, split into axes only where a
// node needs them (one outer loop holding all the output parallelism, for a GPU). With
// `flat_output` and `output_tile` t > 0, when the root's last two axes longer than 1 both divide
// by t, the outer range is over t x t tiles of those two axes (and every position of the others),
// and two lane ranges of t walk the tile (KernelAst::tile_ranges): each outer iteration computes a
// tile, so an operand element loaded for one row or column of it serves t outputs.
absl::StatusOr<KernelAst> lower_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                       bool flat_output = false, int64_t output_tile = 0);

}  // namespace polygrad
