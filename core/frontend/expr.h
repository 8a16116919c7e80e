// An elementwise expression builder over tensors of one dtype and shape, for the composites
// whose formulas are many small steps (math.cpp, optimizers.cpp).
#pragma once

#include <initializer_list>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/frontend/tensor_ops.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Builds an elementwise expression over tensors of one dtype and shape. The inputs are checked
// before an expression is built, so no step can fail; should one still, its error is kept,
// every later step yields null, and done() returns the first error.
class Expr {
 public:
  static constexpr double kLog2E = 1.4426950408889634;
  static constexpr double kLn2 = 0.6931471805599453;

  Expr(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {}

  UOpRef c(double v) { return keep(constant(v, dtype_, shape_)); }
  UOpRef op(Ops o, std::initializer_list<UOpRef> src) {
    for (const UOpRef& s : src)
      if (!s) return nullptr;
    return keep(alu(o, std::vector<UOpRef>(src)));
  }
  UOpRef add(const UOpRef& a, const UOpRef& b) { return op(Ops::ADD, {a, b}); }
  UOpRef sub(const UOpRef& a, const UOpRef& b) { return op(Ops::SUB, {a, b}); }
  UOpRef mul(const UOpRef& a, const UOpRef& b) { return op(Ops::MUL, {a, b}); }
  UOpRef div(const UOpRef& a, const UOpRef& b) { return op(Ops::FDIV, {a, b}); }
  UOpRef add(const UOpRef& a, double b) { return add(a, c(b)); }
  UOpRef mul(const UOpRef& a, double b) { return mul(a, c(b)); }
  UOpRef neg(const UOpRef& a) { return op(Ops::NEG, {a}); }
  UOpRef sqrt(const UOpRef& a) { return op(Ops::SQRT, {a}); }
  UOpRef recip(const UOpRef& a) { return op(Ops::RECIP, {a}); }
  UOpRef lt(const UOpRef& a, const UOpRef& b) { return op(Ops::CMPLT, {a, b}); }
  UOpRef lt(const UOpRef& a, double b) { return lt(a, c(b)); }
  UOpRef gt(const UOpRef& a, double b) { return lt(c(b), a); }
  UOpRef le(const UOpRef& a, double b) { return op(Ops::OR, {lt(a, b), eq(a, b)}); }
  UOpRef ge(const UOpRef& a, double b) { return op(Ops::OR, {gt(a, b), eq(a, b)}); }
  UOpRef eq(const UOpRef& a, const UOpRef& b) { return op(Ops::NOT, {op(Ops::CMPNE, {a, b})}); }
  UOpRef eq(const UOpRef& a, double b) { return eq(a, c(b)); }
  UOpRef isnan(const UOpRef& a) { return op(Ops::CMPNE, {a, a}); }
  UOpRef where(const UOpRef& cond, const UOpRef& a, const UOpRef& b) { return op(Ops::WHERE, {cond, a, b}); }
  UOpRef where(const UOpRef& cond, const UOpRef& a, double b) { return where(cond, a, c(b)); }
  UOpRef where(const UOpRef& cond, double a, const UOpRef& b) { return where(cond, c(a), b); }
  UOpRef max(const UOpRef& a, const UOpRef& b) { return op(Ops::MAX, {a, b}); }
  // |x| through MAX, whose gradient at 0 is 0 (ties share it).
  UOpRef abs_tie(const UOpRef& x) { return max(x, neg(x)); }
  // |x| through WHERE, whose gradient at 0 is 1: odd functions built as sign(x) f(|x|) then
  // keep their slope at 0. -0.0 stays -0.0, so f(-0.0) can keep its sign.
  UOpRef abs_odd(const UOpRef& x) { return where(lt(x, 0.0), neg(x), x); }
  UOpRef with_sign_of(const UOpRef& x, const UOpRef& r) { return where(lt(x, 0.0), neg(r), r); }
  UOpRef exp(const UOpRef& x) { return op(Ops::EXP2, {mul(x, kLog2E)}); }
  UOpRef log(const UOpRef& x) { return mul(op(Ops::LOG2, {x}), kLn2); }
  // c[0] + x * (c[1] + x * (c[2] + ...)).
  UOpRef poly(const UOpRef& x, std::initializer_list<double> coeffs) {
    const double* p = std::data(coeffs) + coeffs.size();
    UOpRef r = c(*--p);
    while (p != std::data(coeffs)) r = add(mul(r, x), *--p);
    return r;
  }

  // log1p and expm1: below |x| = 0.5, where 1 + x or exp(x) - 1 would cancel, the rounding of u
  // (1 + x or exp(x)) is cancelled by the same u in a second place; above, the plain formula is
  // accurate, and so is its gradient (which the corrected one is not: there it subtracts two
  // nearly equal terms). Each side sees only inputs of its own range. Where u rounds to 1 the
  // value is x; it is written x (1 -+ x / 2) (the same value there, -0.0 included) so that the
  // second derivative at 0 is right too.
  UOpRef log1p(const UOpRef& x) {
    UOpRef small = lt(abs_tie(x), 0.5);
    // log(u) * x / (u - 1) with u = 1 + x (Goldberg).
    UOpRef xs = where(small, x, 0.25);
    UOpRef u = add(xs, 1.0);
    UOpRef d = sub(u, c(1.0));
    UOpRef d0 = eq(d, 0.0);
    UOpRef tiny = mul(xs, add(mul(xs, -0.5), 1.0));
    UOpRef r_small = where(d0, tiny, mul(log(u), div(xs, where(d0, 1.0, d))));
    return where(small, r_small, log(add(where(small, 1.0, x), 1.0)));
  }

  UOpRef expm1(const UOpRef& x) {
    UOpRef small = lt(abs_tie(x), 0.5);
    // (u - 1) * x / log(u) with u = exp(x) (Kahan).
    UOpRef xs = where(small, x, 0.25);
    UOpRef u = exp(xs);
    UOpRef d = sub(u, c(1.0));
    UOpRef d0 = eq(d, 0.0);
    UOpRef tiny = mul(xs, add(mul(xs, 0.5), 1.0));
    UOpRef r_small = where(d0, tiny, mul(d, div(xs, log(where(d0, 2.0, u)))));
    return where(small, r_small, sub(exp(where(small, 1.0, x)), c(1.0)));
  }

  absl::StatusOr<UOpRef> done(const UOpRef& r) {
    if (!status_.ok()) return status_;
    return r;
  }

 private:
  UOpRef keep(absl::StatusOr<UOpRef> r) {
    if (r.ok()) return *std::move(r);
    if (status_.ok()) status_ = r.status();
    return nullptr;
  }

  DType dtype_;
  Shape shape_;
  absl::Status status_;
};

}  // namespace polygrad::frontend
