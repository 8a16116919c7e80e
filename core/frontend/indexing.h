// Index-producing and index-consuming ops, built on ARANGE comparisons (gather on a load at a
// computed position) so they stay lazy graph, differentiable where that makes sense (gather,
// cumsum, tril/triu).
#pragma once

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// idx (...) integer -> (..., n) of idx's dtype: 1 where the last index equals idx, else 0.
absl::StatusOr<UOpRef> one_hot(const UOpRef& idx, int64_t n);
// Index of the first maximum (minimum) along `axis`, as int32.
absl::StatusOr<UOpRef> argmax(const UOpRef& x, int64_t axis, bool keepdim);
absl::StatusOr<UOpRef> argmin(const UOpRef& x, int64_t axis, bool keepdim);
// Inclusive prefix sum along `axis`.
absl::StatusOr<UOpRef> cumsum(const UOpRef& x, int64_t axis);
// Keeps the lower (upper) triangle of the last two axes: j - i <= k (j - i >= k); zeros elsewhere.
absl::StatusOr<UOpRef> tril(const UOpRef& x, int64_t k);
absl::StatusOr<UOpRef> triu(const UOpRef& x, int64_t k);
// out[..., i, ...] = x[..., index[..., i, ...], ...] along `axis`; index has x's shape except
// along `axis`. Out-of-range indices select nothing (0). A load of the selected element
// (tensor_ops.h's gather_last), so only what is selected is read.
absl::StatusOr<UOpRef> gather(const UOpRef& x, int64_t axis, const UOpRef& index);

}  // namespace polygrad::frontend
