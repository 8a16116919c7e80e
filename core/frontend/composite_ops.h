// The composite builders that check their arguments against the daemon's limits before building
// (window and scatter families), shared by composite_table.cpp. Internal to core/frontend.
#pragma once

#include "absl/status/statusor.h"
#include "core/frontend/composite_table.h"

namespace polygrad::frontend {

// The one axis a composite names in `axes`; INVALID_ARGUMENT for none or several.
absl::StatusOr<int64_t> one_axis(const CompositeArgs& a);

// CONV2D, CONV_TRANSPOSE2D, MAX_POOL2D, AVG_POOL2D over 1 to 3 spatial axes. INVALID_ARGUMENT for
// a wrong rank, list length or value; RESOURCE_EXHAUSTED when a value, the padded input or the
// work (output elements × window elements) exceeds the limits, so no untrusted stride or padding
// reaches the shape arithmetic unchecked.
enum class WindowKind { Conv, ConvTranspose, MaxPool, AvgPool };
absl::StatusOr<UOpRef> build_window(WindowKind op, const CompositeCall& call);

// Each compares every index with every position along an axis: that grid is counted as a tensor
// and held to the limits, so one node cannot keep a worker busy for hours.
absl::StatusOr<UOpRef> build_scatter_reduce(const CompositeCall& call);
absl::StatusOr<UOpRef> build_interpolate(const CompositeCall& call);
absl::StatusOr<UOpRef> build_nonzero(const CompositeCall& call);
absl::StatusOr<UOpRef> build_multinomial(const CompositeCall& call);
absl::StatusOr<UOpRef> build_masked_select(const CompositeCall& call);
absl::StatusOr<UOpRef> build_max_unpool(const CompositeCall& call);

}  // namespace polygrad::frontend
