// A value that a row reduction computes for every element of its row, and that the kernel's
// output computes again, is stored to the output as the reduction reads it and loaded back.
//
// softmax's fused CPU kernel (one row per iteration of its outer loop) is
//     out[i, j] = exp(x[i, j] - max_i) / sum_k exp(x[i, k] - max_i)
// and computed exp twice per element: once in the sum's loop, once in the output loop. After this
// pass the sum's loop also writes exp(x[i, k] - max_i) to out[i, k], and the output loop reads
// out[i, j] back instead of computing it (a 4096x1024 softmax on one AVX-512 core: 3.7 ms before,
// 2.7 ms after; docs/PIPELINE.md).
#pragma once

#include "core/ir/uop.h"

namespace polygrad {

// The kernel `sink` (simplified, not yet tiled) with the output's recomputation of a reduced value
// replaced by a load of what the reduction's loop stored, or `sink` unchanged. It applies only
// where that is safe on the CPU's loop nest: one STORE at base + o, o the innermost output range,
// a reduction over one range of o's extent that depends on the outermost output range (the one
// threads split) and not on o, whose value is the output's subexpression with o for its range,
// of the output's dtype, and contains a transcendental (a cheaper value costs less to compute
// again than to store and load). The extra STORE's index uses the reduction's range: the
// linearizer emits it inside that reduction's loop (codegen/linearize.h).
UOpRef reuse_reduced_values(const UOpRef& sink);

}  // namespace polygrad
