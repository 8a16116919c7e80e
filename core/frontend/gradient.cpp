#include "core/frontend/gradient.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/frontend/indexing.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

// Graph construction inside gradient rules cannot fail for well-formed inputs; a failure here is
// a bug in a rule, reported as INTERNAL rather than crashing.
class Builder {
 public:
  UOpRef take(absl::StatusOr<UOpRef> r) {
    if (!r.ok()) {
      if (status_.ok()) status_ = absl::InternalError(absl::StrCat("gradient rule: ", r.status().message()));
      return nullptr;
    }
    return *r;
  }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

  UOpRef c(double v, const UOpRef& like) { return take(constant(v, like->dtype, like->shape)); }
  UOpRef op(Ops o, std::vector<UOpRef> s) {
    for (const auto& x : s)
      if (!x) return nullptr;
    return take(alu(o, s));
  }
  UOpRef add(const UOpRef& a, const UOpRef& b) { return op(Ops::ADD, {a, b}); }
  UOpRef mul(const UOpRef& a, const UOpRef& b) { return op(Ops::MUL, {a, b}); }
  UOpRef div(const UOpRef& a, const UOpRef& b) { return op(Ops::FDIV, {a, b}); }
  UOpRef neg(const UOpRef& a) { return op(Ops::NEG, {a}); }
  UOpRef where(const UOpRef& c, const UOpRef& a, const UOpRef& b) { return op(Ops::WHERE, {c, a, b}); }
  UOpRef eq(const UOpRef& a, const UOpRef& b) { return op(Ops::NOT, {op(Ops::CMPNE, {a, b})}); }
  UOpRef to(const UOpRef& x, DType dt) { return x ? take(cast(x, dt)) : nullptr; }

  // Sums `g` (of shape `from`) down to `shape`, where `shape` has 1 on every broadcast axis.
  UOpRef unbroadcast(const UOpRef& g, const Shape& shape) {
    std::vector<int64_t> axes;
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] != g->shape[i]) axes.push_back(static_cast<int64_t>(i));
    return axes.empty() ? g : take(reduce(Ops::ADD, g, axes));
  }

 private:
  absl::Status status_;
};

std::vector<std::pair<int64_t, int64_t>> pairs_of(const std::vector<int64_t>& flat) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) out.emplace_back(flat[i], flat[i + 1]);
  return out;
}

// d prod(x) / d x_i = prod of the other elements, exact with zeros: with no zero in a slice it
// is prod / x_i; with one zero, the zero gets the product of the rest and the others get 0;
// with two or more, every element gets 0. (prod / x_i alone would give nan at zeros.)
UOpRef prod_backward(Builder& b, const UOpRef& x, const UOpRef& g_expanded, const std::vector<int64_t>& axes) {
  UOpRef zero = b.c(0, x), one = b.c(1, x);
  UOpRef is_zero = b.eq(x, zero);
  UOpRef zeros = b.take(expand(b.take(reduce(Ops::ADD, b.to(is_zero, x->dtype), axes)), x->shape));
  UOpRef rest = b.take(expand(b.take(reduce(Ops::MUL, b.where(is_zero, one, x), axes)), x->shape));
  UOpRef none = b.eq(zeros, zero), single = b.eq(zeros, one);
  UOpRef others = b.where(is_zero, b.where(single, rest, zero), b.where(none, b.div(rest, b.where(is_zero, one, x)), zero));
  return b.mul(g_expanded, others);
}

// set_gradient_rule's registry, by result node. Entries hold weak references: an entry whose
// result died is dropped when the table has doubled since the last sweep (a dead node's address
// can be reused, so a lookup also checks that the entry's node is the one asked about).
struct RuleEntry {
  std::weak_ptr<const UOp> out;
  std::vector<std::weak_ptr<const UOp>> inputs;
  GradientRule rule;
};

