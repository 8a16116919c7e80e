#include "core/codegen/upcast.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/ir/symbolic.h"

namespace polygrad {
namespace {

// Ranges a REDUCE loops over; every other RANGE is an output axis.
std::unordered_set<const UOp*> reduce_ranges(const std::vector<const UOp*>& nodes) {
  std::unordered_set<const UOp*> out;
  for (const UOp* n : nodes)
    if (n->op == Ops::REDUCE)
      for (size_t i = 1; i < n->src.size(); ++i) out.insert(n->src[i].get());
  return out;
}

// Coefficient of `r` in an affine index (0 when it does not appear linearly).
int64_t coefficient(const UOpRef& index, const UOp* r) {
  if (index.get() == r) return 1;
  if (index->op == Ops::ADD) return coefficient(index->src[0], r) + coefficient(index->src[1], r);
  if (index->op == Ops::MUL && index->src[1]->op == Ops::CONST && index->src[0].get() == r)
    return index->src[1]->arg_int();
  return 0;
}

// Replaces every use of `from` by `to`, rebuilding the users.
UOpRef substitute(const UOpRef& root, const UOp* from, const UOpRef& to) {
  PatternMatcher replace({{UPat::op_any_src({from->op}),
                           [&](const Match&, const UOpRef& n) { return n.get() == from ? to : nullptr; },
                           "the substituted node"}});
  return graph_rewrite(root, replace);
}

int64_t pick_factor(int64_t size, std::initializer_list<int64_t> choices) {
  for (int64_t t : choices)
    if (size % t == 0 && size >= t) return t;
  return 1;
}

}  // namespace

Upcast apply_upcasts(const UOpRef& sink) {
  std::vector<const UOp*> nodes = toposort({sink});
  auto owned = reduce_ranges(nodes);
  if (owned.empty()) return {sink, {}};
  std::vector<const UOp*> outer;
  int64_t max_id = 0;
  for (const UOp* n : nodes) {
    if (n->op != Ops::RANGE) continue;
    max_id = std::max(max_id, n->arg_int());
    if (!owned.count(n)) outer.push_back(n);
  }
  if (outer.empty()) return {sink, {}};
  std::sort(outer.begin(), outer.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });

  // Upcast the innermost output axis only when some load inside a reduction reads it
  // contiguously: then the tile is one vector load per reduction step.
  const UOp* inner = outer.back();
  bool contiguous = false;
  for (const UOp* n : nodes)
    if (n->op == Ops::LOAD && coefficient(n->src[1], inner) == 1) contiguous = true;
  if (!contiguous) return {sink, {}};

  Upcast out{sink, {}};
  auto split = [&](const UOp* r, int64_t factor) {
    int64_t size = r->src[0]->arg_int();
    UOpRef outer_r = uop(Ops::RANGE, kIndexDType, {const_int(size / factor)}, r->arg_int());
    UOpRef lane = uop(Ops::RANGE, kIndexDType, {const_int(factor)}, ++max_id);
    UOpRef expr = uop(Ops::ADD, kIndexDType, {uop(Ops::MUL, kIndexDType, {outer_r, const_int(factor)}), lane});
    out.sink = substitute(out.sink, r, expr);
    out.upcast_ranges.push_back(lane->arg_int());
  };
  int64_t cols = pick_factor(inner->src[0]->arg_int(), {16, 8, 4});
  if (cols == 1) return {sink, {}};
  // A second, row axis shares each column load across rows (matmul's 2-D register tile).
  int64_t rows = outer.size() >= 2 ? pick_factor(outer[outer.size() - 2]->src[0]->arg_int(), {8, 4, 2}) : 1;
  const UOp* row_range = outer.size() >= 2 ? outer[outer.size() - 2] : nullptr;
  if (rows > 1) split(row_range, rows);
  split(inner, cols);
  out.sink = graph_rewrite(out.sink, symbolic());
  return out;
}

}  // namespace polygrad
