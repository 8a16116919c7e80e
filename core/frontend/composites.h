// Composite tensor ops, expanded into primitives in core so that every client (Python, JS, R)
// gets the same semantics from one implementation. Each validates its arguments like the
// primitives do (INVALID_ARGUMENT naming the problem). Axes may be negative.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/frontend/random.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// numpy broadcasting: the shape both operands broadcast to, or INVALID_ARGUMENT.
absl::StatusOr<Shape> broadcast_shape(const Shape& a, const Shape& b);
// Left-pads with size-1 axes, then expands.
absl::StatusOr<UOpRef> broadcast_to(const UOpRef& x, const Shape& shape);

// start + i * step for i in [0, n): an arithmetic progression in `dtype` (computed in it, as
// tinygrad's arange), start and step of that dtype and 0-d (or any shape broadcasting to (n)).
absl::StatusOr<UOpRef> arange_from(int64_t n, DType dtype, const UOpRef& start, const UOpRef& step);

// numpy's linspace: n values from start to stop, start + i * (stop - start) / (n - 1) computed
// in float64 with the last exactly stop, then cast to `dtype` (n >= 1; one value is start).
absl::StatusOr<UOpRef> linspace(int64_t n, double start, double stop, DType dtype);

// The (n, m) identity in `dtype`: ones where the row and column are equal.
absl::StatusOr<UOpRef> eye(int64_t n, int64_t m, DType dtype);

// The tensors joined along `axis` (negative counts from the end): one dtype and rank, equal
// sizes off that axis. Each element is its source's, bit for bit (a -0.0 stays -0.0): every
// piece is padded to the result and selected where it lies, not summed.
absl::StatusOr<UOpRef> cat(const std::vector<UOpRef>& xs, int64_t axis);

// numpy matmul: 1-D operands are promoted and the added axis removed; batch axes broadcast.
absl::StatusOr<UOpRef> matmul(const UOpRef& a, const UOpRef& b);
// tinygrad's Tensor.linear: x @ w (x * w, broadcast, for a 1-D w), then + bias (null: none),
// broadcast. All of one dtype and computed in it (clients send it in the accumulation dtype).
absl::StatusOr<UOpRef> linear(const UOpRef& x, const UOpRef& w, const UOpRef& bias);

