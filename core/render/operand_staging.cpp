#include "core/render/operand_staging.h"

#include <algorithm>
#include <set>

#include "core/render/index_math.h"

namespace polygrad {
namespace {

// Whether every read of the outer range in `u` goes through an operation whose value is the same
// for all tiles of a square's row (by_row: it ignores the column within the square, r0 % square)
// or of its column (it ignores the row within the square, (r0 / square) % square). Outer
// iterations are never negative, so C's truncating division is floor division here.
bool square_invariant(const UOp& u, int64_t outer_id, int64_t square, bool by_row) {
  if (u.op == Ops::RANGE) return u.arg_int() != outer_id;
  for (size_t i = 0; i < u.src.size(); ++i) {
    const UOp& s = *u.src[i];
    if (s.op == Ops::RANGE && s.arg_int() == outer_id) {
      if (i != 0 || (u.op != Ops::IDIV && u.op != Ops::MOD)) return false;
      const int64_t d = u.src[1]->arg_int();
      const bool ok = by_row ? u.op == Ops::IDIV && d % square == 0
                             : (u.op == Ops::MOD && square % d == 0) || (u.op == Ops::IDIV && d % (square * square) == 0);
      if (!ok) return false;
    } else if (!square_invariant(s, outer_id, square, by_row)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<StagingPlan> plan_staging(const LinearKernel& k, int64_t block_threads) {
  if (k.tile_square <= 0 || k.tile_square * k.tile_square != block_threads || k.upcast_ranges.size() != 2 ||
      k.outer_range_id < 0)
    return std::nullopt;
  StagingPlan plan{};
  plan.square = k.tile_square;
  plan.outer_id = k.outer_range_id;
  plan.row_id = k.upcast_ranges[0];
  plan.col_id = k.upcast_ranges[1];
  plan.chunk = kStageChunk;
  // The reduction loop: the first loop after an array accumulator, directly inside the outer loop.
  bool pending = false;
  int depth = 0;
  size_t end = 0;
  for (size_t i = 0; i < k.ops.size() && end == 0; ++i) {
    const UOp& n = *k.ops[i];
    if (n.op == Ops::DEFINE_ACC && n.src.size() > 1) pending = true;
    if (n.op == Ops::END_RANGE) --depth;
    if (n.op != Ops::RANGE) continue;
    ++depth;
    const int64_t id = n.arg_int();
    if (!pending || id == plan.outer_id || id == plan.row_id || id == plan.col_id) continue;
    if (depth != 2 || n.src[0]->op != Ops::CONST) return std::nullopt;
    plan.loop_at = i;
    plan.reduce_id = id;
    plan.trip = n.src[0]->arg_int();
    for (int d = 0; ++i < k.ops.size();) {
      if (k.ops[i]->op == Ops::RANGE) ++d;
      if (k.ops[i]->op == Ops::END_RANGE && d-- == 0) break;
    }
    end = i;
  }
  if (end == 0 || plan.trip < plan.chunk) return std::nullopt;
  for (size_t i = plan.loop_at + 1; i < end; ++i) {
    const UOp& n = *k.ops[i];
    if (n.op == Ops::RANGE && n.arg_int() == plan.row_id && n.src[0]->op == Ops::CONST) plan.tile = n.src[0]->arg_int();
    if (n.op != Ops::LOAD || n.src.size() != 2) continue;
    std::set<int64_t> ranges;
    if (!index_ranges(*n.src[1], ranges) || !ranges.count(plan.reduce_id)) continue;
    const bool row = ranges.count(plan.row_id) > 0, col = ranges.count(plan.col_id) > 0;
    if (row == col) continue;
    bool others = std::any_of(ranges.begin(), ranges.end(), [&](int64_t r) {
      return r != plan.outer_id && r != plan.row_id && r != plan.col_id && r != plan.reduce_id;
    });
    if (others || !square_invariant(*n.src[1], plan.outer_id, plan.square, row)) continue;
    auto at = [&](int64_t reduce) {
      return evaluate_index(*n.src[1], [&](int64_t id) { return id == plan.reduce_id ? reduce : 0; });
    };
    auto first = at(0), second = at(1);
    plan.loads.push_back(StagedLoad{&n, row, first && second && *second - *first == 1});
  }
  if (plan.loads.empty() || plan.tile <= 0) return std::nullopt;
  return plan;
}

}  // namespace polygrad
