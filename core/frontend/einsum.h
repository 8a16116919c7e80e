// numpy's einsum over tensors of one dtype, built from movement ops, one broadcast product and one
// sum, so its gradient is the primitives'. The equation is data: it is parsed here into axis
// labels and never reaches generated code.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// The longest equation accepted (a client's string, bounded before it is parsed).
inline constexpr size_t kMaxEinsumEquation = 512;

// `equation` as numpy writes it: one comma-separated spec per operand, each a run of ASCII
// letters with at most one "..." (the axes it covers broadcast, right-aligned), then optionally
// "->" and the output's labels. Without "->" the output is "..." followed by the labels used
// exactly once, in ASCII order. A label repeated within one operand takes that operand's
// diagonal ("ii->i"; "ii->" is the trace); labels shared by operands have equal sizes or size 1;
// labels not in the output are summed over (and "..." when the output lacks it). Spaces are
// ignored. The result keeps the operands' dtype; operands of different dtypes are refused
// (clients promote first). `check_grid` is given the shape of the product over every label (a
// grid computed, never allocated) before anything is built, to hold it to the caller's limits.
absl::StatusOr<UOpRef> einsum(std::span<const UOpRef> operands, std::string_view equation,
                              const std::function<absl::Status(const Shape& grid)>& check_grid);

}  // namespace polygrad::frontend
