// Reverse-mode autograd as a graph transform: the gradient of a scalar-or-tensor `loss` with
// respect to nodes of its graph, returned as ordinary lazy tensor UOps. Because the result is
// just more graph, the gradient of a gradient works the same way (Hessian-vector products).
//
// Rules follow tinygrad: MAX (elementwise and reduce) splits the gradient equally among ties;
// a product reduction's gradient is the product of the other elements, exact with zeros;
// comparisons, casts to non-float types and bitcasts pass no gradient (so a target reached only
// through a bitcast gets zeros); EXPAND sums back, PAD shrinks back,
// SHRINK pads back, PERMUTE/FLIP/RESHAPE invert.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// d(sum(loss * seed)) / d(wrt[i]) for each i; `seed` defaults to ones of loss's shape. A target
// the loss does not depend on gets zeros. INVALID_ARGUMENT when loss is not a float tensor.
absl::StatusOr<std::vector<UOpRef>> gradient(const UOpRef& loss, const std::vector<UOpRef>& wrt,
                                             const UOpRef& seed = nullptr);

}  // namespace polygrad::frontend
