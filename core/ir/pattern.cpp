#include "core/ir/pattern.h"

#include <algorithm>
#include <unordered_map>

namespace polygrad {

const UOpRef& Match::operator[](std::string_view name) const {
  for (const auto& [n, node] : bound_)
    if (n == name) return node;
  static const UOpRef kNull;
  return kNull;
}

bool Match::bind(std::string_view name, const UOpRef& node) {
  for (const auto& [n, existing] : bound_)
    if (n == name) return existing.get() == node.get();
  bound_.emplace_back(name, node);
  return true;
}

UPat UPat::any(std::string_view name) {
  UPat p;
  p.name_ = name;
  return p;
}

UPat UPat::cvar(std::string_view name, DTypeClass cls) {
  UPat p = op(Ops::CONST, {}, name);
  p.src_.reset();
  p.cls_ = cls;
  return p;
}

UPat UPat::op(Ops op, std::vector<UPat> src, std::string_view name) {
  return ops({op}, std::move(src), name);
}

UPat UPat::ops(std::vector<Ops> ops, std::vector<UPat> src, std::string_view name) {
  UPat p;
  p.ops_ = std::move(ops);
  p.src_ = std::move(src);
  p.name_ = name;
  return p;
}

UPat UPat::op_any_src(std::vector<Ops> ops, std::string_view name) {
  UPat p;
  p.ops_ = std::move(ops);
  p.name_ = name;
  return p;
}

static bool class_matches(DTypeClass cls, DType dt) {
  switch (cls) {
    case DTypeClass::Any: return true;
    case DTypeClass::Int: return dtype_is_int(dt);
    case DTypeClass::Bool: return dt == DType::Bool;
    case DTypeClass::Float: return dtype_is_float(dt);
    case DTypeClass::IntOrBool: return dtype_is_int(dt) || dt == DType::Bool;
  }
  return false;
}

bool UPat::match(const UOpRef& node, Match& m) const {
  if (!ops_.empty() && std::find(ops_.begin(), ops_.end(), node->op) == ops_.end()) return false;
  if (!class_matches(cls_, node->dtype)) return false;
  if (arg_ && !(*arg_ == node->arg)) return false;
  size_t mark = m.mark();
  if (!name_.empty() && !m.bind(name_, node)) return false;
  if (!src_) return true;
  const auto& pats = *src_;
  if (pats.size() != node->src.size()) return (m.reset(mark), false);
  auto match_in_order = [&](bool swapped) {
    size_t inner = m.mark();
    for (size_t i = 0; i < pats.size(); ++i) {
      size_t j = swapped ? 1 - i : i;
      if (!pats[i].match(node->src[j], m)) return (m.reset(inner), false);
    }
    return true;
  };
  if (match_in_order(false)) return true;
  // Commutative binary ops match either way round, so tables need not list both orders.
  if (pats.size() == 2 && is_commutative(node->op) && match_in_order(true)) return true;
  m.reset(mark);
  return false;
}

PatternMatcher::PatternMatcher(std::vector<Rule> rules) : rules_(std::move(rules)) {
  constexpr size_t kOps = static_cast<size_t>(Ops::END_RANGE) + 1;
  by_op_.assign(kOps, {});
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& filter = rules_[i].pattern.op_filter();
    for (size_t op = 0; op < kOps; ++op)
      if (filter.empty() || std::find(filter.begin(), filter.end(), static_cast<Ops>(op)) != filter.end())
        by_op_[op].push_back(i);
  }
}

UOpRef PatternMatcher::rewrite(const UOpRef& node) const {
  for (size_t i : by_op_[static_cast<size_t>(node->op)]) {
    Match m;
    if (!rules_[i].pattern.match(node, m)) continue;
    if (UOpRef out = rules_[i].rewrite(m, node); out && out.get() != node.get()) return out;
  }
  return nullptr;
}

PatternMatcher PatternMatcher::operator+(const PatternMatcher& other) const {
  std::vector<Rule> all = rules_;
  all.insert(all.end(), other.rules_.begin(), other.rules_.end());
  return PatternMatcher(std::move(all));
}

UOpRef graph_rewrite(const UOpRef& root, const PatternMatcher& pm) {
  // Iterative post-order with an explicit stack: client graphs may be deeper than a thread's
  // stack allows recursion for. A frame first waits for its sources, then for what a rule
  // rewrote it into.
  struct Frame {
    UOpRef node;
    int state;      // 0: sources not scheduled, 1: sources done, 2: waiting for `target`
    UOpRef target;
  };
  std::unordered_map<const UOp*, UOpRef> done;
  std::vector<UOpRef> keep;  // keys of `done` stay alive so no address is reused meanwhile
  std::vector<Frame> stack{{root, 0, nullptr}};
  size_t budget = 10'000'000;  // a cycle of rules must not hang the daemon
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.state == 0) {
      if (done.count(f.node.get())) {
        stack.pop_back();
        continue;
      }
      f.state = 1;
      UOpRef node = f.node;  // `f` may dangle once the stack grows
      for (auto it = node->src.rbegin(); it != node->src.rend(); ++it)
        if (!done.count(it->get())) stack.push_back({*it, 0, nullptr});
      continue;
    }
    if (f.state == 2) {
      UOpRef result = done.at(f.target.get());
      keep.push_back(f.node);
      done[f.node.get()] = std::move(result);
      stack.pop_back();
      continue;
    }
    std::vector<UOpRef> src;
    src.reserve(f.node->src.size());
    bool changed = false;
    for (const UOpRef& s : f.node->src) {
      const UOpRef& r = done.at(s.get());
      changed |= r.get() != s.get();
      src.push_back(r);
    }
    UOpRef cur = changed ? uop(f.node->op, f.node->dtype, std::move(src), f.node->arg, f.node->shape) : f.node;
    UOpRef next = budget > 0 ? pm.rewrite(cur) : nullptr;
    if (budget > 0) --budget;
    if (!next) {
      keep.push_back(f.node);
      keep.push_back(cur);
      done[f.node.get()] = cur;
      done[cur.get()] = cur;
      stack.pop_back();
      continue;
    }
    if (auto it = done.find(next.get()); it != done.end()) {
      keep.push_back(f.node);
      done[f.node.get()] = it->second;
      stack.pop_back();
      continue;
    }
    f.state = 2;
    f.target = next;
    stack.push_back({next, 0, nullptr});
  }
  return done.at(root.get());
}

UOpRef substitute(const UOpRef& root, const UOp* from, const UOpRef& to) {
  PatternMatcher replace({{UPat::op_any_src({from->op}),
                           [&](const Match&, const UOpRef& n) { return n.get() == from ? to : nullptr; },
                           "the substituted node"}});
  return graph_rewrite(root, replace);
}

}  // namespace polygrad
