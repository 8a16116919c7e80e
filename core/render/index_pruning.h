// Dead index math: the integer index arithmetic of a linearized kernel that no emitted op reads
// any more, once an optimisation (operand staging) has replaced what some loads read. Emitting it
// anyway would leave unread variables, a warning NVRTC reports.
#pragma once

#include <cstddef>
#include <unordered_set>

#include "core/codegen/linearize.h"

namespace polygrad {

// Adds to `skipped` (positions in k.ops not to emit) every integer ADD, SUB, MUL, IDIV and MOD
// that no op left to emit reads. The loads in `index_unread` no longer read their index (source
// 1). An op at position p is read by the ops after it in its loop; repeated until nothing changes.
void skip_unread_index_math(const LinearKernel& k, const std::unordered_set<const UOp*>& index_unread,
                            std::unordered_set<size_t>& skipped);

}  // namespace polygrad
