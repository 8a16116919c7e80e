// Integer index expressions of a linearized kernel read as arithmetic: which ranges one reads
// and its value at given loop positions. Shared by the plans that copy an operand elsewhere
// before its loop (operand_staging.h, panel.h) and must know which elements it reads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>

#include "core/ir/uop.h"

namespace polygrad {

// Whether `u` is index arithmetic evaluate_index understands (constants, ranges, +, -, *, and
// / and % by a positive constant); collects the range ids it reads.
bool index_ranges(const UOp& u, std::set<int64_t>& ranges);

// The value of an index expression index_ranges accepted, with each RANGE id given by `range`.
std::optional<int64_t> evaluate_index(const UOp& u, const std::function<int64_t(int64_t)>& range);

}  // namespace polygrad
