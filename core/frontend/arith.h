// Comparisons, floored and truncated division, integer powers and the boolean reductions, with
// torch's values for every dtype. The clients composed these from other ops until issue 33 (eq as
// not-ne, ge as not-lt, which is true for nan); they are core composites now.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// a == b and a <= b for operands of one dtype and shape; false wherever either is nan.
absl::StatusOr<UOpRef> equal(const UOpRef& a, const UOpRef& b);
absl::StatusOr<UOpRef> less_equal(const UOpRef& a, const UOpRef& b);

// Division rounded toward negative infinity (Python's //), and the remainders with the
// dividend's sign (C's fmod, torch.fmod) and with the divisor's (Python's %, torch.remainder).
// Integer operands stay integers and x // 0, x % 0 give 0; floats go through a / b, so fmod and
// remainder have the gradients 1 and -trunc(a / b) (-floor(a / b)), as torch's. Not for bool.
absl::StatusOr<UOpRef> floor_divide(const UOpRef& a, const UOpRef& b);
absl::StatusOr<UOpRef> fmod(const UOpRef& a, const UOpRef& b);
absl::StatusOr<UOpRef> remainder(const UOpRef& a, const UOpRef& b);

// base ** exponent for integer tensors of one dtype and shape, exact with the dtype's wrap-around
// (as torch): square-and-multiply over the exponent's bits. A negative exponent gives 1 for base
// 1, ±1 for base -1 and 0 otherwise; a constant negative exponent is refused, as torch refuses it.
absl::StatusOr<UOpRef> int_pow(const UOpRef& base, const UOpRef& exponent);
// When `exponent` is a constant (possibly reshaped or expanded) integral value of magnitude at
// most 64: base ** n by square-and-multiply (n < 0: of 1 / base), which is exact where the float
// formula 2 ** (n log2 |base|) rounds. nullopt otherwise.
std::optional<absl::StatusOr<UOpRef>> pow_by_squaring(const UOpRef& base, const UOpRef& exponent);

// x << n (x * 2^n, wrapping) and x >> n (floored: arithmetic for signed dtypes, as torch's) for
// integer tensors of one dtype and shape. A constant n outside [0, bits) is refused; a tensor of
// amounts there gives 0 for <<, and for >> 0 (unsigned) or floor(x / 2^n) as far as it is defined.
absl::StatusOr<UOpRef> shift_left(const UOpRef& x, const UOpRef& n);
absl::StatusOr<UOpRef> shift_right(const UOpRef& x, const UOpRef& n);

// Whether any (every) element along `axes` (empty: all) is nonzero; over no elements any is false
// and all is true. Bool results of any input dtype.
absl::StatusOr<UOpRef> any(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> all(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);

}  // namespace polygrad::frontend
