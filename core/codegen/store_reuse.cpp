#include "core/codegen/store_reuse.h"

#include <algorithm>
#include <map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ir/pattern.h"

namespace polygrad {
namespace {

// Worth a store and a load per element: a call into the math library's code, not an add.
bool transcendental(const UOpRef& value) {
  for (const UOp* n : toposort({value}))
    if (n->op == Ops::EXP2 || n->op == Ops::LOG2 || n->op == Ops::SIN) return true;
  return false;
}

// `range` itself when `index` is a sum with `range` as one addend and no other addend that
// depends on it (base + range, however the sum nests), null otherwise.
UOpRef addend(const UOpRef& index, const UOp* range) {
  if (index.get() == range) return index;
  if (index->op != Ops::ADD) return nullptr;
  const bool left = reaches(index->src[0], range), right = reaches(index->src[1], range);
  if (left == right) return nullptr;
  return addend(index->src[left ? 0 : 1], range);
}

// Equal up to the order of a commutative op's operands: the simplifier keeps the order each
// index was built in, so the output's copy can read (base + o) where the reduction's reads
// (r + base). `seen` memoizes pairs so that shared subgraphs are compared once.
bool same_value(const UOp* a, const UOp* b, std::map<std::pair<const UOp*, const UOp*>, bool>& seen) {
  if (a == b) return true;
  if (a->op != b->op || a->dtype != b->dtype || a->src.size() != b->src.size() || !(a->arg == b->arg))
    return false;
  const auto key = std::make_pair(a, b);
  if (auto it = seen.find(key); it != seen.end()) return it->second;
  bool equal = true;
  for (size_t i = 0; i < a->src.size() && equal; ++i) equal = same_value(a->src[i].get(), b->src[i].get(), seen);
  if (!equal && a->src.size() == 2 && is_commutative(a->op))
    equal = same_value(a->src[0].get(), b->src[1].get(), seen) && same_value(a->src[1].get(), b->src[0].get(), seen);
  return seen[key] = equal;
}

// The node of `value` that computes what `target` does, null when none does.
const UOp* find_same(const UOpRef& value, const UOpRef& target) {
  std::map<std::pair<const UOp*, const UOp*>, bool> seen;
  for (const UOp* n : toposort({value}))
    if (same_value(n, target.get(), seen)) return n;
  return nullptr;
}

}  // namespace

UOpRef reuse_reduced_values(const UOpRef& sink) {
  if (sink->op != Ops::SINK || sink->src.size() != 1) return sink;
  const UOpRef& store = sink->src[0];
  if (store->op != Ops::STORE || store->src.size() != 3) return sink;
  const UOpRef &out = store->src[0], &index = store->src[1], &value = store->src[2];

  const std::vector<const UOp*> nodes = toposort({sink});
  std::unordered_set<const UOp*> reduced;
  for (const UOp* n : nodes)
    if (n->op == Ops::REDUCE)
      for (size_t i = 1; i < n->src.size(); ++i) reduced.insert(n->src[i].get());
  std::vector<const UOp*> outer;
  for (const UOp* n : nodes)
    if (n->op == Ops::RANGE && !reduced.count(n)) outer.push_back(n);
  if (outer.size() < 2) return sink;  // the threads would split the output's own range
  std::sort(outer.begin(), outer.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });
  const UOp* split = outer.front();  // the range the thread pool splits (codegen/linearize.h)
  const UOp* o = outer.back();       // opened after every reduction that does not depend on it

  // The output is written at base + o: iteration o of the output loop reads and writes only its
  // own element, so what the reduction stored there is still there when that iteration runs.
  if (o->src.size() != 1) return sink;
  const UOpRef at_o = addend(index, o);
  if (!at_o) return sink;

  for (const UOp* n : toposort({value})) {
    if (n->op != Ops::REDUCE || n->src.size() != 2) continue;
    const UOpRef& r = n->src[1];
    const UOpRef& reduced_value = n->src[0];
    if (r->src.size() != 1 || r->src[0] != o->src[0] || reduced_value->dtype != value->dtype) continue;
    if (!transcendental(reduced_value) || reaches(reduced_value, o) || !reaches(reduced_value, split)) continue;
    // The output's own copy of the value: the reduced one with o for the reduction's range.
    const UOpRef computed = substitute(reduced_value, r.get(), at_o);
    if (computed == reduced_value) continue;
    const UOp* copy = find_same(value, computed);
    if (!copy) continue;
    UOpRef loaded = uop(Ops::LOAD, value->dtype, {out, index});
    UOpRef new_value = substitute(value, copy, loaded);
    UOpRef tap = uop(Ops::STORE, DType::Void, {out, substitute(index, o, r), reduced_value});
    return uop(Ops::SINK, DType::Void, {uop(Ops::STORE, DType::Void, {out, index, new_value}), tap});
  }
  return sink;
}

}  // namespace polygrad
