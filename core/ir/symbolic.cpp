#include "core/ir/symbolic.h"
#include "core/ir/wide_int.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace polygrad {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t clamp128(i128 v) {
  return v < kMin ? kMin : v > kMax ? kMax : static_cast<int64_t>(v);
}

Bounds dtype_bounds(DType dt) {
  switch (dt) {
    case DType::Bool: return {0, 1};
    case DType::Int8: return {-128, 127};
    case DType::Int16: return {-32768, 32767};
    case DType::Int32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::UInt8: return {0, 255};
    case DType::UInt16: return {0, 65535};
    case DType::UInt32: return {0, std::numeric_limits<uint32_t>::max()};
    case DType::UInt64: return {0, kMax};
    default: return {kMin, kMax};
  }
}

bool is_const(const UOpRef& x) { return x->op == Ops::CONST && std::holds_alternative<int64_t>(x->arg); }
int64_t cval(const UOpRef& x) { return x->arg_int(); }

}  // namespace

namespace {

using BoundsMemo = std::unordered_map<const UOp*, Bounds>;

Bounds bounds_of(const UOpRef& x, BoundsMemo& memo);

// A sum or product of a dtype narrower than int64 that leaves its range wraps to anywhere in it.
Bounds within_dtype(Bounds v, DType dt) {
  const Bounds d = dtype_bounds(dt);
  return v.lo < d.lo || v.hi > d.hi ? d : v;
}

Bounds bounds_uncached(const UOpRef& x, BoundsMemo& memo) {
  if (x->op == Ops::CONST) {
    if (auto* i = std::get_if<int64_t>(&x->arg)) return {*i, *i};
    return {kMin, kMax};
  }
  if (!dtype_is_int(x->dtype) && x->dtype != DType::Bool) return {kMin, kMax};
  auto b = [&](size_t i) { return bounds_of(x->src[i], memo); };
  switch (x->op) {
    case Ops::RANGE: {
      Bounds end = b(0);
      return {0, std::max<int64_t>(0, end.hi - 1)};
    }
    case Ops::ADD: {
      Bounds l = b(0), r = b(1);
      return {clamp128(i128(l.lo) + r.lo), clamp128(i128(l.hi) + r.hi)};
    }
    case Ops::SUB: {
      Bounds l = b(0), r = b(1);
      return {clamp128(i128(l.lo) - r.hi), clamp128(i128(l.hi) - r.lo)};
    }
    case Ops::NEG: {
      Bounds l = b(0);
      return {clamp128(-i128(l.hi)), clamp128(-i128(l.lo))};
    }
    case Ops::MUL: {
      Bounds l = b(0), r = b(1);
      i128 c[4] = {i128(l.lo) * r.lo, i128(l.lo) * r.hi, i128(l.hi) * r.lo,
                       i128(l.hi) * r.hi};
      return {clamp128(*std::min_element(c, c + 4)), clamp128(*std::max_element(c, c + 4))};
    }
    case Ops::IDIV: {
      Bounds l = b(0), r = b(1);
      // Truncating division by a positive constant is monotonic: the corners bound it.
      if (r.lo == r.hi && r.lo > 0) return {l.lo / r.lo, l.hi / r.lo};
      break;
    }
    case Ops::MOD: {
      Bounds l = b(0), r = b(1);
      if (r.lo == r.hi && r.lo > 0) {
        if (l.lo >= 0) return l.hi < r.lo ? l : Bounds{0, r.lo - 1};
        return {-(r.lo - 1), r.lo - 1};
      }
      break;
    }
    case Ops::MAX: {
      Bounds l = b(0), r = b(1);
      return {std::max(l.lo, r.lo), std::max(l.hi, r.hi)};
    }
    case Ops::WHERE: {
      Bounds l = b(1), r = b(2);
      return {std::min(l.lo, r.lo), std::max(l.hi, r.hi)};
    }
    case Ops::CAST: {
      Bounds s = b(0);
      Bounds d = dtype_bounds(x->dtype);
      if (s.lo >= d.lo && s.hi <= d.hi) return s;
      return d;
    }
    case Ops::CMPLT: case Ops::CMPNE: case Ops::AND: case Ops::OR: case Ops::NOT:
      if (x->dtype == DType::Bool) return {0, 1};
      break;
    default:
      break;
  }
  return dtype_bounds(x->dtype);
}

// Memoized: a value used twice (x * x, repeated squaring) is bounded once, not once per path.
Bounds bounds_of(const UOpRef& x, BoundsMemo& memo) {
  if (auto it = memo.find(x.get()); it != memo.end()) return it->second;
  Bounds r = bounds_uncached(x, memo);
  if (dtype_is_int(x->dtype)) r = within_dtype(r, x->dtype);
  memo.emplace(x.get(), r);
  return r;
}

}  // namespace

