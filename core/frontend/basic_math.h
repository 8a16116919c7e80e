// Elementwise functions of every dtype, with torch's values: abs, sign, square, the four roundings
// and the nan/inf tests. The clients composed these from other ops until issue 33; they are
// core composites now, so the three clients send one op and cannot disagree.
#pragma once

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// |x|: a bool or unsigned tensor is its own; an integer's minimum wraps to itself (as in torch).
// The gradient is sign(x), 0 at 0.
absl::StatusOr<UOpRef> abs(const UOpRef& x);
// x's value with no gradient path back to x. The roundings and sign are built from it, so their
// gradient is 0 everywhere, as torch's.
absl::StatusOr<UOpRef> detached(const UOpRef& x);
// -1, 0 or 1 in x's dtype; nan for nan; a bool tensor is its own sign. No gradient (0).
absl::StatusOr<UOpRef> sign(const UOpRef& x);
absl::StatusOr<UOpRef> square(const UOpRef& x);  // x * x

// Rounding toward zero, down, up, and to the nearest integer with halves to even. An integer or
// bool tensor is returned as it is; a float keeps -0.0 (trunc(-0.5) is -0.0), nan and ±inf, and
// values too large to have a fraction are exact (never through an integer that would overflow).
// No gradient (0, as torch).
absl::StatusOr<UOpRef> trunc(const UOpRef& x);
absl::StatusOr<UOpRef> floor(const UOpRef& x);
absl::StatusOr<UOpRef> ceil(const UOpRef& x);
absl::StatusOr<UOpRef> round_half_even(const UOpRef& x);

// Bool tensors: whether each element is nan; is +inf (when detect_positive) or -inf (when
// detect_negative). All false for integer and bool tensors.
absl::StatusOr<UOpRef> isnan(const UOpRef& x);
absl::StatusOr<UOpRef> isinf(const UOpRef& x, bool detect_positive, bool detect_negative);

}  // namespace polygrad::frontend
