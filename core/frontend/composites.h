// Composite tensor ops, expanded into primitives in core so that every client (Python, JS, R)
// gets the same semantics from one implementation. Each validates its arguments like the
// primitives do (INVALID_ARGUMENT naming the problem). Axes may be negative.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// numpy broadcasting: the shape both operands broadcast to, or INVALID_ARGUMENT.
absl::StatusOr<Shape> broadcast_shape(const Shape& a, const Shape& b);
// Left-pads with size-1 axes, then expands.
absl::StatusOr<UOpRef> broadcast_to(const UOpRef& x, const Shape& shape);

// numpy matmul: 1-D operands are promoted and the added axis removed; batch axes broadcast.
absl::StatusOr<UOpRef> matmul(const UOpRef& a, const UOpRef& b);

// Reductions with keepdim control; `axes` empty means every axis.
absl::StatusOr<UOpRef> sum(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> max(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> mean(const UOpRef& x, std::vector<int64_t> axes, bool keepdim);
absl::StatusOr<UOpRef> var(const UOpRef& x, std::vector<int64_t> axes, bool keepdim, double correction);

absl::StatusOr<UOpRef> softmax(const UOpRef& x, int64_t axis);
absl::StatusOr<UOpRef> log_softmax(const UOpRef& x, int64_t axis);
absl::StatusOr<UOpRef> logsumexp(const UOpRef& x, int64_t axis, bool keepdim);

// Normalizes over the last `normalized_axes` axes: (x - mean) / sqrt(var + eps).
absl::StatusOr<UOpRef> layernorm(const UOpRef& x, int64_t normalized_axes, double eps);

// Elementwise math on float tensors (natural exp/log, as users expect).
absl::StatusOr<UOpRef> exp(const UOpRef& x);
absl::StatusOr<UOpRef> log(const UOpRef& x);
absl::StatusOr<UOpRef> relu(const UOpRef& x);
absl::StatusOr<UOpRef> sigmoid(const UOpRef& x);
absl::StatusOr<UOpRef> tanh(const UOpRef& x);
absl::StatusOr<UOpRef> gelu(const UOpRef& x);  // tanh approximation, as tinygrad
absl::StatusOr<UOpRef> silu(const UOpRef& x);

}  // namespace polygrad::frontend
