// Convolution and pooling, built from movement ops only, so autograd needs no rules of its own.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Sliding windows over the last kernel.size() axes: (*prefix, *spatial) becomes
// (*prefix, *out, *kernel) with out[i] = (in[i] - dilation[i]*(kernel[i]-1) - 1) / stride[i] + 1.
// A view: nothing is copied.
absl::StatusOr<UOpRef> pool_windows(const UOpRef& x, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation);

struct Conv2dParams {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0};  // (h, w) symmetric, or (top, bottom, left, right)
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
};

// x (N, Cin, H, W) with weight (Cout, Cin/groups, KH, KW) -> (N, Cout, OH, OW). No bias.
absl::StatusOr<UOpRef> conv2d(const UOpRef& x, const UOpRef& weight, const Conv2dParams& p);

// The transpose (gradient) of conv2d: x (N, Cin, H, W) with weight (Cin, Cout/groups, KH, KW)
// -> (N, Cout, OH, OW), OH = (H-1)*stride - 2*padding + dilation*(KH-1) + output_padding + 1
// (PyTorch's conv_transpose2d). Padding is symmetric (h, w); output_padding (h, w) must be
// smaller than the stride or the dilation. Built as a conv2d of the zero-stuffed input with
// the flipped, regrouped weight, so autograd needs no rule of its own.
absl::StatusOr<UOpRef> conv_transpose2d(const UOpRef& x, const UOpRef& weight, const Conv2dParams& p,
                                        const std::vector<int64_t>& output_padding);

// x (..., H, W) -> (..., OH, OW). Max pooling pads with -inf; average pooling counts padding
// zeros (count_include_pad, PyTorch's default).
absl::StatusOr<UOpRef> max_pool2d(const UOpRef& x, const std::vector<int64_t>& kernel, const Conv2dParams& p);
absl::StatusOr<UOpRef> avg_pool2d(const UOpRef& x, const std::vector<int64_t>& kernel, const Conv2dParams& p);

}  // namespace polygrad::frontend
