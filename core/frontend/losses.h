// The losses the clients called by name: each one wire op, its formula written once here.
//
// Every loss takes `reduction` "mean", "sum" or "none" (INVALID_ARGUMENT otherwise): the mean or
// the sum over every element (a 0-d result), or the per-element losses. Results are in the float
// dtype of the predictions (integer and bool become float32); float16 and bfloat16 compute in
// float32 and are cast back, as torch's do.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Cross entropy of logits x with targets y along class axis `axis` (negative counts from the end):
// y has x's rank less one and holds class indices (integer, or integral float; an index outside
// [0, classes) selects nothing), or has x's shape and holds class probabilities. With label
// smoothing s in [0, 1] the targets become (1 - s) y + s / classes. Per element: -sum over the
// class axis of log_softmax(x) * y (tinygrad's and torch's cross_entropy).
absl::StatusOr<UOpRef> cross_entropy(const UOpRef& x, const UOpRef& y, int64_t axis, double label_smoothing,
                                     std::string_view reduction);

// tinygrad's sparse_categorical_crossentropy: logits x (..., C), class indices y (...). Targets
// equal to ignore_index count for nothing (ignore_index -1 means none is ignored; its mean then
// divides by every target); label smoothing s mixes in s times the mean log-probability of each
// counted row. "mean" divides the sum by the number of counted targets.
absl::StatusOr<UOpRef> sparse_categorical_crossentropy(const UOpRef& x, const UOpRef& y, int64_t ignore_index,
                                                       double label_smoothing, std::string_view reduction);

// -y log(x) - (1 - y) log(1 - x) for probabilities x and targets y of one float dtype and shape
// (tinygrad's binary_crossentropy: no clamping of the logarithms).
absl::StatusOr<UOpRef> binary_crossentropy(const UOpRef& x, const UOpRef& y, std::string_view reduction);

// -(w y logsigmoid(x) + (1 - y) logsigmoid(-x)) for logits x, targets y and positive weight w
// (null: 1) of one float dtype and shape; stable for logits of any size.
absl::StatusOr<UOpRef> binary_crossentropy_logits(const UOpRef& x, const UOpRef& y, const UOpRef& pos_weight,
                                                  std::string_view reduction);

}  // namespace polygrad::frontend
