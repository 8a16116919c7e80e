// Decoding of the window ops (CONV2D, CONV_TRANSPOSE2D, MAX_POOL2D, AVG_POOL2D over 1, 2 or 3
// spatial axes): their parameters are checked and their work is bounded by the limits before
// core builds them, so no untrusted stride or padding reaches core's shape arithmetic unchecked.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/options.h"

namespace polygrad::server {

// `op` is one of the four; `src` its decoded sources (x, and the weight for the convolutions).
// INVALID_ARGUMENT for a wrong rank, list length or value; RESOURCE_EXHAUSTED when a value, the
// padded input or the work (output elements × window elements) exceeds max_elements.
absl::StatusOr<UOpRef> build_window_op(::polygrad::v1::Op op, const ::polygrad::v1::CompositeArg& c,
                                       const std::vector<UOpRef>& src, const Limits& limits);

}  // namespace polygrad::server
