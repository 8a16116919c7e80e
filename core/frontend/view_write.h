// Writing through a view: what tinygrad's `x.shrink(...).assign(v)` and `x[i:j] = v` do to x.
#pragma once

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// `target` with the elements that `view` reads from it replaced by `value` (target's dtype, view's
// shape); every other element keeps target's value. `view` must be `target` itself or a chain of
// RESHAPE, PERMUTE, SHRINK, PAD, FLIP and GATHER (along the last axis: slice_at's, a begin known per
// run) over it: each step is undone on `value` (a shrink becomes a pad, a pad a shrink, a gather a
// scatter, ...) and a mask of the written elements is carried the same way, so the result is one
// WHERE, lazy and differentiable through target and value. Elements a PAD added to
// the view are not in target and are dropped. INVALID_ARGUMENT, naming the step, for an EXPAND in
// the chain (one element of target would take several values), any other op before the chain
// reaches target, a dtype or shape that differs, or a symbolic dim on any of the three.
absl::StatusOr<UOpRef> write_view(const UOpRef& target, const UOpRef& view, const UOpRef& value);

}  // namespace polygrad::frontend
