// Sorting and running (cumulative) extremes along one axis, as lazy graph: a comparison of each
// element with every other along the axis, reduced — O(n²) work per row of n elements, two or
// three fused kernels — or, for sorting rows past kSortNetworkFrom, a bitonic network. No
// data-dependent control flow either way, so they stay differentiable (values carry the gradient
// back to the element they came from) and run the same on every device.
//
// Order is torch's: NaN sorts after every number (first when descending) and equals NaN; ties
// keep their original order (a stable sort). Indices are int32. Any dtype; bool compares as 0/1.
#pragma once

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Rows longer than this sort (and topk) through a bitonic network instead: O(n log^2 n)
// comparisons in about log2(n)^2 / 2 stages of elementwise kernels over the row padded to a power
// of two, rather than the O(n^2) pairwise grid.
inline constexpr int64_t kSortNetworkFrom = 2048;

// The values of `x` sorted along `axis`, or (indices) the position each came from.
absl::StatusOr<UOpRef> sort(const UOpRef& x, int64_t axis, bool descending, bool indices);
// The first `k` of sort(x, axis, largest): the k largest (smallest) in order, or their positions.
// INVALID_ARGUMENT unless 0 <= k <= the axis' size.
absl::StatusOr<UOpRef> topk(const UOpRef& x, int64_t axis, int64_t k, bool largest, bool indices);

// Running maximum (minimum) along `axis`: out[i] = max(x[0..i]); once a NaN is seen the values
// are NaN. With `indices`, where that extreme last occurred at or before i (torch's cummax).
absl::StatusOr<UOpRef> cummax(const UOpRef& x, int64_t axis, bool indices);
absl::StatusOr<UOpRef> cummin(const UOpRef& x, int64_t axis, bool indices);
// Running product along `axis`.
absl::StatusOr<UOpRef> cumprod(const UOpRef& x, int64_t axis);
// log(cumsum(exp(x))) along `axis` without overflow (float only): each prefix is shifted by its
// running maximum; -inf stays -inf and +inf gives +inf.
absl::StatusOr<UOpRef> logcumsumexp(const UOpRef& x, int64_t axis);

}  // namespace polygrad::frontend
