// Elementwise math composites with torch's values at the edges of their domains (nan outside it,
// ±inf at poles, ±0 kept where torch keeps it), accurate to the dtype: float16 and bfloat16 are
// computed in float32 and rounded once. Every function is made of differentiable primitives, so
// gradients (and gradients of gradients) come from core's autograd; where a function is built
// from branches, each branch only ever sees inputs from its own range, so that no branch that
// is not taken can turn a zero gradient into nan (0 * inf).
#pragma once

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Unary, float tensors only. The library functions compute float32 in float64 and round once
// (within about half an ulp); the activations (tanh, softsign, celu, selu, softplus) and lerp
// compute in float32, as models run them over whole tensors.
absl::StatusOr<UOpRef> tanh(const UOpRef& x);  // through expm1: exact near 0, no overflow
absl::StatusOr<UOpRef> erf(const UOpRef& x);    // FreeBSD msun's rational approximations, |error| < 1 ulp of float64
absl::StatusOr<UOpRef> atan(const UOpRef& x);   // Cephes' reduction to [0, 0.66] and rational approximation
absl::StatusOr<UOpRef> asin(const UOpRef& x);   // atan(x / sqrt((1 - x)(1 + x))): nan outside [-1, 1]
absl::StatusOr<UOpRef> acos(const UOpRef& x);   // 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near 1
absl::StatusOr<UOpRef> sinh(const UOpRef& x);
absl::StatusOr<UOpRef> cosh(const UOpRef& x);
absl::StatusOr<UOpRef> asinh(const UOpRef& x);
absl::StatusOr<UOpRef> acosh(const UOpRef& x);  // nan below 1
absl::StatusOr<UOpRef> atanh(const UOpRef& x);  // ±inf at ±1, nan beyond
absl::StatusOr<UOpRef> log10(const UOpRef& x);
absl::StatusOr<UOpRef> log1p(const UOpRef& x);  // log(1 + x), exact near 0
absl::StatusOr<UOpRef> expm1(const UOpRef& x);  // exp(x) - 1, exact near 0
absl::StatusOr<UOpRef> softsign(const UOpRef& x);  // x / (1 + |x|)
// x for x > 0, alpha * (exp(x / alpha) - 1) otherwise; alpha must not be 0.
absl::StatusOr<UOpRef> celu(const UOpRef& x, double alpha);
absl::StatusOr<UOpRef> selu(const UOpRef& x);  // celu's negative side with torch's alpha, times its scale
// torch's softplus: log1p(exp(beta * x)) / beta, and x itself where beta * x > threshold (so
// large inputs neither overflow nor lose their gradient). beta must be finite and nonzero.
absl::StatusOr<UOpRef> softplus(const UOpRef& x, double beta, double threshold);

// The math and activations the clients composed until issue 33, with torch's values and
// gradients at the edges. cos and tan are library functions (float32 computes in float64); the
// others compute like the activations above.
absl::StatusOr<UOpRef> rsqrt(const UOpRef& x);  // 1 / sqrt(x): inf at 0, -inf at -0.0, nan below
absl::StatusOr<UOpRef> cos(const UOpRef& x);    // sin(pi/2 - x), pi/2 in two parts: exact near pi/2
absl::StatusOr<UOpRef> tan(const UOpRef& x);    // sin(x) / cos(x); ±0 kept, nan at ±inf
// x clamped to [min_val, max_val] (min_val <= max_val): x itself where it equals a bound, and no
// gradient there; a nan passes with its gradient (torch's hardtanh).
absl::StatusOr<UOpRef> hardtanh(const UOpRef& x, double min_val, double max_val);
absl::StatusOr<UOpRef> relu6(const UOpRef& x);  // hardtanh(x, 0, 6): relu6(-0.0) is -0.0
// x for x > 0, neg_slope * x otherwise (the slope at 0 is neg_slope; -0.0 stays -0.0).
absl::StatusOr<UOpRef> leaky_relu(const UOpRef& x, double neg_slope);
// x for x > 0, alpha * expm1(x) otherwise; +0.0 at both zeros, with slope alpha (torch's).
absl::StatusOr<UOpRef> elu(const UOpRef& x, double alpha);
absl::StatusOr<UOpRef> quick_gelu(const UOpRef& x);  // x * sigmoid(1.702 x); nan at -inf, as the formula
absl::StatusOr<UOpRef> mish(const UOpRef& x);        // x * tanh(softplus(x)), threshold 20; nan at -inf
// alpha x + beta clamped to [0, 1] (tinygrad's; torch's at alpha 1/6, beta 1/2), no gradient at
// the kinks or through a nan.
absl::StatusOr<UOpRef> hardsigmoid(const UOpRef& x, double alpha, double beta);
// x * min(max(x + 3, 0), 6) / 6; slope -1/2 at -3 and 3/2 at 3, nan at -inf (torch's).
absl::StatusOr<UOpRef> hardswish(const UOpRef& x);
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow, slope 1/2 at 0, 0 at inf.
absl::StatusOr<UOpRef> logsigmoid(const UOpRef& x);
// torch's exact gelu: x (1 + erf(x / sqrt 2)) / 2, erf as above (float32 in float64).
absl::StatusOr<UOpRef> gelu_erf(const UOpRef& x);

// Binary and ternary: float operands of one dtype and shape.
absl::StatusOr<UOpRef> logaddexp(const UOpRef& a, const UOpRef& b);  // log(exp(a) + exp(b)), no overflow
// |a| with b's sign bit (so -0.0 and negative nan count as negative), as torch.copysign; the
// gradient with respect to a is ±1 (0 where a is 0, as torch), none flows to b.
absl::StatusOr<UOpRef> copysign(const UOpRef& a, const UOpRef& b);
// start + weight * (end - start), computed from the nearer end as torch does (exact at weight 1).
absl::StatusOr<UOpRef> lerp(const UOpRef& start, const UOpRef& end, const UOpRef& weight);

// torch's clamp_min and clamp_max: max(x, bound) and min(x, bound) for operands of one dtype
// (not bool) and shape, a nan in either giving nan (and no gradient). On a tie the whole gradient goes to x, so
// clip = clamp_max(clamp_min(x, lo), hi) passes it with both bounds included, as torch.clamp.
absl::StatusOr<UOpRef> clamp_min(const UOpRef& x, const UOpRef& lo);
absl::StatusOr<UOpRef> clamp_max(const UOpRef& x, const UOpRef& hi);

// Bool results, any dtype.
absl::StatusOr<UOpRef> isfinite(const UOpRef& x);
// |a - b| <= atol + rtol * |b| for finite differences, equal values (infinities included) and,
// with equal_nan, two nans: torch.isclose. Operands of one dtype and shape; integers are compared
// in float64. rtol and atol must be >= 0.
absl::StatusOr<UOpRef> isclose(const UOpRef& a, const UOpRef& b, double rtol, double atol, bool equal_nan);

}  // namespace polygrad::frontend
