// Pattern matching and graph rewriting. A pass is a PatternMatcher: an ordered table of
// (pattern, rewrite) rules with a one-line reason each. graph_rewrite applies a matcher bottom-up
// to a fixed point. Tables are built once (function-local statics) and never mutated after.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/ir/uop.h"

namespace polygrad {

// Names bound by a successful match.
class Match {
 public:
  const UOpRef& operator[](std::string_view name) const;
  bool bind(std::string_view name, const UOpRef& node);  // false if bound to another node
  size_t mark() const { return bound_.size(); }
  void reset(size_t mark) { bound_.resize(mark); }

 private:
  std::vector<std::pair<std::string_view, UOpRef>> bound_;
};

enum class DTypeClass { Any, Int, Bool, Float, IntOrBool };

class UPat {
 public:
  static UPat any(std::string_view name = {});
  static UPat cvar(std::string_view name = {}, DTypeClass cls = DTypeClass::Any);  // a CONST
  static UPat op(Ops op, std::vector<UPat> src, std::string_view name = {});
  static UPat ops(std::vector<Ops> ops, std::vector<UPat> src, std::string_view name = {});
  // Matches any node of the given op(s), whatever its sources.
  static UPat op_any_src(std::vector<Ops> ops, std::string_view name = {});

  UPat& cls(DTypeClass c) { cls_ = c; return *this; }
  UPat& arg(Arg a) { arg_ = std::move(a); return *this; }

  bool match(const UOpRef& node, Match& m) const;
  const std::vector<Ops>& op_filter() const { return ops_; }

 private:
  std::vector<Ops> ops_;                  // empty: any op
  std::optional<std::vector<UPat>> src_;  // nullopt: any sources
  std::optional<Arg> arg_;
  DTypeClass cls_ = DTypeClass::Any;
  std::string_view name_;
};

using RewriteFn = std::function<UOpRef(const Match& m, const UOpRef& node)>;

struct Rule {
  UPat pattern;
  RewriteFn rewrite;  // returns null when the rule does not apply after all
  std::string_view why;
};

class PatternMatcher {
 public:
  explicit PatternMatcher(std::vector<Rule> rules);
  // The first applicable rule's result, or null if none applies.
  UOpRef rewrite(const UOpRef& node) const;
  PatternMatcher operator+(const PatternMatcher& other) const;
  size_t size() const { return rules_.size(); }

 private:
  std::vector<Rule> rules_;
  std::vector<std::vector<size_t>> by_op_;  // rule indices per op, wildcard rules included
};

// Rewrites `root` bottom-up until no rule applies anywhere. Nodes that do not change are
// returned as they are (the same pointer).
UOpRef graph_rewrite(const UOpRef& root, const PatternMatcher& pm);

// `root` with every use of `from` replaced by `to` (the users rebuilt; nothing else rewritten).
UOpRef substitute(const UOpRef& root, const UOp* from, const UOpRef& to);

}  // namespace polygrad
