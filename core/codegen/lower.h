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
// it reaches is loaded from a parameter.
absl::StatusOr<KernelAst> lower_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& is_materialized);

}  // namespace polygrad
