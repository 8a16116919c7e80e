// Which operand of a CPU matmul tile to copy into a contiguous panel, once per column tile.
//
// A kernel whose outermost loop walks column tiles (codegen/upcast.h orders a large matmul so),
// with a loop of row tiles inside it, reads its column operand B[k, j0 + c] at every reduction
// step k from a new row of B: a stride of a whole row, so every step touches another 4 KiB page
// and the hardware prefetcher sees no stream. The same K x C block is read again by every row
// tile. Copied first into a K x C array on the thread's stack, the row tiles read it in order,
// from L2 (a 1024^2 float32 matmul on one AVX-512 core: 18.0 -> 11.0 ms, the copy 0.2 ms).
// The values and the order of the sums are unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/codegen/linearize.h"

namespace polygrad {

struct PanelPlan {
  size_t outer_at;    // position in LinearKernel::ops of the outer loop's RANGE
  int64_t outer_id;   // the column tiles' range
  int64_t reduce_id;  // the reduction's range, trip count `trip`
  int64_t col_id;     // the column lanes' range, trip count `cols`
  int64_t trip;
  int64_t cols;
  const UOp* load;  // the load the panel replaces: it reads only those three ranges
};

// The panel of `k`, when its outer loop holds a loop of row tiles whose reduction loop (a
// constant trip count, no early stop) reads, ungated, an element that depends on the outer
// loop, the reduction and a column lane alone, contiguous along the lane, with K x C elements
// fitting codegen's kPanelBytes. nullopt otherwise.
std::optional<PanelPlan> plan_panel(const LinearKernel& k);

}  // namespace polygrad
