// The decoder's half for the scatter and selection ops (SCATTER_REDUCE, NLL_LOSS, INTERPOLATE,
// UNFOLD, NONZERO, MULTINOMIAL): argument checks, work bounds, then core/frontend/scatter.h.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/options.h"

namespace polygrad::server {

// True for the wire ops build_scatter_op builds.
bool is_scatter_op(v1::Op op);

// Builds one of those ops from its decoded sources. Each compares every index with every
// position along an axis: that grid is counted as a tensor and held to max_elements
// (RESOURCE_EXHAUSTED naming the limit), so one node cannot keep a worker busy for hours.
absl::StatusOr<UOpRef> build_scatter_op(v1::Op op, const v1::CompositeArg& c, const std::vector<UOpRef>& src,
                                        const Limits& limits);

}  // namespace polygrad::server
