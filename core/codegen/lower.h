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
};

// `root` is computed (not loaded) even though it is materialized; every other materialized node
// it reaches is loaded from a parameter. The kernel loops over the root's axes (sizes 1 need no
// loop), or with `flat_output` over one range of all its elements, split into axes only where a
// node needs them (one outer loop holding all the output parallelism, for a GPU).
absl::StatusOr<KernelAst> lower_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& is_materialized,
                                       bool flat_output = false);

}  // namespace polygrad