class RuleRegistry {
 public:
  void set(const UOpRef& out, const std::vector<UOpRef>& inputs, GradientRule rule) {
    absl::MutexLock lock(&mu_);
    RuleEntry& e = rules_[out.get()];
    e.out = out;
    e.inputs.assign(inputs.begin(), inputs.end());
    e.rule = rule;
    if (rules_.size() >= 2 * swept_size_) {
      std::erase_if(rules_, [](const auto& kv) { return kv.second.out.expired(); });
      swept_size_ = std::max<size_t>(rules_.size(), 64);
    }
  }
  // The rules registered for any of `nodes`, with their live inputs (one lock for the walk).
  std::unordered_map<const UOp*, std::pair<GradientRule, std::vector<UOpRef>>> find(
      const std::vector<const UOp*>& nodes) const {
    std::unordered_map<const UOp*, std::pair<GradientRule, std::vector<UOpRef>>> out;
    absl::MutexLock lock(&mu_);
    if (rules_.empty()) return out;
    for (const UOp* node : nodes) {
      auto it = rules_.find(node);
      if (it == rules_.end() || it->second.out.lock().get() != node) continue;
      std::vector<UOpRef> inputs;
      for (const auto& w : it->second.inputs) inputs.push_back(w.lock());  // alive: node is built from them
      out.emplace(node, std::pair{it->second.rule, std::move(inputs)});
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::unordered_map<const UOp*, RuleEntry> rules_ ABSL_GUARDED_BY(mu_);
  size_t swept_size_ ABSL_GUARDED_BY(mu_) = 64;
};

RuleRegistry& rule_registry() {
  static auto* r = new RuleRegistry();  // never destroyed: nodes may die after static destructors ran
  return *r;
}

// The gradients of one node's sources given the gradient `g` of its result (null: no gradient).
std::vector<UOpRef> backward(Builder& b, const UOpRef& node, const UOpRef& g) {
  const UOp& n = *node;
  const auto& s = n.src;
  constexpr double kLn2 = 0.6931471805599453;
  switch (n.op) {
    case Ops::ADD: return {g, g};
    case Ops::SUB: return {g, b.neg(g)};
    case Ops::NEG: return {b.neg(g)};
    case Ops::MUL: return {b.mul(g, s[1]), b.mul(g, s[0])};
    case Ops::FDIV: return {b.div(g, s[1]), b.neg(b.div(b.mul(g, s[0]), b.mul(s[1], s[1])))};
    case Ops::MAX: {
      // Ties share the gradient equally, as in tinygrad.
      UOpRef gt = b.op(Ops::CMPLT, {s[1], s[0]}), lt = b.op(Ops::CMPLT, {s[0], s[1]});
      UOpRef half = b.mul(g, b.c(0.5, g)), zero = b.c(0, g);
      return {b.where(gt, g, b.where(lt, zero, half)), b.where(lt, g, b.where(gt, zero, half))};
    }
    case Ops::EXP2: return {b.mul(g, b.mul(node, b.c(kLn2, node)))};
    case Ops::LOG2: return {b.div(g, b.mul(s[0], b.c(kLn2, s[0])))};
    case Ops::SQRT: return {b.div(g, b.mul(node, b.c(2, node)))};
    case Ops::RECIP: return {b.neg(b.mul(g, b.mul(node, node)))};
    case Ops::SIN: return {b.mul(g, b.op(Ops::SIN, {b.op(Ops::SUB, {b.c(M_PI / 2, s[0]), s[0]})}))};
    case Ops::CAST: return {dtype_is_float(s[0]->dtype) ? b.to(g, s[0]->dtype) : nullptr};
    // Bits are not a differentiable function of a value (torch's view(dtype) is not either).
    case Ops::BITCAST: return {nullptr};
    case Ops::WHERE: {
      UOpRef zero = b.c(0, g);
      return {nullptr, b.where(s[0], g, zero), b.where(s[0], zero, g)};
    }
    case Ops::REDUCE_AXIS: {
      const ReduceArg& r = n.arg_reduce();
      UOpRef ge = b.take(expand(g, s[0]->shape));
      if (r.op == Ops::ADD) return {ge};
      if (r.op == Ops::MUL) return {prod_backward(b, s[0], ge, r.axes)};
      // MAX: the gradient goes to the maxima, split equally among ties.
      UOpRef is_max = b.to(b.eq(s[0], b.take(expand(node, s[0]->shape))), s[0]->dtype);
      UOpRef count = b.take(expand(b.take(reduce(Ops::ADD, is_max, r.axes)), s[0]->shape));
      return {b.div(b.mul(ge, is_max), count)};
    }
    case Ops::RESHAPE: return {b.take(reshape(g, s[0]->shape))};
    case Ops::PERMUTE: {
      const auto& order = n.arg_ints();
      std::vector<int64_t> inverse(order.size());
      for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
      return {b.take(permute(g, inverse))};
    }
    case Ops::EXPAND: return {b.unbroadcast(g, s[0]->shape)};
    case Ops::PAD: {
      auto ba = pairs_of(n.arg_ints());
      std::vector<std::pair<int64_t, int64_t>> be;
      for (size_t i = 0; i < ba.size(); ++i) be.emplace_back(ba[i].first, ba[i].first + s[0]->shape[i]);
      return {b.take(shrink(g, be))};
    }
    case Ops::SHRINK: {
      auto be = pairs_of(n.arg_ints());
      std::vector<std::pair<int64_t, int64_t>> ba;
      for (size_t i = 0; i < be.size(); ++i) ba.emplace_back(be[i].first, s[0]->shape[i] - be[i].second);
      return {b.take(pad(g, ba))};
    }
    case Ops::FLIP: return {b.take(flip(g, n.arg_ints()))};
    // A symbolic dim's mark: x past the extent reached nothing, so its gradient there is 0 (set
    // explicitly: what g holds there was never computed), valid on the whole axis (no mark).
    // The extent (an integer) has none.
    case Ops::BOUND: {
      const int64_t axis = n.arg_int();
      UOpRef masked = g->extents.empty() || !g->extents[axis] ? b.take(bound(g, axis, s[1])) : g;
      if (masked) masked = b.take(past_extent(masked, axis, int64_t{0}));
      if (masked) masked = b.take(bound(masked, axis, uop(Ops::CONST, DType::Int32, {}, g->shape[axis])));
      return {masked, nullptr};
    }
    case Ops::GATHER: {
      // Each selected element of x gets the gradients of the positions that selected it: g
      // spread over a one-hot comparison of the index with x's last axis and summed (a
      // scatter-add); the index gets none.
      if (s[0]->shape.back() == 0) return {b.c(0, s[0]), nullptr};
      UOpRef hit = b.to(b.take(one_hot(s[1], s[0]->shape.back())), DType::Bool);  // (..., m, n)
      if (!hit) return {nullptr, nullptr};
      Shape gs = g->shape;
      gs.push_back(1);
      UOpRef ge = b.take(expand(b.take(reshape(g, gs)), hit->shape));
      if (!ge) return {nullptr, nullptr};
      UOpRef picked = b.where(hit, ge, b.c(0, ge));
      if (!picked) return {nullptr, nullptr};
      UOpRef summed = b.take(reduce(Ops::ADD, picked, {static_cast<int64_t>(picked->shape.size()) - 2}));
      return {summed ? b.take(reshape(summed, s[0]->shape)) : nullptr, nullptr};
    }
    // Back to where the source lives (a COPY back to the CPU of a tensor moved to a GPU); a copy
    // back's device reference passes no gradient.
    case Ops::COPY: {
      std::vector<UOpRef> out{copy_to_device_of(g, s[0])};
      if (s.size() == 2) out.push_back(nullptr);
      return out;
    }
    default:
      // Leaves, comparisons and integer/bool ops pass no gradient.
      return std::vector<UOpRef>(s.size(), nullptr);
  }
}

}  // namespace

void set_gradient_rule(const UOpRef& out, const std::vector<UOpRef>& inputs, GradientRule rule) {
  rule_registry().set(out, inputs, rule);
}

absl::StatusOr<std::vector<UOpRef>> gradient(const UOpRef& loss, const std::vector<UOpRef>& wrt, const UOpRef& seed) {
  if (!dtype_is_float(loss->dtype))
    return absl::InvalidArgumentError(absl::StrCat("gradient of a ", dtype_name(loss->dtype), " tensor: the loss must be a float tensor"));
  Builder b;
  UOpRef start = seed ? seed : b.c(1, loss);
  if (start->shape != loss->shape || start->dtype != loss->dtype)
    return absl::InvalidArgumentError("the gradient seed must have the loss's shape and dtype");

  // Only nodes on a path from a target to the loss need a gradient. A node with a registered
  // rule passes its gradient straight to the rule's inputs (its construction is on the path too,
  // but gets no gradient through it).
  std::unordered_set<const UOp*> targets;
  for (const UOpRef& w : wrt) targets.insert(w.get());
  std::vector<const UOp*> order = toposort({loss});
  const auto custom = rule_registry().find(order);
  std::unordered_set<const UOp*> on_path;
  std::unordered_map<const UOp*, UOpRef> ref{{loss.get(), loss}};
  for (const UOp* n : order) {
    for (const UOpRef& s : n->src) ref.emplace(s.get(), s);
    bool reaches = targets.count(n) > 0;
    for (const UOpRef& s : n->src) reaches |= on_path.count(s.get()) > 0;
    if (reaches) on_path.insert(n);
  }

  std::unordered_map<const UOp*, UOpRef> grads{{loss.get(), start}};
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOp* n = *it;
    auto g = grads.find(n);
    if (g == grads.end() || !on_path.count(n) || n->src.empty()) continue;
    const std::vector<UOpRef>* srcs = &n->src;
    std::vector<UOpRef> src_grads;
    if (auto c = custom.find(n); c != custom.end()) {
      const auto& [rule, inputs] = c->second;
      auto r = rule(ref.at(n), inputs, g->second);
      if (!r.ok()) return absl::InternalError(absl::StrCat("gradient rule: ", r.status().message()));
      src_grads = *std::move(r);
      srcs = &inputs;
    } else {
      src_grads = backward(b, ref.at(n), g->second);
    }
    if (!b.ok()) return b.status();
    for (size_t i = 0; i < srcs->size(); ++i) {
      const UOp* s = (*srcs)[i].get();
      if (!src_grads[i] || !on_path.count(s)) continue;
      auto [slot, fresh] = grads.emplace(s, src_grads[i]);
      if (!fresh) slot->second = b.add(slot->second, src_grads[i]);
    }
    if (!b.ok()) return b.status();
  }

  std::vector<UOpRef> out;
  for (const UOpRef& w : wrt) {
    auto g = grads.find(w.get());
    if (g != grads.end()) {
      out.push_back(g->second);
      continue;
    }
    if (!dtype_is_float(w->dtype))
      return absl::InvalidArgumentError(absl::StrCat("gradient with respect to a ", dtype_name(w->dtype), " tensor"));
    out.push_back(b.c(0, w));
  }
  if (!b.ok()) return b.status();
  return out;
}

}  // namespace polygrad::frontend