// Reductions with keepdim control; `axes` empty means every axis.
absl::StatusOr<UOpRef> sum(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> max(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
// The smallest value: an order-reversed max, through a map that no value overflows (-x for
// floats, so a tie splits the gradient as max's does; ~x for integers, whose minimum -x would
// wrap; not for bool).
absl::StatusOr<UOpRef> min(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
// The elementwise minimum of two tensors of one dtype and shape, the same way.
absl::StatusOr<UOpRef> minimum(const UOpRef& a, const UOpRef& b);
// The order-reversing map of x's dtype onto itself that min, minimum, argmin, cummin and
// scatter_reduce's amin reduce through (a running min is a running max of it).
absl::StatusOr<UOpRef> order_reversed(const UOpRef& x);
absl::StatusOr<UOpRef> mean(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> var(const UOpRef& x, std::vector<int64_t> axes, bool keepdim, double correction);
// numpy's variance over no axes (axis=()): each element a sample of its own, so 0, or nan (0 / 0)
// for a correction >= 1; an inf or nan element gives nan. x's shape and (float) dtype.
absl::StatusOr<UOpRef> var_of_each(const UOpRef& x, double correction);
// The square root of var(x, axes, keepdim, correction), in var's dtype.
absl::StatusOr<UOpRef> std_dev(const UOpRef& x, std::vector<int64_t> axes, bool keepdim, double correction);

absl::StatusOr<UOpRef> softmax(const UOpRef& x, int64_t axis);
absl::StatusOr<UOpRef> log_softmax(const UOpRef& x, int64_t axis);
absl::StatusOr<UOpRef> logsumexp(const UOpRef& x, int64_t axis, bool keepdim);
// softmax(-x): the smallest values weigh most (tinygrad's and torch's softmin); 0-d gives 1.
absl::StatusOr<UOpRef> softmin(const UOpRef& x, int64_t axis);
// x / max(||x||_p, eps) with the norm along `axis` (tinygrad's Tensor.normalize, torch's
// F.normalize): p = 0 counts the nonzero elements, p = inf takes the largest |x|, -inf the
// smallest; a negative p is torch's (sum |x|^p)^(1/p).
absl::StatusOr<UOpRef> lp_normalize(const UOpRef& x, double p, int64_t axis, double eps);

// Normalizes over the last `normalized_axes` axes: (x - mean) / sqrt(var + eps).
absl::StatusOr<UOpRef> layernorm(const UOpRef& x, int64_t normalized_axes, double eps);

// Elementwise math on float tensors (natural exp/log, as users expect).
absl::StatusOr<UOpRef> exp(const UOpRef& x);
absl::StatusOr<UOpRef> log(const UOpRef& x);
absl::StatusOr<UOpRef> relu(const UOpRef& x);
absl::StatusOr<UOpRef> sigmoid(const UOpRef& x);
absl::StatusOr<UOpRef> gelu(const UOpRef& x);  // tanh approximation, as tinygrad
absl::StatusOr<UOpRef> silu(const UOpRef& x);

// base ** exponent elementwise (float tensors of one dtype and shape), as tinygrad: computed as
// 2 ** (exponent * log2|base|); a negative base gives -result for odd integer exponents, the
// result for even ones and nan otherwise; 0 ** 0 = 1 (and x ** 0 = 1 for every x).
absl::StatusOr<UOpRef> pow(const UOpRef& base, const UOpRef& exponent);

// x * rsqrt(mean(x^2) + eps) over the last `normalized_axes` axes; no affine part.
absl::StatusOr<UOpRef> rms_norm(const UOpRef& x, int64_t normalized_axes, double eps);
// y (N, C, ...) * weight + bias per channel: the affine part of group and batch norm. weight and
// bias are (C,) of y's dtype; either may be null (no scale, no shift).
absl::StatusOr<UOpRef> channel_affine(const UOpRef& y, const UOpRef& weight, const UOpRef& bias);
// y * weight + bias over the last `normalized_axes` axes: the affine part of layer and RMS norm.
// weight and bias have those axes' shape and y's dtype; either may be null.
absl::StatusOr<UOpRef> trailing_affine(const UOpRef& y, const UOpRef& weight, const UOpRef& bias,
                                       int64_t normalized_axes);

// x (N, C, ...): channels split into `groups` groups, each (sample, group) normalized like
// layernorm over its channels and spatial positions; no affine part.
absl::StatusOr<UOpRef> group_norm(const UOpRef& x, int64_t groups, double eps);
// x (N, C, ...) normalized per channel with the batch statistics (mean and biased variance over
// every axis but 1): the training-mode batch norm, no affine part.
absl::StatusOr<UOpRef> batchnorm_train(const UOpRef& x, double eps);
// The same with given statistics `mean` and `var` of shape (C,): the evaluation-mode batch norm.
absl::StatusOr<UOpRef> batchnorm_eval(const UOpRef& x, const UOpRef& mean, const UOpRef& var, double eps);
// tinygrad's batchnorm: (x - mean) * invstd * weight + bias with the statistics along `axes`
// (increasing): mean, weight and bias of those axes' shape (weight and bias may be null), invstd of
// that shape or of any shape broadcasting to x; all of x's (float) dtype.
absl::StatusOr<UOpRef> batchnorm_invstd(const UOpRef& x, const UOpRef& mean, const UOpRef& invstd,
                                        const UOpRef& weight, const UOpRef& bias, const std::vector<int64_t>& axes);
// softmax(q @ k^T / sqrt(d) + mask) @ v for q (..., L, d), k (..., S, d), v (..., S, dv), batch
// axes broadcasting; `mask` (null: none) broadcasts to (..., L, S): bool keeps where true, float
// is added. `causal` masks keys after the query's position (j > i). dropout_p > 0 drops the
// attention weights as dropout() does, drawn from `key` over the weights' shape.
absl::StatusOr<UOpRef> scaled_dot_product_attention(const UOpRef& q, const UOpRef& k, const UOpRef& v,
                                                    const UOpRef& mask, bool causal, double dropout_p = 0,
                                                    RandomKey key = {});

// tinygrad's newton_schulz (Muon's orthogonalization) over the last two axes of float x: X = x /
// (its Frobenius norm + eps), then `steps` times X = sum_i c_i (X X^T)^i X with the coefficients
// c (1-D float, 1 to 16 values), on the wide orientation (a tall matrix is transposed there and
// back). Differentiable through x.
absl::StatusOr<UOpRef> newton_schulz(const UOpRef& x, const UOpRef& coefficients, int64_t steps, double eps);

// Product over `axes` (empty: every axis) with keepdim control.
absl::StatusOr<UOpRef> prod(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);

}  // namespace polygrad::frontend
