#include "core/frontend/basic_math.h"

#include <cmath>
#include <cstdint>

#include "core/frontend/expr.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {

// Its bits read back: no gradient passes a BITCAST.
absl::StatusOr<UOpRef> detached(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return x;  // nothing flows back through the others
  PG_ASSIGN(b, bitcast(x, uint_of_size(dtype_itemsize(x->dtype))));
  return bitcast(b, x->dtype);
}

namespace {

// From this magnitude on, every value of the float dtype is an integer: 2^(its mantissa bits).
double integral_from(DType dt) {
  switch (dt) {
    case DType::Float16: return 1024.0;
    case DType::BFloat16: return 128.0;
    case DType::Float32: return 8388608.0;
    default: return 4503599627370496.0;
  }
}

// An integral result r of x that is zero takes x's sign, as torch's (trunc(-0.5) is -0.0).
UOpRef keep_sign_of_zero(Expr& e, const UOpRef& x, const UOpRef& r) { return e.where(e.eq(r, 0.0), e.mul(x, 0.0), r); }

// trunc of a float tensor. Only magnitudes below integral_from go through int64, so no value
// overflows it (nor does inf or nan reach the cast: they and the large values are their own).
absl::StatusOr<UOpRef> trunc_float(const UOpRef& x) {
  Expr e(x->dtype, x->shape);
  UOpRef small = e.lt(e.abs_odd(x), integral_from(x->dtype));
  PG_ASSIGN(inside, e.done(e.where(small, x, 0.0)));
  PG_ASSIGN(i, cast(inside, DType::Int64));
  PG_ASSIGN(back, cast(i, x->dtype));
  return e.done(keep_sign_of_zero(e, x, e.where(small, back, x)));
}

absl::StatusOr<UOpRef> floor_float(const UOpRef& x) {
  PG_ASSIGN(t, trunc_float(x));
  Expr e(x->dtype, x->shape);
  return e.done(e.where(e.lt(x, t), e.add(t, -1.0), t));
}

UOpRef ne_zero(Expr& e, const UOpRef& x) { return e.op(Ops::CMPNE, {x, e.c(0.0)}); }

absl::StatusOr<UOpRef> all_false(const UOpRef& x) { return constant(int64_t{0}, DType::Bool, x->shape); }

}  // namespace

absl::StatusOr<UOpRef> abs(const UOpRef& x) {
  if (x->dtype == DType::Bool || dtype_is_unsigned(x->dtype)) return x;
  Expr e(x->dtype, x->shape);
  if (!dtype_is_float(x->dtype)) return e.done(e.abs_odd(x));
  // Selected rather than max(x, -x): +0.0 for both zeros, and gradient 0 there (torch's sign(0)).
  PG_ASSIGN(xd, detached(x));
  UOpRef zero_or_nan = e.where(e.isnan(xd), xd, 0.0);
  return e.done(e.where(e.lt(x, 0.0), e.neg(x), e.where(e.gt(x, 0.0), x, zero_or_nan)));
}

absl::StatusOr<UOpRef> sign(const UOpRef& x) {
  if (x->dtype == DType::Bool) return x;
  PG_ASSIGN(xd, detached(x));
  Expr e(x->dtype, x->shape);
  if (dtype_is_unsigned(x->dtype)) return e.done(e.where(ne_zero(e, xd), e.c(1.0), 0.0));
  UOpRef s = e.where(ne_zero(e, xd), e.where(e.lt(xd, 0.0), e.c(-1.0), 1.0), 0.0);
  // A nan's sign is nan (numpy's, tinygrad's); ne_zero is true for it, so it is taken first.
  if (dtype_is_float(x->dtype)) s = e.where(e.isnan(xd), xd, s);
  return e.done(s);
}

absl::StatusOr<UOpRef> square(const UOpRef& x) {
  if (x->dtype == DType::Bool) return x;  // x and x
  return alu(Ops::MUL, {x, x});
}

absl::StatusOr<UOpRef> trunc(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return x;
  PG_ASSIGN(xd, detached(x));
  return trunc_float(xd);
}

absl::StatusOr<UOpRef> floor(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return x;
  PG_ASSIGN(xd, detached(x));
  return floor_float(xd);
}

absl::StatusOr<UOpRef> ceil(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return x;
  PG_ASSIGN(xd, detached(x));
  PG_ASSIGN(t, trunc_float(xd));
  Expr e(x->dtype, x->shape);
  return e.done(e.where(e.lt(t, xd), e.add(t, 1.0), t));
}

absl::StatusOr<UOpRef> round_half_even(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return x;
  PG_ASSIGN(xd, detached(x));
  PG_ASSIGN(lo, floor_float(xd));
  Expr e(x->dtype, x->shape);
  UOpRef half = e.mul(lo, 0.5);  // exact: lo is an integer of the dtype
  PG_ASSIGN(h, e.done(half));
  PG_ASSIGN(th, trunc_float(h));
  // x - lo is exact (lo is within 1 of x and of its dtype); inf - inf is nan, which picks lo.
  UOpRef frac = e.sub(xd, lo), up = e.add(lo, 1.0);
  UOpRef odd = e.op(Ops::CMPNE, {th, h});
  UOpRef r = e.where(e.gt(frac, 0.5), up, e.where(e.lt(frac, 0.5), lo, e.where(odd, up, lo)));
  return e.done(keep_sign_of_zero(e, xd, r));
}

absl::StatusOr<UOpRef> isnan(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return all_false(x);
  return alu(Ops::CMPNE, {x, x});
}

absl::StatusOr<UOpRef> isinf(const UOpRef& x, bool detect_positive, bool detect_negative) {
  if (!dtype_is_float(x->dtype) || !(detect_positive || detect_negative)) return all_false(x);
  Expr e(x->dtype, x->shape);
  UOpRef pos = detect_positive ? e.eq(x, INFINITY) : nullptr, neg = detect_negative ? e.eq(x, -INFINITY) : nullptr;
  return e.done(pos && neg ? e.op(Ops::OR, {pos, neg}) : pos ? pos : neg);
}

}  // namespace polygrad::frontend
