#include "core/schedule/schedule.h"

#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

// Post-order over the nodes reachable from `outputs`, not descending below bound nodes.
std::vector<UOpRef> reachable(const std::vector<UOpRef>& outputs, const std::function<bool(const UOp*)>& is_bound) {
  std::vector<UOpRef> order;
  std::unordered_set<const UOp*> seen;
  std::vector<std::pair<UOpRef, size_t>> stack;
  for (const UOpRef& out : outputs) {
    if (!seen.insert(out.get()).second) continue;
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (!is_bound(node.get()) && next < node->src.size()) {
        UOpRef child = node->src[next++];
        if (seen.insert(child.get()).second) stack.emplace_back(std::move(child), 0);
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

struct Reach {
  const UOp* root = nullptr;  // the single kernel root reaching this node, if only one
  bool many_roots = false;
  bool through_expand = false;
};

}  // namespace

absl::StatusOr<Schedule> create_schedule(const std::vector<UOpRef>& outputs,
                                         const std::function<bool(const UOp*)>& is_bound) {
  Schedule sched;
  sched.keep = reachable(outputs, is_bound);
  std::unordered_set<const UOp*> is_output;
  for (const UOpRef& o : outputs) is_output.insert(o.get());

  // Walk users before sources, deciding which reductions become kernel roots.
  std::unordered_map<const UOp*, Reach> reach;
  for (auto it = sched.keep.rbegin(); it != sched.keep.rend(); ++it) {
    const UOp* n = it->get();
    if (is_bound(n)) {
      sched.materialized.insert(n);
      continue;
    }
    if (n->op == Ops::BUFFER)
      return absl::FailedPreconditionError(absl::StrCat("buffer ", n->arg_int(), " has no data bound to it"));
    Reach r = reach[n];
    bool root = is_output.count(n) > 0 ||
                (n->op == Ops::REDUCE_AXIS && (r.many_roots || r.through_expand));
    if (root) {
      sched.materialized.insert(n);
      r = Reach{n, false, false};
    }
    for (const UOpRef& s : n->src) {
      Reach& sr = reach[s.get()];
      if (sr.root == nullptr && !sr.many_roots) {
        sr.root = r.root;
      } else if (sr.root != r.root) {
        sr.many_roots = true;
      }
      sr.many_roots |= r.many_roots;
      sr.through_expand |= r.through_expand || n->op == Ops::EXPAND;
    }
  }
  for (const UOpRef& n : sched.keep)
    if (sched.materialized.count(n.get()) && !is_bound(n.get())) sched.items.push_back({n});
  return sched;
}

}  // namespace polygrad
