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

// A composite whose gradient is not the one its construction implies: torch's values at the
// edges, where a formula's pieces would give nan or 0 (pow at a zero or negative base). The
// composite registers `rule` for its result `out`; gradient() then gives `inputs` what the rule
// returns for the gradient `g` of out (null: none) instead of walking out's construction. The
// rule sees the inputs again, so it captures nothing; nothing is kept alive by registering.
using GradientRule = absl::StatusOr<std::vector<UOpRef>> (*)(const UOpRef& out, const std::vector<UOpRef>& inputs,
                                                             const UOpRef& g);
void set_gradient_rule(const UOpRef& out, const std::vector<UOpRef>& inputs, GradientRule rule);

}  // namespace polygrad::frontend
