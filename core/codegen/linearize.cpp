#include "core/codegen/linearize.h"

#include <algorithm>
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

bool subset(const RangeSet& a, const std::unordered_set<int64_t>& open) {
  return std::all_of(a.begin(), a.end(), [&](int64_t r) { return open.count(r) > 0; });
}

class Linearizer {
 public:
  absl::StatusOr<LinearKernel> run(const UOpRef& sink) {
    ref_.emplace(sink.get(), sink);
    for (const UOp* n : toposort({sink})) compute_deps(n);
    // The output loops: every RANGE the STORE depends on, outermost first.
    std::vector<UOpRef> outer;
    for (const UOp* n : toposort({sink}))
      if (n->op == Ops::RANGE && !reduce_owned_.count(n)) outer.push_back(ref_.at(n));
    std::sort(outer.begin(), outer.end(), [](const UOpRef& a, const UOpRef& b) { return a->arg_int() < b->arg_int(); });
    if (!outer.empty()) {
      out_.outer_range_id = outer.front()->arg_int();
      out_.outer_size = outer.front()->src[0]->arg_int();
    }
    emit_in_loops(sink, outer);
    return std::move(out_);
  }

 private:
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
      }
    }
    if (n->op == Ops::DEFINE_GLOBAL) {
      int64_t idx = n->arg_int();
      if (out_.params.size() <= static_cast<size_t>(idx)) out_.params.resize(idx + 1, DType::Void);
      out_.params[idx] = n->dtype;
    }
    deps_[n] = std::move(d);
  }

  // Opens `loops` one by one, hoisting everything computable before each, then emits `node`.
  void emit_in_loops(const UOpRef& node, const std::vector<UOpRef>& loops) {
    for (const UOpRef& r : loops) {
      hoist(node);
      out_.ops.push_back(r);
      open_.insert(r->arg_int());
    }
    emit(node);
  }

  void close_loops(const std::vector<UOpRef>& loops) {
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
      out_.ops.push_back(uop(Ops::END_RANGE, DType::Void, {*it}));
      open_.erase((*it)->arg_int());
    }
  }

  // Emits every not-yet-emitted node under `node` whose loop variables are all open now.
  void hoist(const UOpRef& node) {
    for (const UOp* n : toposort({node})) {
      if (done_.count(n) || n->op == Ops::RANGE || n->op == Ops::SINK || n->op == Ops::STORE) continue;
      if (subset(deps_.at(n), open_)) emit(ref_of(n));
    }
  }

  void emit(const UOpRef& node) {
    const UOp* n = node.get();
    if (done_.count(n)) return;
    if (n->op == Ops::RANGE) return;  // opened by emit_in_loops
    if (n->op == Ops::REDUCE) {
      for (const UOpRef& s : n->src) hoist(s);
      // DEFINE_ACC names the REDUCE it accumulates, so the renderer can read the result from it.
      UOpRef acc = uop(Ops::DEFINE_ACC, n->dtype, {node}, static_cast<int64_t>(acc_count_++));
      out_.ops.push_back(acc);
      std::vector<UOpRef> loops(n->src.begin() + 1, n->src.end());
      emit_in_loops(n->src[0], loops);
      out_.ops.push_back(uop(Ops::ACCUMULATE, n->dtype, {acc, n->src[0]}, n->arg));
      close_loops(loops);
      done_.insert(n);
      return;
    }
    for (const UOpRef& s : n->src) emit(s);
    done_.insert(n);
    if (n->op == Ops::SINK) {
      std::vector<UOpRef> outer;
      for (const UOpRef& l : out_.ops)
        if (l->op == Ops::RANGE && open_.count(l->arg_int())) outer.push_back(l);
      close_loops(outer);
      return;
    }
    out_.ops.push_back(node);
  }

  UOpRef ref_of(const UOp* n) { return ref_.at(n); }

  LinearKernel out_;
  std::unordered_map<const UOp*, RangeSet> deps_;
  std::unordered_map<const UOp*, UOpRef> ref_;
  std::unordered_set<const UOp*> reduce_owned_;
  std::unordered_set<const UOp*> done_;
  std::unordered_set<int64_t> open_;
  int64_t acc_count_ = 0;
};

}  // namespace

absl::StatusOr<LinearKernel> linearize(const UOpRef& sink) {
  if (sink->op != Ops::SINK) return absl::InternalError("linearize expects a SINK");
  Linearizer l;
  return l.run(sink);
}

}  // namespace polygrad
