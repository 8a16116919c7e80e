// Symbolic simplification of integer (index) expressions: constant folding, identities, an
// affine normal form, and div/mod folding driven by value bounds. Enough that the index
// arithmetic of fused movement chains renders as plain affine code where a view is contiguous.
#pragma once

#include <cstdint>

#include "core/ir/pattern.h"

namespace polygrad {

// Inclusive bounds of an integer or bool expression's value; RANGE r runs over [0, end - 1].
struct Bounds {
  int64_t lo;
  int64_t hi;
};
Bounds bounds(const UOpRef& x);

// The rule tables, composed: symbolic_simple (folding and identities) + affine + divmod.
const PatternMatcher& symbolic_simple();
const PatternMatcher& symbolic();

}  // namespace polygrad
