// Helpers shared by conv.cpp and pool.cpp; not part of the frontend's interface.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {

// OK when `v` has `n` values, each >= 1; else INVALID_ARGUMENT naming `what`.
absl::Status positive(const std::vector<int64_t>& v, size_t n, const char* what);

// `x` with its last pads.size() axes padded by the (before, after) pairs; `x` itself when all are 0.
absl::StatusOr<UOpRef> pad_spatial(const UOpRef& x, const Pairs& pads);

}  // namespace polygrad::frontend
