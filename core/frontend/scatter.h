// Writes into a tensor at data-dependent positions, and the losses and resampling built on
// selecting by index. Like gather (indexing.h), each is a comparison of every index with every
// position along one axis — an (..., m, n) grid selected with WHERE and reduced — so nothing
// depends on the data's values for control flow, an inf or NaN elsewhere in a row never leaks
// into a result, and gradients come from the expansion (through the selected values).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/frontend/random.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// How scatter_reduce combines the updates landing on one position (torch's names). None is
// torch's plain scatter: positions written take the update, the last in index order where several
// land on one position (torch on the CPU; its docs leave the winner undefined), and ignore
// include_self.
enum class ScatterReduce { None, Sum, Prod, Mean, Amax, Amin };
absl::StatusOr<ScatterReduce> parse_scatter_reduce(std::string_view name);

// torch's scatter_reduce: a copy of `x` with src's elements combined into it at `index` along
// `axis`. index is integer, of x's rank and at most x's size off `axis` (a smaller index updates
// that corner, as torch); src (cast to x's dtype) has at least index's size on every axis and is
// cut to it. Positions no index names keep x.
// Without include_self, the positions written start from the updates alone. Mean on integers
// divides rounding toward -inf (torch). Differentiable through x and src for None, Sum and Mean.
absl::StatusOr<UOpRef> scatter_reduce(const UOpRef& x, int64_t axis, const UOpRef& index, const UOpRef& src,
                                      ScatterReduce reduce, bool include_self);

// torch's nll_loss: log-probabilities logp (N, C, ...) or (C,) (float), targets (N, ...) or ()
// (integer; float targets are truncated); per element -weight[t] * logp[t], a target equal
// to ignore_index (or outside [0, C)) counting for nothing. weight (C,) is optional. reduction
// "none" keeps the targets' shape, "sum" sums, "mean" divides by the summed weights counted.
absl::StatusOr<UOpRef> nll_loss(const UOpRef& logp, const UOpRef& target, const UOpRef& weight,
                                int64_t ignore_index, std::string_view reduction);

// Resizes the last sizes.size() axes to `sizes` (torch's F.interpolate on the spatial axes).
// mode "linear" (separable: linear, bilinear, trilinear; non-float inputs become float32),
// "nearest" or "nearest-exact" (torch's index rules; any dtype). The sampling positions are
// computed from the shapes alone, in float64. Differentiable.
absl::StatusOr<UOpRef> interpolate(const UOpRef& x, const std::vector<int64_t>& sizes, std::string_view mode,
                                   bool align_corners);

// torch's Tensor.unfold: the windows of `size` elements every `step` along `axis`; that axis
// becomes the window count ((n - size) / step + 1) and a new last axis the window. A view. A 0-d
// x gives the (size,) window of its one element, as torch.
absl::StatusOr<UOpRef> unfold(const UOpRef& x, int64_t axis, int64_t size, int64_t step);

// The (count, rank) int32 positions of the first `count` nonzero elements of x in row-major
// order (NaN is nonzero). The count is data: a client realizes it first, or asks for a fixed
// number of rows (tinygrad's size=); rows past the number of nonzero elements are all `fill`
// (which must fit int32).
absl::StatusOr<UOpRef> nonzero(const UOpRef& x, int64_t count, int64_t fill = 0);

// The first `count` elements of x where the bool `mask` (x's shape) is true, in row-major order,
// then `fill` (one element of x's dtype) for the rows past their number: (count,) of x's dtype.
// Differentiable through x (each selected element gets its row's gradient).
absl::StatusOr<UOpRef> masked_select(const UOpRef& mask, const UOpRef& x, const UOpRef& fill, int64_t count);

// torch's max_unpool1d/2d/3d: zeros of x's leading shape and `spatial` (1 to 3 sizes), each
// value of x written at its flat position in that spatial volume, given by the integer
// `indices` (x's shape; max_pool's indices). Of several values landing on one position the last
// wins; an index outside the volume writes nothing. The gradient of each value is the output's
// gradient at its index (a gather, as torch).
absl::StatusOr<UOpRef> max_unpool(const UOpRef& x, const UOpRef& indices, const Shape& spatial);

// torch's multinomial: int32 class indices drawn from the (unnormalized, nonnegative) weights
// along the last axis of a 1-D (C) or 2-D (N, C) tensor, num_samples per row. With replacement,
// each draw inverts the running distribution at a uniform number; without, the num_samples
// largest of log(weight) plus Gumbel noise (at most C). Seeded like rand.
absl::StatusOr<UOpRef> multinomial(const UOpRef& weights, int64_t num_samples, bool replacement, RandomKey key);

}  // namespace polygrad::frontend
