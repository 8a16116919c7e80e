#include "core/codegen/linearize.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"

namespace polygrad {
namespace {

using RangeSet = std::vector<int64_t>;  // sorted range ids

RangeSet merge(const RangeSet& a, const RangeSet& b) {
  RangeSet out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

class Linearizer {
 public:
  explicit Linearizer(const std::vector<int64_t>& upcast) : upcast_(upcast.begin(), upcast.end()) {}

  absl::StatusOr<LinearKernel> run(const UOpRef& sink) {
    ref_.emplace(sink.get(), sink);
    std::vector<const UOp*> order = toposort({sink});
    for (const UOp* n : order) compute_deps(n);
    // A store whose index moves with a reduction's range belongs inside that reduction's loop
    // (codegen/store_reuse.h): emit_reduce emits it there, next to the value it stores.
    for (const UOpRef& s : sink->src)
      if (s->op == Ops::STORE && std::any_of(deps_.at(s.get()).begin(), deps_.at(s.get()).end(),
                                             [&](int64_t r) { return reduce_owned_ids_.count(r) > 0; }))
        in_reduce_.insert(s.get());
    // The output loops: every RANGE no REDUCE owns, outermost first, upcast lanes last.
    std::vector<UOpRef> outer;
    for (const UOp* n : order)
      if (n->op == Ops::RANGE && !reduce_owned_.count(n)) outer.push_back(ref_.at(n));
    std::sort(outer.begin(), outer.end(), [&](const UOpRef& a, const UOpRef& b) {
      bool ua = is_upcast(a.get()), ub = is_upcast(b.get());
      return ua != ub ? ub : a->arg_int() < b->arg_int();
    });
    if (!outer.empty() && !is_upcast(outer.front().get())) {
      out_.outer_range_id = outer.front()->arg_int();
      out_.outer_size = outer.front()->src[0]->arg_int();
    }
    // A loop's early stop (lower.h) is computed before any loop opens.
    for (const UOp* n : order)
      if (n->op == Ops::RANGE && n->src.size() > 1) hoist(n->src[1]);
    emit_in_loops(sink, outer);
    for (const UOp* s : in_reduce_)
      if (!emitted_in_reduce_.count(s)) return absl::InternalError("a store inside a reduction found no loop to go in");
    out_.upcast_ranges.assign(upcast_.begin(), upcast_.end());
    std::sort(out_.upcast_ranges.begin(), out_.upcast_ranges.end());
    return std::move(out_);
  }

 private:
  bool is_upcast(const UOp* r) const { return r->op == Ops::RANGE && upcast_.count(r->arg_int()); }

  void compute_deps(const UOp* n) {
    for (const UOpRef& s : n->src) ref_.emplace(s.get(), s);
    RangeSet d;
    if (n->op == Ops::RANGE) {
      d = {n->arg_int()};
    } else {
      for (const UOpRef& s : n->src) d = merge(d, deps_.at(s.get()));
    }
    if (n->op == Ops::REDUCE) {
      for (size_t i = 1; i < n->src.size(); ++i) {
        std::erase(d, n->src[i]->arg_int());
        reduce_owned_.insert(n->src[i].get());
        reduce_owned_ids_.insert(n->src[i]->arg_int());
      }
    }
    if (n->op == Ops::DEFINE_GLOBAL) {
      auto idx = static_cast<size_t>(n->arg_int());
      if (out_.params.size() <= idx) out_.params.resize(idx + 1, DType::Void);
      out_.params[idx] = n->dtype;
    }
    deps_[n] = std::move(d);
  }

  bool open_now(const RangeSet& deps) const {
    return std::all_of(deps.begin(), deps.end(), [&](int64_t r) { return open_.count(r) > 0; });
  }

  void push(const UOpRef& op) {
    out_.ops.push_back(op);
    if (!scopes_.empty()) scopes_.back().push_back(op.get());
  }

  void open_loop(const UOpRef& r) {
    push(r);
    open_.insert(r->arg_int());
    scopes_.emplace_back();
  }

  // Closing a loop ends the C scope of everything emitted inside it: those nodes must be
  // emitted again if needed after the loop.
  void close_loop(const UOpRef& r) {
    for (const UOp* n : scopes_.back()) done_.erase(n);
    scopes_.pop_back();
    open_.erase(r->arg_int());
    push(uop(Ops::END_RANGE, DType::Void, {r}));
  }

  // Opens `loops` one by one, hoisting everything computable before each, then emits `node`.
  void emit_in_loops(const UOpRef& node, const std::vector<UOpRef>& loops) {
    for (size_t i = 0; i < loops.size(); ++i) {
      hoist(node);
      if (is_upcast(loops[i].get())) {
        std::vector<UOpRef> lanes(loops.begin() + static_cast<std::ptrdiff_t>(i), loops.end());
        hoist_lane_reductions(node, lanes);
      }
      open_loop(loops[i]);
    }
    emit(node);
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) close_loop(*it);
  }

  // The nodes under `root` not emitted yet, sources first. The walk stops at emitted nodes: what
  // only they need is in scope already or needed no more (re-emitting it would be dead code).
  std::vector<const UOp*> pending(const UOpRef& root) const {
    std::vector<const UOp*> order;
    if (done_.count(root.get())) return order;
    std::unordered_set<const UOp*> seen{root.get()};
    std::vector<std::pair<const UOp*, size_t>> stack{{root.get(), 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->src.size()) {
        const UOp* s = n->src[next++].get();
        if (!done_.count(s) && seen.insert(s).second) stack.emplace_back(s, 0);
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
    return order;
  }

  // Emits every not-yet-emitted node under `node` whose loop variables are all open now.
  void hoist(const UOpRef& node) {
    for (const UOp* n : pending(node)) {
      if (done_.count(n) || n->op == Ops::RANGE || n->op == Ops::SINK || n->op == Ops::STORE) continue;
      if (open_now(deps_.at(n))) emit(ref_.at(n));
    }
  }

  // Before the upcast lanes open: every reduction that varies only along open loops and lanes
  // is emitted now, accumulating all lanes at once (the lanes nest inside its own loops).
  void hoist_lane_reductions(const UOpRef& node, const std::vector<UOpRef>& lanes) {
    for (const UOp* n : pending(node)) {
      if (n->op != Ops::REDUCE || done_.count(n)) continue;
      std::vector<UOpRef> used;
      bool ok = true;
      for (int64_t r : deps_.at(n)) {
        if (open_.count(r)) continue;
        auto lane = std::find_if(lanes.begin(), lanes.end(), [&](const UOpRef& l) { return l->arg_int() == r; });
        if (lane == lanes.end()) ok = false;
        else used.push_back(*lane);
      }
      if (ok && !used.empty()) emit_reduce(ref_.at(n), used);
    }
  }

  void emit_reduce(const UOpRef& node, const std::vector<UOpRef>& lanes) {
    const UOp* n = node.get();
    for (const UOpRef& s : n->src) hoist(s);
    // DEFINE_ACC names the REDUCE it accumulates (so the renderer can read the result from it)
    // and the lanes it is indexed by.
    std::vector<UOpRef> src{node};
    src.insert(src.end(), lanes.begin(), lanes.end());
    UOpRef acc = uop(Ops::DEFINE_ACC, n->dtype, std::move(src), static_cast<int64_t>(acc_count_++));
    push(acc);
    std::vector<UOpRef> loops(n->src.begin() + 1, n->src.end());
    loops.insert(loops.end(), lanes.begin(), lanes.end());
    for (size_t i = 0; i < loops.size(); ++i) {
      hoist(n->src[0]);
      if (is_upcast(loops[i].get())) {
        std::vector<UOpRef> rest(loops.begin() + static_cast<std::ptrdiff_t>(i), loops.end());
        hoist_lane_reductions(n->src[0], rest);
      }
      open_loop(loops[i]);
    }
    emit(n->src[0]);
    for (const UOp* s : in_reduce_)
      if (s->src[2] == n->src[0] && !emitted_in_reduce_.count(s) && open_now(deps_.at(s))) {
        for (const UOpRef& src : s->src) emit(src);
        push(ref_.at(s));
        emitted_in_reduce_.insert(s);
      }
    push(uop(Ops::ACCUMULATE, n->dtype, {acc, n->src[0]}, n->arg));
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) close_loop(*it);
    done_.insert(n);
    if (!scopes_.empty()) scopes_.back().push_back(n);
  }

  void emit(const UOpRef& node) {
    const UOp* n = node.get();
    if (done_.count(n) || n->op == Ops::RANGE) return;  // ranges are opened by their loops
    if (in_reduce_.count(n)) return;                     // emitted by emit_reduce
    if (n->op == Ops::REDUCE) return emit_reduce(node, {});
    for (const UOpRef& s : n->src) emit(s);
    done_.insert(n);
    if (n->op != Ops::SINK) push(node);
  }

  std::unordered_set<int64_t> upcast_;
  LinearKernel out_;
  std::unordered_map<const UOp*, RangeSet> deps_;
  std::unordered_map<const UOp*, UOpRef> ref_;
  std::unordered_set<const UOp*> reduce_owned_;
  std::unordered_set<int64_t> reduce_owned_ids_;
  std::unordered_set<const UOp*> in_reduce_;          // stores emitted inside a reduction's loop
  std::unordered_set<const UOp*> emitted_in_reduce_;  // (not done_: closing the loop forgets those)
  std::unordered_set<const UOp*> done_;
  std::unordered_set<int64_t> open_;
  std::vector<std::vector<const UOp*>> scopes_;
  int64_t acc_count_ = 0;
};

}  // namespace

absl::StatusOr<LinearKernel> linearize(const UOpRef& sink, const std::vector<int64_t>& upcast_ranges) {
  if (sink->op != Ops::SINK) return absl::InternalError("linearize expects a SINK");
  return Linearizer(upcast_ranges).run(sink);
}

int64_t loop_iterations(const LinearKernel& kernel) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const auto times = [](int64_t a, int64_t b) { return a > kMax / b ? kMax : a * b; };
  // Each loop runs (its trip count) x (the trips of the loops around it) times; a register
  // tile's store loops follow its reduction rather than nest in it.
  std::vector<int64_t> enclosing{1};
  int64_t total = 1;
  for (const UOpRef& u : kernel.ops) {
    if (u->op == Ops::RANGE) {
      enclosing.push_back(times(enclosing.back(), std::max<int64_t>(1, u->src[0]->arg_int())));
      total = enclosing.back() > kMax - total ? kMax : total + enclosing.back();
    } else if (u->op == Ops::END_RANGE && enclosing.size() > 1) {
      enclosing.pop_back();
    }
  }
  return total;
}

}  // namespace polygrad
