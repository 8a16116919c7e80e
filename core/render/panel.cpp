#include "core/render/panel.h"

#include <algorithm>
#include <set>

#include "core/codegen/upcast.h"
#include "core/render/index_math.h"

namespace polygrad {

std::optional<PanelPlan> plan_panel(const LinearKernel& k) {
  if (k.outer_range_id < 0 || k.upcast_ranges.size() != 2) return std::nullopt;
  PanelPlan plan{};
  plan.outer_id = k.outer_range_id;
  // Loops by depth: the outer loop (depth 1), the row tiles (2), then after an array
  // accumulator the reduction (3).
  int depth = 0;
  bool outer = false, row_tiles = false, acc = false;
  size_t begin = 0, end = 0;
  for (size_t i = 0; i < k.ops.size() && end == 0; ++i) {
    const UOp& n = *k.ops[i];
    if (n.op == Ops::END_RANGE && --depth < 3 && begin != 0) end = i;
    if (n.op == Ops::DEFINE_ACC && n.src.size() > 1 && row_tiles) acc = true;
    if (n.op != Ops::RANGE) continue;
    ++depth;
    const bool upcast = std::binary_search(k.upcast_ranges.begin(), k.upcast_ranges.end(), n.arg_int());
    if (depth == 1 && n.arg_int() == plan.outer_id) {
      outer = true;
      plan.outer_at = i;
    } else if (depth == 2 && outer && !upcast) {
      row_tiles = true;
    } else if (depth == 3 && acc && begin == 0 && !upcast) {
      if (n.src.size() != 1 || n.src[0]->op != Ops::CONST) return std::nullopt;
      plan.reduce_id = n.arg_int();
      plan.trip = n.src[0]->arg_int();
      begin = i;
    }
  }
  if (begin == 0 || end == 0) return std::nullopt;
  for (size_t i = begin + 1; i < end; ++i) {
    const UOp& n = *k.ops[i];
    if (n.op != Ops::LOAD || n.src.size() != 2) continue;
    std::set<int64_t> ranges;
    if (!index_ranges(*n.src[1], ranges) || ranges.size() != 3 || !ranges.count(plan.outer_id) ||
        !ranges.count(plan.reduce_id))
      continue;
    int64_t col = -1;
    for (int64_t r : ranges)
      if (std::binary_search(k.upcast_ranges.begin(), k.upcast_ranges.end(), r)) col = r;
    if (col < 0) continue;
    // Contiguous along the lane: one apart for every pair of neighbouring lanes checked here
    // (the index is affine in it when it is the plain lane plus terms of the other ranges).
    const auto at = [&](int64_t lane) {
      return evaluate_index(*n.src[1], [&](int64_t id) { return id == col ? lane : 0; });
    };
    const auto first = at(0), second = at(1);
    if (!first || !second || *second - *first != 1) continue;
    int64_t cols = 0;
    for (size_t j = begin + 1; j < end; ++j)
      if (k.ops[j]->op == Ops::RANGE && k.ops[j]->arg_int() == col && k.ops[j]->src[0]->op == Ops::CONST)
        cols = k.ops[j]->src[0]->arg_int();
    if (cols <= 0 || plan.trip * cols * static_cast<int64_t>(dtype_itemsize(n.dtype)) > kPanelBytes) continue;
    plan.col_id = col;
    plan.cols = cols;
    plan.load = &n;
    return plan;
  }
  return std::nullopt;
}

}  // namespace polygrad
