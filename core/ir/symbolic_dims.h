// Symbolic dims: a tensor axis whose size is a Variable's value (tinygrad's `Variable`, e.g. the
// cached positions 0..start_pos of a KV cache). The graph keeps the axis at its largest size, so
// every shape, stride and buffer stays concrete and one kernel serves every value; BOUND marks the
// axis with its extent (a 0-d int32 tensor holding the value), the mark follows the axis through
// elementwise and movement ops, and a reduction over a marked axis reads only the valid part
// (frontend::reduce masks the rest with the reduction's identity). What lies past the extent is
// never read by a reduction, so an extent larger than the axis reads nothing out of bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ir/uop.h"

namespace polygrad {

// The per-axis extents of `node` (UOp::extents) from its sources' and its op: BOUND sets its axis'
// (a constant extent of the whole axis clears it: the data is valid everywhere), kept by elementwise
// ops, permuted by PERMUTE, carried by RESHAPE where the axis stays whole (alone, or outermost of
// the axes it merges with, its extent then times their sizes), kept by SHRINK/PAD/FLIP on axes
// they leave alone, dropped by reductions over the axis. Where an op would change a marked axis
// some other way the mark is dropped: frontend builders refuse those (check_symbolic_dims).
std::vector<UOpRef> derive_extents(const UOp& node);

// Where RESHAPE from `in` to `out` takes axis `axis` whole: the output axis and the factor its
// extent is multiplied by (the sizes of the inner axes it merges with); nullopt when the axis is
// split or merged under an outer one.
struct ReshapedAxis {
  size_t axis;
  int64_t factor;
};
std::optional<ReshapedAxis> reshaped_axis(const Shape& in, const Shape& out, size_t axis);

// The extent `e` times `factor` as a 0-d int32 tensor (e itself when factor is 1).
UOpRef scale_extent(const UOpRef& e, int64_t factor);

}  // namespace polygrad
