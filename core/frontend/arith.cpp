#include "core/frontend/arith.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/basic_math.h"
#include "core/frontend/composites.h"
#include "core/frontend/expr.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

absl::Status same_operands(const UOpRef& a, const UOpRef& b, const char* what) {
  if (a->dtype == b->dtype && a->shape == b->shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " operands differ in dtype or shape: ", dtype_name(a->dtype), " (",
                                                 absl::StrJoin(a->shape, ", "), ") vs ", dtype_name(b->dtype), " (",
                                                 absl::StrJoin(b->shape, ", "), ")"));
}

absl::Status numeric_operands(const UOpRef& a, const UOpRef& b, const char* what) {
  if (auto s = same_operands(a, b, what); !s.ok()) return s;
  if (a->dtype != DType::Bool) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " needs integer or float tensors, got bool"));
}

// Where a truncated division's quotient is one above the floored one: a nonzero remainder r
// whose sign differs from the divisor's.
UOpRef truncated_above_floor(Expr& e, const UOpRef& r, const UOpRef& b) {
  UOpRef r_nonzero = e.op(Ops::CMPNE, {r, e.c(0.0)});
  UOpRef signs_differ = e.op(Ops::CMPNE, {e.lt(r, 0.0), e.lt(b, 0.0)});
  return e.op(Ops::AND, {r_nonzero, signs_differ});
}

// a - q * b for a rounded quotient q of float operands.
absl::StatusOr<UOpRef> float_remainder(const UOpRef& a, const UOpRef& b, const UOpRef& q) {
  PG_ASSIGN(qb, alu(Ops::MUL, {q, b}));
  return alu(Ops::SUB, {a, qb});
}

// The value of a constant tensor, seen through the reshapes and expands that broadcast it.
std::optional<double> constant_value(UOpRef x) {
  while (x->op == Ops::EXPAND || x->op == Ops::RESHAPE) x = x->src[0];
  if (x->op != Ops::CONST) return std::nullopt;
  if (const auto* d = std::get_if<double>(&x->arg)) return *d;
  const int64_t v = x->arg_int();
  if (dtype_is_unsigned(x->dtype) && v < 0) return std::nullopt;  // above int64's range
  return static_cast<double>(v);
}

// base ** n for n >= 0 by square-and-multiply over n's bits.
absl::StatusOr<UOpRef> power_by_bits(const UOpRef& base, uint64_t n) {
  if (n == 0) return constant(int64_t{1}, base->dtype, base->shape);
  UOpRef out, sq = base;
  for (;;) {
    if (n & 1) {
      if (out) {
        PG_ASSIGN(m, alu(Ops::MUL, {out, sq}));
        out = std::move(m);
      } else {
        out = sq;
      }
    }
    n >>= 1;
    if (!n) return out;
    PG_ASSIGN(s2, alu(Ops::MUL, {sq, sq}));
    sq = std::move(s2);
  }
}

}  // namespace

absl::StatusOr<UOpRef> equal(const UOpRef& a, const UOpRef& b) {
  if (auto s = same_operands(a, b, "eq"); !s.ok()) return s;
  PG_ASSIGN(ne, alu(Ops::CMPNE, {a, b}));
  return alu(Ops::NOT, {ne});
}

absl::StatusOr<UOpRef> less_equal(const UOpRef& a, const UOpRef& b) {
  if (auto s = same_operands(a, b, "le"); !s.ok()) return s;
  PG_ASSIGN(lt, alu(Ops::CMPLT, {a, b}));
  PG_ASSIGN(eq, equal(a, b));
  return alu(Ops::OR, {lt, eq});
}

absl::StatusOr<UOpRef> floor_divide(const UOpRef& a, const UOpRef& b) {
  if (auto s = numeric_operands(a, b, "floor_divide"); !s.ok()) return s;
  if (dtype_is_float(a->dtype)) {
    PG_ASSIGN(q, alu(Ops::FDIV, {a, b}));
    return floor(q);
  }
  PG_ASSIGN(q, alu(Ops::IDIV, {a, b}));
  if (dtype_is_unsigned(a->dtype)) return q;
  PG_ASSIGN(r, alu(Ops::MOD, {a, b}));
  Expr e(a->dtype, a->shape);
  UOpRef above = truncated_above_floor(e, r, b);
  PG_ASSIGN(off, e.done(above));
  PG_ASSIGN(step, cast(off, a->dtype));
  return alu(Ops::SUB, {q, step});
}

absl::StatusOr<UOpRef> fmod(const UOpRef& a, const UOpRef& b) {
  if (auto s = numeric_operands(a, b, "fmod"); !s.ok()) return s;
  if (!dtype_is_float(a->dtype)) return alu(Ops::MOD, {a, b});
  PG_ASSIGN(q, alu(Ops::FDIV, {a, b}));
  PG_ASSIGN(t, trunc(q));
  return float_remainder(a, b, t);
}

absl::StatusOr<UOpRef> remainder(const UOpRef& a, const UOpRef& b) {
  if (auto s = numeric_operands(a, b, "remainder"); !s.ok()) return s;
  if (dtype_is_float(a->dtype)) {
    PG_ASSIGN(q, alu(Ops::FDIV, {a, b}));
    PG_ASSIGN(f, floor(q));
    return float_remainder(a, b, f);
  }
  PG_ASSIGN(r, alu(Ops::MOD, {a, b}));
  if (dtype_is_unsigned(a->dtype)) return r;
  Expr e(a->dtype, a->shape);
  return e.done(e.where(truncated_above_floor(e, r, b), e.add(r, b), r));
}