Bounds bounds(const UOpRef& x) {
  BoundsMemo memo;
  return bounds_of(x, memo);
}

namespace {

// ---- constant folding with C semantics, for integer and bool nodes ----

UOpRef fold_consts(const Match&, const UOpRef& n) {
  if (!(dtype_is_int(n->dtype) || n->dtype == DType::Bool)) return nullptr;
  for (const UOpRef& s : n->src)
    if (!is_const(s)) return nullptr;
  auto v = [&](size_t i) { return cval(n->src[i]); };
  i128 r;
  switch (n->op) {
    case Ops::NEG: r = -i128(v(0)); break;
    case Ops::NOT: r = !v(0); break;
    case Ops::ADD: r = i128(v(0)) + v(1); break;
    case Ops::SUB: r = i128(v(0)) - v(1); break;
    case Ops::MUL: r = i128(v(0)) * v(1); break;
    case Ops::IDIV: if (v(1) == 0) return nullptr; r = i128(v(0)) / v(1); break;
    case Ops::MOD: if (v(1) == 0) return nullptr; r = i128(v(0)) % v(1); break;
    case Ops::MAX: r = std::max(v(0), v(1)); break;
    case Ops::CMPLT: r = v(0) < v(1); break;
    case Ops::CMPNE: r = v(0) != v(1); break;
    case Ops::AND: r = v(0) & v(1); break;
    case Ops::OR: r = v(0) | v(1); break;
    case Ops::XOR: r = v(0) ^ v(1); break;
    case Ops::WHERE: r = v(0) ? v(1) : v(2); break;
    case Ops::CAST: r = v(0); break;
    default: return nullptr;
  }
  // Only fold when the result is representable: wrapping is the dtype's business at run time.
  Bounds d = dtype_bounds(n->dtype);
  if (r < d.lo || r > d.hi) return nullptr;
  return const_int(static_cast<int64_t>(r), n->dtype);
}

// Comparisons decided by bounds alone.
UOpRef fold_cmp_by_bounds(const Match& m, const UOpRef& n) {
  Bounds a = bounds(n->src[0]), b = bounds(n->src[1]);
  if (!dtype_is_int(n->src[0]->dtype)) return nullptr;
  if (n->op == Ops::CMPLT) {
    if (a.hi < b.lo) return const_int(1, DType::Bool);
    if (a.lo >= b.hi) return const_int(0, DType::Bool);
  } else if (a.hi < b.lo || b.hi < a.lo) {
    return const_int(1, DType::Bool);
  }
  return nullptr;
}

// ---- affine normal form: sum of (term * coefficient) + constant, terms ordered by hash ----

struct Affine {
  std::vector<std::pair<UOpRef, int64_t>> terms;
  int64_t constant = 0;
  bool overflow = false;
};

void add_term(Affine& a, const UOpRef& t, i128 coeff) {
  for (auto& [node, c] : a.terms) {
    if (node.get() == t.get()) {
      i128 sum = i128(c) + coeff;
      if (sum < kMin || sum > kMax) a.overflow = true;
      c = static_cast<int64_t>(sum);
      return;
    }
  }
  if (coeff < kMin || coeff > kMax) a.overflow = true;
  a.terms.emplace_back(t, static_cast<int64_t>(coeff));
}

void decompose(const UOpRef& x, i128 scale, Affine& out) {
  if (is_const(x)) {
    i128 c = i128(out.constant) + scale * cval(x);
    if (c < kMin || c > kMax) out.overflow = true;
    out.constant = static_cast<int64_t>(c);
    return;
  }
  switch (x->op) {
    case Ops::ADD:
      decompose(x->src[0], scale, out);
      decompose(x->src[1], scale, out);
      return;
    case Ops::SUB:
      decompose(x->src[0], scale, out);
      decompose(x->src[1], -scale, out);
      return;
    case Ops::NEG:
      decompose(x->src[0], -scale, out);
      return;
    case Ops::MUL:
      if (is_const(x->src[1])) return decompose(x->src[0], scale * cval(x->src[1]), out);
      if (is_const(x->src[0])) return decompose(x->src[1], scale * cval(x->src[0]), out);
      break;
    default:
      break;
  }
  add_term(out, x, scale);
}

// (x // c) * k*c + (x % c) * k is x * k for any x when c != 0: C's division and modulo
// satisfy (x / c) * c + x % c == x. Reshapes leave exactly this pair behind.
bool merge_divmod_pair(Affine& a) {
  for (size_t i = 0; i < a.terms.size(); ++i) {
    const auto& [mod, k] = a.terms[i];
    if (mod->op != Ops::MOD || !is_const(mod->src[1]) || k == 0) continue;
    for (size_t j = 0; j < a.terms.size(); ++j) {
      const auto& [div, kc] = a.terms[j];
      if (div->op != Ops::IDIV || div->src[0].get() != mod->src[0].get() || div->src[1].get() != mod->src[1].get())
        continue;
      if (i128(k) * cval(mod->src[1]) != kc) continue;
      UOpRef x = mod->src[0];
      int64_t scale = k;
      a.terms.erase(a.terms.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
      a.terms.erase(a.terms.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
      decompose(x, scale, a);
      return true;
    }
  }
  return false;
}

Affine affine(const UOpRef& x) {
  Affine a;
  decompose(x, 1, a);
  while (!a.overflow && merge_divmod_pair(a)) {
  }
  std::erase_if(a.terms, [](const auto& t) { return t.second == 0; });
  std::sort(a.terms.begin(), a.terms.end(), [](const auto& l, const auto& r) {
    return l.first->hash != r.first->hash ? l.first->hash < r.first->hash : l.second < r.second;
  });
  return a;
}

bool in_int64(i128 v) { return v >= kMin && v <= kMax; }

// The sum rebuilt term by term, or null when some term or partial sum of the new order could leave
// int64: reassociating must never create an overflow (undefined in the generated C) at a point
// where the original expression had none. Bounds are sound, so a sum that passes cannot overflow.
UOpRef build(const std::vector<std::pair<UOpRef, int64_t>>& terms, int64_t constant, DType dt) {
  BoundsMemo memo;
  i128 lo = 0, hi = 0;
  UOpRef out;
  for (const auto& [t, c] : terms) {
    const Bounds b = bounds_of(t, memo);
    const i128 x = i128(b.lo) * c, y = i128(b.hi) * c;
    const i128 tlo = std::min(x, y), thi = std::max(x, y);
    lo = out ? lo + tlo : tlo;
    hi = out ? hi + thi : thi;
    if (!in_int64(tlo) || !in_int64(thi) || !in_int64(lo) || !in_int64(hi)) return nullptr;
    UOpRef term = c == 1 ? t : uop(Ops::MUL, dt, {t, const_int(c, dt)});
    out = out ? uop(Ops::ADD, dt, {out, term}) : term;
  }
  if (!out) return const_int(constant, dt);
  if (constant != 0) {
    if (!in_int64(lo + constant) || !in_int64(hi + constant)) return nullptr;
    out = uop(Ops::ADD, dt, {out, const_int(constant, dt)});
  }
  return out;
}

// Only the index dtype is rewritten into affine form: narrower ints wrap, so reassociating them
// could change results.
bool affine_dtype(DType dt) { return dt == kIndexDType; }

UOpRef to_affine(const Match&, const UOpRef& n) {
  if (!affine_dtype(n->dtype)) return nullptr;
  if (n->op == Ops::MUL && !is_const(n->src[0]) && !is_const(n->src[1])) return nullptr;
  Affine a = affine(n);
  if (a.overflow) return nullptr;
  return build(a.terms, a.constant, n->dtype);
}

int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

// x // c and x % c for constant c > 0 and x >= 0: split x = c*q + r and use r's bounds.
UOpRef fold_divmod(const Match& m, const UOpRef& n) {
  const UOpRef& x = m["x"];
  int64_t c = cval(m["c"]);
  if (!affine_dtype(n->dtype) || c <= 0) return nullptr;
  bool is_div = n->op == Ops::IDIV;
  if (c == 1) return is_div ? x : const_int(0, n->dtype);
  Bounds bx = bounds(x);
  if (bx.lo < 0) return nullptr;  // truncation and floor differ for negatives: leave them be
  if (bx.hi < c) return is_div ? const_int(0, n->dtype) : x;
  Affine a = affine(x);
  if (a.overflow) return nullptr;
  std::vector<std::pair<UOpRef, int64_t>> q, r;
  for (const auto& [t, k] : a.terms) {
    if (k % c == 0) q.emplace_back(t, k / c);
    else if (is_div) r.emplace_back(t, k);
    else r.emplace_back(t, floormod(k, c));
  }
  int64_t cq = floordiv(a.constant, c), cr = floormod(a.constant, c);
  UOpRef rest = build(r, cr, n->dtype);
  if (!rest) return nullptr;
  Bounds br = bounds(rest);
  if (is_div) {
    UOpRef multiples = build(q, cq, n->dtype);
    if (!multiples) return nullptr;
    if (br.lo >= 0 && br.hi < c) return multiples;
    // Pull the multiples of c out when what remains is non-negative (the sum is at most x / c).
    if (!q.empty() && br.lo >= 0) return uop(Ops::ADD, n->dtype, {multiples, uop(Ops::IDIV, n->dtype, {rest, m["c"]})});
    // Divide everything by the common factor g of the coefficients, the constant and c.
    int64_t g = c;
    for (const auto& [t, k] : a.terms) g = std::gcd(g, k);
    g = std::gcd(g, a.constant);
    if (g > 1) {
      std::vector<std::pair<UOpRef, int64_t>> scaled;
      for (const auto& [t, k] : a.terms) scaled.emplace_back(t, k / g);
      UOpRef sum = build(scaled, a.constant / g, n->dtype);
      return sum ? uop(Ops::IDIV, n->dtype, {sum, const_int(c / g, n->dtype)}) : nullptr;
    }
    return nullptr;
  }
  if (br.lo >= 0 && br.hi < c) return rest;
  if (br.lo >= 0 && rest.get() != x.get()) return uop(Ops::MOD, n->dtype, {rest, m["c"]});
  return nullptr;
}

// (x // a) // b -> x // (a*b) for x >= 0, and (x % a) % b -> x % b when b divides a.
UOpRef fold_nested_divmod(const Match& m, const UOpRef& n) {
  const UOpRef& inner = m["inner"];
  int64_t a = cval(inner->src[1]), b = cval(m["c"]);
  if (a <= 0 || b <= 0 || bounds(inner->src[0]).lo < 0) return nullptr;
  if (n->op == Ops::IDIV && inner->op == Ops::IDIV) {
    i128 ab = i128(a) * b;
    if (ab > kMax) return nullptr;
    return uop(Ops::IDIV, n->dtype, {inner->src[0], const_int(static_cast<int64_t>(ab), n->dtype)});
  }
  if (n->op == Ops::MOD && inner->op == Ops::MOD && a % b == 0)
    return uop(Ops::MOD, n->dtype, {inner->src[0], m["c"]});
  return nullptr;
}

bool const_is(const UOpRef& x, int64_t v) { return is_const(x) && cval(x) == v; }

}  // namespace

const PatternMatcher& symbolic_simple() {
  static const PatternMatcher pm({
      {UPat::op_any_src({Ops::NEG, Ops::NOT, Ops::ADD, Ops::SUB, Ops::MUL, Ops::IDIV, Ops::MOD, Ops::MAX,
                         Ops::CMPLT, Ops::CMPNE, Ops::AND, Ops::OR, Ops::XOR, Ops::WHERE, Ops::CAST}),
       fold_consts, "all-constant integer and bool arithmetic folds to its value"},
      {UPat::op(Ops::ADD, {UPat::any("x"), UPat::cvar("c", DTypeClass::IntOrBool)}),
       [](const Match& m, const UOpRef&) { return const_is(m["c"], 0) ? m["x"] : nullptr; }, "x + 0 is x"},
      {UPat::op(Ops::SUB, {UPat::any("x"), UPat::cvar("c", DTypeClass::IntOrBool)}),
       [](const Match& m, const UOpRef&) { return const_is(m["c"], 0) ? m["x"] : nullptr; }, "x - 0 is x"},
      {UPat::op(Ops::MUL, {UPat::any("x"), UPat::cvar("c", DTypeClass::IntOrBool)}),
       [](const Match& m, const UOpRef& n) -> UOpRef {
         if (const_is(m["c"], 1)) return m["x"];
         if (const_is(m["c"], 0)) return const_int(0, n->dtype);
         return nullptr;
       },
       "x * 1 is x; integer x * 0 is 0"},
      {UPat::op(Ops::SUB, {UPat::any("x"), UPat::any("x")}).cls(DTypeClass::Int),
       [](const Match&, const UOpRef& n) { return const_int(0, n->dtype); }, "integer x - x is 0"},
      {UPat::op(Ops::MAX, {UPat::any("x"), UPat::any("x")}),
       [](const Match& m, const UOpRef&) { return m["x"]; }, "max(x, x) is x"},
      {UPat::op(Ops::MAX, {UPat::any("x"), UPat::any("y")}).cls(DTypeClass::Int),
       [](const Match& m, const UOpRef&) -> UOpRef {
         Bounds x = bounds(m["x"]), y = bounds(m["y"]);
         if (x.lo >= y.hi) return m["x"];
         if (y.lo >= x.hi) return m["y"];
         return nullptr;
       },
       "max of integers whose bounds do not overlap is the larger one"},
      {UPat::ops({Ops::CMPLT, Ops::CMPNE}, {UPat::any(), UPat::any()}), fold_cmp_by_bounds,
       "integer comparisons whose bounds decide them are constants"},
      {UPat::op(Ops::AND, {UPat::any("x"), UPat::cvar("c", DTypeClass::Bool)}),
       [](const Match& m, const UOpRef&) { return cval(m["c"]) ? m["x"] : m["c"]; }, "x and true is x; x and false is false"},
      {UPat::op(Ops::OR, {UPat::any("x"), UPat::cvar("c", DTypeClass::Bool)}),
       [](const Match& m, const UOpRef&) { return cval(m["c"]) ? m["c"] : m["x"]; }, "x or false is x; x or true is true"},
      {UPat::op(Ops::AND, {UPat::any("x"), UPat::any("x")}),
       [](const Match& m, const UOpRef&) { return m["x"]; }, "x and x is x"},
      {UPat::op(Ops::WHERE, {UPat::cvar("c"), UPat::any("a"), UPat::any("b")}),
       [](const Match& m, const UOpRef&) { return cval(m["c"]) ? m["a"] : m["b"]; }, "where on a constant picks a side"},
      {UPat::op(Ops::WHERE, {UPat::any(), UPat::any("a"), UPat::any("a")}),
       [](const Match& m, const UOpRef&) { return m["a"]; }, "where with equal sides is that side"},
      {UPat::op(Ops::NOT, {UPat::op(Ops::NOT, {UPat::any("x")})}),
       [](const Match& m, const UOpRef&) { return m["x"]; }, "not not x is x"},
  });
  return pm;
}

const PatternMatcher& symbolic() {
  static const PatternMatcher pm =
      symbolic_simple() +
      PatternMatcher({
          {UPat::ops({Ops::IDIV, Ops::MOD}, {UPat::ops({Ops::IDIV, Ops::MOD}, {UPat::any(), UPat::cvar()}, "inner"),
                                             UPat::cvar("c", DTypeClass::Int)}),
           fold_nested_divmod, "nested division and modulo by constants combine"},
          {UPat::ops({Ops::IDIV, Ops::MOD}, {UPat::any("x"), UPat::cvar("c", DTypeClass::Int)}), fold_divmod,
           "x // c and x % c split x into multiples of c and a remainder bounded by c"},
          {UPat::op_any_src({Ops::ADD, Ops::SUB, Ops::NEG, Ops::MUL}).cls(DTypeClass::Int), to_affine,
           "index sums take one canonical affine form, so equal indices are equal nodes"},
      });
  return pm;
}

}  // namespace polygrad
