// Convolution and pooling over 1, 2 or 3 spatial axes, built from movement ops only, so
// autograd needs no rules of its own. The spatial count comes from the weight's rank (conv) or
// the kernel's length (pooling); the spatial axes are always the last ones.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/frontend/tensor_ops.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// The spatial counts these ops take: 1-D, 2-D and 3-D, as torch and tinygrad.
inline constexpr size_t kMaxSpatial = 3;

// Sliding windows over the last kernel.size() axes: (*prefix, *spatial) becomes
// (*prefix, *out, *kernel) with out[i] = (in[i] - dilation[i]*(kernel[i]-1) - 1) / stride[i] + 1.
// A view: nothing is copied.
absl::StatusOr<UOpRef> pool_windows(const UOpRef& x, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation);

// Parameters of the window ops; each list has one value per spatial axis, except padding.
struct ConvParams {
  std::vector<int64_t> stride;
  // n values (symmetric per axis) or 2n as (before, after) pairs in axis order; for 2-D that
  // is (h, w) or (top, bottom, left, right). conv_transpose takes the n symmetric values only.
  std::vector<int64_t> padding;
  std::vector<int64_t> dilation;
  int64_t groups = 1;
};

// One (before, after) pair per spatial axis from ConvParams::padding, each >= 0 unless
// allow_negative (a convolution's padding, where a negative amount crops).
absl::StatusOr<Pairs> spatial_padding(const std::vector<int64_t>& padding, size_t spatial, bool allow_negative = false);

// x (N, Cin, *spatial) with weight (Cout, Cin/groups, *kernel) -> (N, Cout, *out): the
// cross-correlation of torch's conv1d/2d/3d. No bias. A negative padding crops that side of the
// input (tinygrad).
absl::StatusOr<UOpRef> conv(const UOpRef& x, const UOpRef& weight, const ConvParams& p);

// The transpose (gradient) of conv: x (N, Cin, *spatial) with weight (Cin, Cout/groups,
// *kernel) -> (N, Cout, *out), out = (in-1)*stride - 2*padding + dilation*(k-1) +
// output_padding + 1 per axis (torch's conv_transpose1d/2d/3d). Padding is symmetric (one value
// per axis); output_padding must be smaller than the stride or the dilation. Built as a conv of
// the zero-stuffed input with the flipped, regrouped weight, so autograd needs no rule of its own.
absl::StatusOr<UOpRef> conv_transpose(const UOpRef& x, const UOpRef& weight, const ConvParams& p,
                                      const std::vector<int64_t>& output_padding);

// Pooling over the last kernel.size() axes: x (*prefix, *spatial) -> (*prefix, *out). Max
// pooling pads with -inf (padding never wins); average pooling counts padding zeros
// (count_include_pad, torch's default) and needs a float tensor.
absl::StatusOr<UOpRef> max_pool(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p);
absl::StatusOr<UOpRef> avg_pool(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p);

// torch's max_pool return_indices, int32 of max_pool's shape: where each window's maximum sits,
// as a flat position in the input's spatial volume (row-major over the last kernel.size() axes).
// The first maximum in window order wins a tie; a NaN wins over numbers and the last NaN of a
// window wins (torch's CPU kernels: `val > max || isnan(val)`); padding never wins, and a window
// holding no input element at all gets -1. INVALID_ARGUMENT when the spatial volume does not fit
// int32.
absl::StatusOr<UOpRef> max_pool_indices(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p);

}  // namespace polygrad::frontend