absl::StatusOr<UOpRef> int_pow(const UOpRef& base, const UOpRef& exponent) {
  if (auto s = same_operands(base, exponent, "pow"); !s.ok()) return s;
  if (!dtype_is_int(base->dtype))
    return absl::InvalidArgumentError(absl::StrCat("integer pow needs integer tensors, got ", dtype_name(base->dtype)));
  if (auto n = constant_value(exponent)) {
    if (*n < 0) return absl::InvalidArgumentError("pow: integers to negative integer powers are not allowed");
    if (*n < 18446744073709551616.0) return power_by_bits(base, static_cast<uint64_t>(*n));
  }
  // A tensor of exponents: one square-and-multiply step per bit a non-negative exponent can have.
  Expr e(base->dtype, base->shape);
  const bool is_signed = !dtype_is_unsigned(base->dtype);
  UOpRef negative = is_signed ? e.lt(exponent, 0.0) : nullptr;
  UOpRef rest = is_signed ? e.where(negative, 0.0, exponent) : exponent;
  UOpRef out = e.c(1.0), sq = base;
  const int bits = 8 * static_cast<int>(dtype_itemsize(base->dtype)) - (is_signed ? 1 : 0);
  for (int k = 0; k < bits; ++k) {
    UOpRef bit_set = e.op(Ops::CMPNE, {e.op(Ops::MOD, {rest, e.c(2.0)}), e.c(0.0)});
    out = e.where(bit_set, e.mul(out, sq), out);
    if (k + 1 < bits) {
      rest = e.op(Ops::IDIV, {rest, e.c(2.0)});
      sq = e.mul(sq, sq);
    }
  }
  if (is_signed) {
    // 1 / base truncated: 1 for 1, -1 to an odd power for -1, 0 for the rest (0 included, as torch).
    UOpRef odd = e.op(Ops::CMPNE, {e.op(Ops::MOD, {exponent, e.c(2.0)}), e.c(0.0)});
    UOpRef of_minus_one = e.where(odd, -1.0, e.c(1.0));
    UOpRef reciprocal = e.where(e.eq(base, 1.0), 1.0, e.where(e.eq(base, -1.0), of_minus_one, e.c(0.0)));
    out = e.where(negative, reciprocal, out);
  }
  return e.done(out);
}

std::optional<absl::StatusOr<UOpRef>> pow_by_squaring(const UOpRef& base, const UOpRef& exponent) {
  const std::optional<double> n = constant_value(exponent);
  if (!n || *n != std::trunc(*n) || std::abs(*n) > 64) return std::nullopt;
  if (*n >= 0) return power_by_bits(base, static_cast<uint64_t>(*n));
  auto r = alu(Ops::RECIP, {base});
  if (!r.ok()) return r.status();
  return power_by_bits(*r, static_cast<uint64_t>(-*n));
}

namespace {

// 2^n in x's dtype (wrapping: 2^(bits-1) is a signed dtype's minimum), after the checks both
// shifts make.
absl::StatusOr<UOpRef> shift_power(const UOpRef& x, const UOpRef& n, const char* what) {
  if (auto s = same_operands(x, n, what); !s.ok()) return s;
  if (!dtype_is_int(x->dtype))
    return absl::InvalidArgumentError(absl::StrCat(what, " needs integer tensors, got ", dtype_name(x->dtype)));
  const int bits = 8 * static_cast<int>(dtype_itemsize(x->dtype));
  if (auto v = constant_value(n); v && !(*v >= 0 && *v < bits))
    return absl::InvalidArgumentError(absl::StrCat(what, " takes a shift in [0, ", bits, ") for ",
                                                   dtype_name(x->dtype), ", got ", *v));
  PG_ASSIGN(two, constant(int64_t{2}, x->dtype, x->shape));
  return int_pow(two, n);
}

}  // namespace

absl::StatusOr<UOpRef> shift_left(const UOpRef& x, const UOpRef& n) {
  PG_ASSIGN(power, shift_power(x, n, "<<"));
  return alu(Ops::MUL, {x, power});
}

absl::StatusOr<UOpRef> shift_right(const UOpRef& x, const UOpRef& n) {
  PG_ASSIGN(power, shift_power(x, n, ">>"));
  if (dtype_is_unsigned(x->dtype)) return alu(Ops::IDIV, {x, power});
  // 2^(bits-1) wraps to the (negative) minimum: a shift by bits - 1 is the sign, -1 or 0.
  Expr e(x->dtype, x->shape);
  UOpRef top = e.eq(n, 8.0 * static_cast<double>(dtype_itemsize(x->dtype)) - 1);
  PG_ASSIGN(divisor, e.done(e.where(top, 1.0, power)));
  PG_ASSIGN(q, floor_divide(x, divisor));
  return e.done(e.where(top, e.where(e.lt(x, 0.0), -1.0, e.c(0.0)), q));
}

absl::StatusOr<UOpRef> any(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  PG_ASSIGN(zero, constant(int64_t{0}, x->dtype, x->shape));
  PG_ASSIGN(nonzero, alu(Ops::CMPNE, {x, zero}));
  // MAX over bool as uint8: 0 over no elements, so any of nothing is false.
  PG_ASSIGN(bytes, cast(nonzero, DType::UInt8));
  PG_ASSIGN(m, max(bytes, std::move(axes), keepdim));
  return cast(m, DType::Bool);
}

absl::StatusOr<UOpRef> all(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  PG_ASSIGN(zero, constant(int64_t{0}, x->dtype, x->shape));
  PG_ASSIGN(is_zero, equal(x, zero));
  PG_ASSIGN(some_zero, any(is_zero, std::move(axes), keepdim));
  return alu(Ops::NOT, {some_zero});
}

}  // namespace polygrad::frontend
