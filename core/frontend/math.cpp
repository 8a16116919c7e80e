#include "core/frontend/math.h"

#include <cmath>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/expr.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

constexpr double kLn2 = Expr::kLn2;

absl::Status need_float(const UOpRef& x, const char* what) {
  if (!dtype_is_float(x->dtype))
    return absl::InvalidArgumentError(absl::StrCat(what, " needs a float tensor, got ", dtype_name(x->dtype)));
  return absl::OkStatus();
}

absl::Status need_same(const std::vector<UOpRef>& xs, const char* what) {
  for (const UOpRef& t : xs)
    if (t->dtype != xs[0]->dtype || t->shape != xs[0]->shape)
      return absl::InvalidArgumentError(absl::StrCat(what, " operands differ in dtype or shape: ",
                                                     dtype_name(xs[0]->dtype), " (", absl::StrJoin(xs[0]->shape, ", "),
                                                     ") vs ", dtype_name(t->dtype), " (",
                                                     absl::StrJoin(t->shape, ", "), ")"));
  return absl::OkStatus();
}

// How much wider than its operands a function computes. Functions of the math library compute
// float32 in float64 and round once, so they stay within about half an ulp of the true value
// (torch's float32 libm is within 1-1.5), where float32 steps would compound their roundings to
// several ulp (an exp through exp2(x log2 e) alone loses |x| ulp). Activations, which models
// run over whole tensors, stay in float32. 16-bit floats compute in float32 either way: their
// own precision cannot hold the coefficients, and torch computes them in float32 too.
enum class Work { Activation, Library };

DType work_dtype(DType dt, Work w) {
  if (dt == DType::Float64 || (dt == DType::Float32 && w == Work::Library)) return DType::Float64;
  return DType::Float32;
}

// f over float operands of one dtype and shape, computed in the work dtype and cast back.
template <typename F>
absl::StatusOr<UOpRef> elementwise(const char* what, std::vector<UOpRef> xs, F f, Work w = Work::Library) {
  if (auto s = need_float(xs[0], what); !s.ok()) return s;
  if (auto s = need_same(xs, what); !s.ok()) return s;
  const DType out = xs[0]->dtype, work = work_dtype(out, w);
  for (UOpRef& t : xs) {
    PG_ASSIGN(wt, cast(t, work));
    t = wt;
  }
  Expr e(work, xs[0]->shape);
  PG_ASSIGN(r, e.done(f(e, xs)));
  return cast(r, out);
}

template <typename F>
absl::StatusOr<UOpRef> unary(const char* what, const UOpRef& x, F f, Work w = Work::Library) {
  return elementwise(what, {x}, [&](Expr& e, const std::vector<UOpRef>& xs) { return f(e, xs[0]); }, w);
}

// atan on [0, 0.66]: x + x^3 P(x^2) / Q(x^2) (Cephes atan.c).
UOpRef atan_kernel(Expr& e, const UOpRef& x) {
  UOpRef z = e.mul(x, x);
  UOpRef p = e.poly(z, {-6.485021904942025371773e+01, -1.228866684490136173410e+02, -7.500855792314704667340e+01,
                        -1.615753718733365076637e+01, -8.750608600031904122785e-01});
  UOpRef q = e.poly(z, {1.945506571482613964425e+02, 4.853903996359136964868e+02, 4.328810604912902668951e+02,
                        1.650270098316988542046e+02, 2.485846490142306297962e+01, 1.0});
  return e.add(e.mul(x, e.div(e.mul(z, p), q)), x);
}

UOpRef atan_expr(Expr& e, const UOpRef& x) {
  constexpr double kTan3Pi8 = 2.41421356237309504880, kMoreBits = 6.123233995736765886130e-17;
  UOpRef a = e.abs_odd(x);
  UOpRef small = e.op(Ops::NOT, {e.gt(a, 0.66)}), big = e.gt(a, kTan3Pi8);
  // Each branch's input stays in its own range (see the header).
  UOpRef r_small = atan_kernel(e, e.where(small, a, 0.0));
  UOpRef r_big = e.add(e.c(M_PI / 2 + kMoreBits), e.neg(atan_kernel(e, e.div(e.c(1.0), e.where(big, a, 1.0)))));
  UOpRef am = e.where(e.op(Ops::OR, {small, big}), 1.0, a);
  UOpRef r_mid = e.add(e.c(M_PI / 4 + 0.5 * kMoreBits), atan_kernel(e, e.div(e.sub(am, e.c(1.0)), e.add(am, 1.0))));
  // The kernel turns -0.0 into +0.0; zeros pass through (atan'(0) = 1 keeps the gradient).
  return e.where(e.eq(x, 0.0), x, e.with_sign_of(x, e.where(small, r_small, e.where(big, r_big, r_mid))));
}

UOpRef erf_expr(Expr& e, const UOpRef& x) {
  // FreeBSD msun s_erf.c: a rational function of x^2 below 0.84375, of |x| - 1 below 1.25, and
  // exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / |x| as erfc below 6 (1 from there on).
  constexpr double kErx = 8.45062911510467529297e-01;
  UOpRef a = e.abs_odd(x);
  UOpRef in1 = e.lt(a, 0.84375), in2 = e.lt(a, 1.25), in3 = e.lt(a, 6.0);
  UOpRef t1 = e.where(in1, a, 0.0);
  UOpRef z1 = e.mul(t1, t1);
  UOpRef p1 = e.poly(z1, {1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
                          -5.77027029648944159157e-03, -2.37630166566501626084e-05});
  UOpRef q1 = e.poly(z1, {1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
                          1.32494738004321644526e-04, -3.96022827877536812320e-06});
  UOpRef r1 = e.add(t1, e.mul(t1, e.div(p1, q1)));
  UOpRef s2 = e.sub(e.where(in2, a, 1.0), e.c(1.0));
  UOpRef p2 = e.poly(s2, {-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
                          3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                          -2.16637559486879084300e-03});
  UOpRef q2 = e.poly(s2, {1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
                          1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02});
  UOpRef r2 = e.add(e.c(kErx), e.div(p2, q2));
  UOpRef t3 = e.where(e.op(Ops::AND, {in3, e.op(Ops::NOT, {in2})}), a, 2.0);
  UOpRef x2 = e.mul(t3, t3);
  UOpRef s3 = e.div(e.c(1.0), x2);
  UOpRef ra = e.poly(s3, {-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
                          -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
                          -8.12874355063065934246e+01, -9.81432934416914548592e+00});
  UOpRef sa = e.poly(s3, {1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
                          6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
                          6.57024977031928170135e+00, -6.04244152148580987438e-02});
  UOpRef rb = e.poly(s3, {-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
                          -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
                          -4.83519191608651397019e+02});
  UOpRef sb = e.poly(s3, {1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
                          3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
                          -2.24409524465858183362e+01});
  UOpRef near = e.lt(t3, 1.0 / 0.35);
  UOpRef rs = e.where(near, e.div(ra, sa), e.div(rb, sb));
  UOpRef erfc3 = e.div(e.exp(e.add(e.sub(rs, x2), -0.5625)), t3);
  UOpRef r3 = e.sub(e.c(1.0), erfc3);
  UOpRef r = e.where(in1, r1, e.where(in2, r2, e.where(in3, r3, 1.0)));
  // nan fails every comparison above and would come out as 1.
  return e.where(e.isnan(x), x, e.with_sign_of(x, r));
}

}  // namespace

absl::StatusOr<UOpRef> erf(const UOpRef& x) { return unary("erf", x, erf_expr); }

absl::StatusOr<UOpRef> atan(const UOpRef& x) { return unary("atan", x, atan_expr); }

absl::StatusOr<UOpRef> asin(const UOpRef& x) {
  return unary("asin", x, [](Expr& e, const UOpRef& v) {
    // (1 - x)(1 + x) rather than 1 - x^2: exact factors near ±1. |x| = 1 gives ±inf, whose atan
    // is ±pi/2; |x| > 1 takes the square root of a negative number: nan.
    UOpRef one = e.c(1.0);
    UOpRef s = e.sqrt(e.mul(e.sub(one, v), e.add(one, v)));
    return atan_expr(e, e.div(v, s));
  });
}

absl::StatusOr<UOpRef> acos(const UOpRef& x) {
  return unary("acos", x, [](Expr& e, const UOpRef& v) {
    UOpRef one = e.c(1.0);
    return e.mul(atan_expr(e, e.sqrt(e.div(e.sub(one, v), e.add(one, v)))), 2.0);
  });
}

absl::StatusOr<UOpRef> sinh(const UOpRef& x) {
  return unary("sinh", x, [](Expr& e, const UOpRef& v) {
    // (E + E / (E + 1)) / 2 with E = expm1(|x|) has no cancellation near 0; from |x| = 20 on,
    // e^-|x| is below every dtype's resolution and exp(|x| / 2)^2 / 2 reaches the largest
    // finite results without overflowing first.
    UOpRef a = e.abs_odd(v);
    UOpRef small = e.lt(a, 20.0);
    UOpRef em = e.expm1(e.where(small, a, 0.0));
    UOpRef r_small = e.mul(e.add(em, e.div(em, e.add(em, 1.0))), 0.5);
    UOpRef w = e.exp(e.mul(e.where(small, 40.0, a), 0.5));
    UOpRef r_big = e.mul(e.mul(w, 0.5), w);
    return e.with_sign_of(v, e.where(small, r_small, r_big));
  });
}

absl::StatusOr<UOpRef> cosh(const UOpRef& x) {
  return unary("cosh", x, [](Expr& e, const UOpRef& v) {
    // 1 + E^2 / (2 (1 + E)) with E = expm1(|x|): its gradient has no cancellation near 0 either.
    UOpRef a = e.abs_odd(v);
    UOpRef small = e.lt(a, 20.0);
    UOpRef em = e.expm1(e.where(small, a, 0.0));
    UOpRef r_small = e.add(e.div(e.mul(em, em), e.mul(e.add(em, 1.0), 2.0)), 1.0);
    UOpRef w = e.exp(e.mul(e.where(small, 40.0, a), 0.5));
    UOpRef r = e.where(small, r_small, e.mul(e.mul(w, 0.5), w));
    return e.where(e.isnan(v), v, r);
  });
}

absl::StatusOr<UOpRef> asinh(const UOpRef& x) {
  return unary("asinh", x, [](Expr& e, const UOpRef& v) {
    // log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (msun s_asinh.c); from 2^28 on, sqrt(1 + x^2) is
    // |x| in every dtype and x^2 may overflow: log(|x|) + log(2).
    UOpRef a = e.abs_odd(v);
    UOpRef big = e.gt(a, 268435456.0);
    UOpRef s = e.where(big, 1.0, a);
    UOpRef s2 = e.mul(s, s);
    UOpRef r_small = e.log1p(e.add(s, e.div(s2, e.add(e.sqrt(e.add(s2, 1.0)), 1.0))));
    UOpRef r_big = e.add(e.log(e.where(big, a, 1.0)), kLn2);
    // -0.0 + 0.0 above is +0.0: zeros are passed through (asinh'(0) = 1 keeps the gradient).
    return e.where(e.eq(v, 0.0), v, e.with_sign_of(v, e.where(big, r_big, r_small)));
  });
}

absl::StatusOr<UOpRef> acosh(const UOpRef& x) {
  return unary("acosh", x, [](Expr& e, const UOpRef& v) {
    // log1p(t + sqrt(2t + t^2)) with t = x - 1 (exact near 1). Below 1 the result is nan (the
    // root alone would not say so below -1), through log(x + sqrt(x^2 - 1)) + nan, whose
    // gradient is torch's 1/sqrt(x^2 - 1) (finite below -1). From 2^28 on, log(x) + log(2).
    UOpRef big = e.gt(v, 268435456.0), below = e.lt(v, 1.0);
    UOpRef t = e.sub(e.where(e.op(Ops::OR, {big, below}), 2.0, v), e.c(1.0));
    UOpRef r_small = e.log1p(e.add(t, e.sqrt(e.add(e.mul(t, 2.0), e.mul(t, t)))));
    UOpRef r_big = e.add(e.log(e.where(big, v, 2.0)), kLn2);
    UOpRef vb = e.where(below, v, -2.0);  // the branch not taken sees a point of finite slope
    UOpRef r_below = e.add(e.log(e.add(vb, e.sqrt(e.sub(e.mul(vb, vb), e.c(1.0))))), NAN);
    return e.where(below, r_below, e.where(big, r_big, r_small));
  });
}

absl::StatusOr<UOpRef> atanh(const UOpRef& x) {
  return unary("atanh", x, [](Expr& e, const UOpRef& v) {
    // log1p(2|x| / (1 - |x|)) / 2: inf at |x| = 1, the log of a negative number beyond.
    UOpRef a = e.abs_odd(v);
    UOpRef r = e.mul(e.log1p(e.div(e.mul(a, 2.0), e.sub(e.c(1.0), a))), 0.5);
    return e.with_sign_of(v, r);
  });
}

absl::StatusOr<UOpRef> log10(const UOpRef& x) {
  return unary("log10", x, [](Expr& e, const UOpRef& v) {
    return e.mul(e.op(Ops::LOG2, {v}), 0.30102999566398119521);
  });
}

absl::StatusOr<UOpRef> log1p(const UOpRef& x) {
  return unary("log1p", x, [](Expr& e, const UOpRef& v) { return e.log1p(v); });
}

absl::StatusOr<UOpRef> expm1(const UOpRef& x) {
  return unary("expm1", x, [](Expr& e, const UOpRef& v) { return e.expm1(v); });
}

absl::StatusOr<UOpRef> softsign(const UOpRef& x) {
  return unary("softsign", x, [](Expr& e, const UOpRef& v) { return e.div(v, e.add(e.abs_tie(v), 1.0)); },
               Work::Activation);
}

namespace {

// -E / (2 + E) with E = expm1(-2|x|), signed like x: 2 sigmoid(2x) - 1 cancels to nothing near 0
// (tanh(1e-5) lost every digit in float32), and E never overflows. |x| and the sign go through
// WHERE, so the slope at 0 is 1 and -0.0 stays -0.0.
UOpRef tanh_expr(Expr& e, const UOpRef& v) {
  UOpRef em = e.expm1(e.mul(e.abs_odd(v), -2.0));
  return e.with_sign_of(v, e.div(e.neg(em), e.add(em, 2.0)));
}

// The exp only sees inputs up to the threshold, so the branch not taken cannot overflow and turn
// its zero gradient into nan. WHERE rather than a min: at beta * x equal to the threshold the
// whole gradient flows through the log branch, as in torch.
UOpRef softplus_expr(Expr& e, const UOpRef& v, double beta, double threshold) {
  UOpRef bx = e.mul(v, beta);
  UOpRef over = e.gt(bx, threshold);
  UOpRef r = e.mul(e.log1p(e.exp(e.where(over, 0.0, bx))), 1.0 / beta);
  return e.where(over, v, r);
}

// composites.cpp's sigmoid: from E = exp(-|x|), which never overflows, 1 / (1 + E) for x >= 0 and
// E / (1 + E) below; -|x| is selected, so the slope at 0 is 1/4.
UOpRef sigmoid_expr(Expr& e, const UOpRef& v) {
  UOpRef below = e.lt(v, 0.0);
  UOpRef ex = e.exp(e.where(below, v, e.neg(v)));
  UOpRef pos = e.recip(e.add(ex, 1.0));
  return e.where(below, e.mul(ex, pos), pos);
}

// +0.0 at either zero of x, with slope 1 and curvature 0: z * z * 0 + z (+0.0 + -0.0 is +0.0; a
// constant 0 added would be folded away) of z, which is x at its zeros and 0 elsewhere, so that
// no infinite or nan x meets the zero gradient of the branch not taken (0 * inf is nan).
UOpRef zero_of(Expr& e, const UOpRef& v, const UOpRef& is_zero) {
  UOpRef z = e.where(is_zero, v, 0.0);
  return e.add(e.mul(e.mul(z, z), 0.0), z);
}

// x for x > 0, alpha * expm1(x * input_scale) otherwise; the negative side sees no positive
// input. At either zero torch gives +0.0 with slope 1 and curvature 0 (its positive side).
UOpRef elu_expr(Expr& e, const UOpRef& v, double alpha, double input_scale) {
  UOpRef pos = e.gt(v, 0.0);
  UOpRef n = e.where(pos, 0.0, v);
  UOpRef r = e.where(pos, v, e.mul(e.expm1(e.mul(n, input_scale)), alpha));
  UOpRef is_zero = e.eq(v, 0.0);
  return e.where(is_zero, zero_of(e, v, is_zero), r);
}

}  // namespace

absl::StatusOr<UOpRef> celu(const UOpRef& x, double alpha) {
  if (alpha == 0 || !std::isfinite(alpha))
    return absl::InvalidArgumentError(absl::StrCat("celu needs a finite nonzero alpha, got ", alpha));
  return unary("celu", x, [&](Expr& e, const UOpRef& v) { return elu_expr(e, v, alpha, 1.0 / alpha); },
               Work::Activation);
}

absl::StatusOr<UOpRef> selu(const UOpRef& x) {
  constexpr double kAlpha = 1.6732632423543772848170429916717, kScale = 1.0507009873554804934193349852946;
  return unary("selu", x, [](Expr& e, const UOpRef& v) { return e.mul(elu_expr(e, v, kAlpha, 1.0), kScale); },
               Work::Activation);
}

absl::StatusOr<UOpRef> softplus(const UOpRef& x, double beta, double threshold) {
  if (beta == 0 || !std::isfinite(beta))
    return absl::InvalidArgumentError(absl::StrCat("softplus needs a finite nonzero beta, got ", beta));
  if (std::isnan(threshold)) return absl::InvalidArgumentError("softplus needs a threshold that is not nan");
  return unary("softplus", x, [&](Expr& e, const UOpRef& v) { return softplus_expr(e, v, beta, threshold); },
               Work::Activation);
}

namespace {

// bound where it is past x (or nan), x elsewhere: WHERE, not MAX, so that a tie gives x the
// whole gradient (MAX would split it).
absl::StatusOr<UOpRef> clamp(const char* what, const UOpRef& x, const UOpRef& bound, bool upper) {
  if (auto s = need_same({x, bound}, what); !s.ok()) return s;
  if (x->dtype == DType::Bool) return absl::InvalidArgumentError(absl::StrCat(what, " does not take bool tensors"));
  Expr e(x->dtype, x->shape);
  UOpRef past = upper ? e.lt(bound, x) : e.lt(x, bound);
  UOpRef r = e.where(e.op(Ops::OR, {past, e.isnan(bound)}), bound, x);
  // A nan x gives a constant nan, so that no gradient flows from it (torch's mask x >= lo fails).
  if (dtype_is_float(x->dtype)) r = e.where(e.isnan(x), NAN, r);
  return e.done(r);
}

}  // namespace

absl::StatusOr<UOpRef> clamp_min(const UOpRef& x, const UOpRef& lo) { return clamp("clamp_min", x, lo, false); }
absl::StatusOr<UOpRef> clamp_max(const UOpRef& x, const UOpRef& hi) { return clamp("clamp_max", x, hi, true); }

absl::StatusOr<UOpRef> tanh(const UOpRef& x) {
  return unary("tanh", x, tanh_expr, Work::Activation);
}

namespace {

// sin(pi/2 - x), with pi/2 in two parts: the difference is exact for |x| up to pi (Sterbenz), so
// cos keeps its digits next to its zeros there (cos(pi/2 in float64) is 6.12e-17, as torch's).
UOpRef cos_expr(Expr& e, const UOpRef& v) {
  constexpr double kPio2Hi = 1.5707963267948966, kPio2Lo = 6.123233995736766e-17;
  return e.op(Ops::SIN, {e.add(e.sub(e.c(kPio2Hi), v), kPio2Lo)});
}

// torch's hardtanh: lo below lo, hi above hi, x between and where it equals a bound (so relu6 of
// -0.0 is -0.0), with no gradient at a bound: there x * 0 (its signed zero) when the bound is 0,
// else the bound. A nan passes through with its gradient, as in torch.
UOpRef hardtanh_expr(Expr& e, const UOpRef& v, double lo, double hi) {
  UOpRef at_lo = e.eq(v, lo), at_hi = e.eq(v, hi);
  UOpRef tie = e.where(at_lo, lo == 0 ? e.mul(v, 0.0) : e.c(lo), hi == 0 ? e.mul(v, 0.0) : e.c(hi));
  UOpRef r = e.where(e.op(Ops::OR, {at_lo, at_hi}), tie, v);
  return e.where(e.lt(v, lo), e.c(lo), e.where(e.gt(v, hi), e.c(hi), r));
}

}  // namespace

absl::StatusOr<UOpRef> rsqrt(const UOpRef& x) {
  // Two roundings in the source's dtype (16-bit floats in float32), as torch computes it.
  return unary("rsqrt", x, [](Expr& e, const UOpRef& v) { return e.recip(e.sqrt(v)); }, Work::Activation);
}

absl::StatusOr<UOpRef> cos(const UOpRef& x) { return unary("cos", x, cos_expr); }

absl::StatusOr<UOpRef> tan(const UOpRef& x) {
  return unary("tan", x, [](Expr& e, const UOpRef& v) { return e.div(e.op(Ops::SIN, {v}), cos_expr(e, v)); });
}

absl::StatusOr<UOpRef> relu6(const UOpRef& x) {
  return unary("relu6", x, [](Expr& e, const UOpRef& v) { return hardtanh_expr(e, v, 0.0, 6.0); }, Work::Activation);
}

absl::StatusOr<UOpRef> hardtanh(const UOpRef& x, double min_val, double max_val) {
  if (!(min_val <= max_val))
    return absl::InvalidArgumentError(
        absl::StrCat("hardtanh needs min_val <= max_val, got ", min_val, " and ", max_val));
  return unary("hardtanh", x, [&](Expr& e, const UOpRef& v) { return hardtanh_expr(e, v, min_val, max_val); },
               Work::Activation);
}

absl::StatusOr<UOpRef> leaky_relu(const UOpRef& x, double neg_slope) {
  // A nan and both zeros take the negative side (-0.0 stays -0.0; the slope at 0 is neg_slope).
  return unary("leaky_relu", x, [&](Expr& e, const UOpRef& v) { return e.where(e.gt(v, 0.0), v, e.mul(v, neg_slope)); },
               Work::Activation);
}

absl::StatusOr<UOpRef> elu(const UOpRef& x, double alpha) {
  return unary("elu", x, [&](Expr& e, const UOpRef& v) {
    // torch's sides: alpha * expm1(x) for x <= 0, which sees no positive input, and x for the rest
    // (a nan with its gradient). At either zero the value is +0.0 * alpha with slope alpha (torch
    // takes the negative side there).
    UOpRef neg = e.le(v, 0.0);
    UOpRef r = e.where(neg, e.mul(e.expm1(e.where(neg, v, 0.0)), alpha), v);
    UOpRef is_zero = e.eq(v, 0.0);
    return e.where(is_zero, e.mul(zero_of(e, v, is_zero), alpha), r);
  }, Work::Activation);
}

absl::StatusOr<UOpRef> quick_gelu(const UOpRef& x) {
  return unary("quick_gelu", x, [](Expr& e, const UOpRef& v) { return e.mul(v, sigmoid_expr(e, e.mul(v, 1.702))); },
               Work::Activation);
}

absl::StatusOr<UOpRef> mish(const UOpRef& x) {
  return unary("mish", x, [](Expr& e, const UOpRef& v) {
    return e.mul(v, tanh_expr(e, softplus_expr(e, v, 1.0, 20.0)));
  }, Work::Activation);
}

absl::StatusOr<UOpRef> hardsigmoid(const UOpRef& x, double alpha, double beta) {
  return unary("hardsigmoid", x, [&](Expr& e, const UOpRef& v) {
    // a = alpha x + beta between 0 and 1, else the constant 0 or 1 (nan for a nan): no gradient
    // at the kinks or through a nan, as torch's hardsigmoid.
    UOpRef a = e.add(e.mul(v, alpha), beta);
    UOpRef inside = e.op(Ops::AND, {e.gt(a, 0.0), e.lt(a, 1.0)});
    return e.where(inside, a, e.where(e.ge(a, 1.0), e.c(1.0), e.where(e.le(a, 0.0), e.c(0.0), e.c(NAN))));
  }, Work::Activation);
}

absl::StatusOr<UOpRef> hardswish(const UOpRef& x) {
  return unary("hardswish", x, [](Expr& e, const UOpRef& v) {
    // torch's x * min(max(x + 3, 0), 6) / 6, its clamp selected so that the gradient is torch's:
    // 0 below -3, (2x + 3) / 6 from -3 to 3 (-1/2 and 3/2 at the ends), 1 above and for a nan.
    UOpRef c = e.where(e.lt(v, -3.0), 0.0, e.where(e.le(v, 3.0), e.add(v, 3.0), 6.0));
    return e.div(e.mul(v, c), e.c(6.0));
  }, Work::Activation);
}

absl::StatusOr<UOpRef> logsigmoid(const UOpRef& x) {
  return unary("logsigmoid", x, [](Expr& e, const UOpRef& v) {
    // torch's min(x, 0) - log1p(exp(-|x|)): nothing overflows on either side; |x| through WHERE,
    // so the slope at 0 is 1/2.
    UOpRef m = e.where(e.lt(v, 0.0), v, 0.0);
    return e.sub(m, e.log1p(e.exp(e.neg(e.abs_odd(v)))));
  }, Work::Activation);
}

absl::StatusOr<UOpRef> logaddexp(const UOpRef& a, const UOpRef& b) {
  return elementwise("logaddexp", {a, b}, [](Expr& e, const std::vector<UOpRef>& v) {
    // max + log1p(exp(-|a - b|)). Two equal infinities differ by nan: their result is the
    // infinity itself. |a - b| is MAX-based so that a tie splits the gradient 1/2, 1/2.
    UOpRef same_inf = e.op(Ops::AND, {e.eq(v[0], v[1]), e.eq(e.abs_tie(v[0]), INFINITY)});
    UOpRef d = e.where(same_inf, 0.0, e.sub(v[0], v[1]));
    UOpRef r = e.add(e.max(v[0], v[1]), e.log1p(e.exp(e.neg(e.abs_tie(d)))));
    return e.where(same_inf, v[0], r);
  });
}

absl::StatusOr<UOpRef> copysign(const UOpRef& a, const UOpRef& b) {
  if (auto s = need_float(a, "copysign"); !s.ok()) return s;
  if (auto s = need_same({a, b}, "copysign"); !s.ok()) return s;
  // Sign bits read through a bitcast to the signed integer of the same size, so -0.0 and
  // negative nans count; the bitcast passes no gradient, as torch's copysign gives none to b.
  const size_t size = dtype_itemsize(a->dtype);
  const DType bits = size == 8 ? DType::Int64 : size == 4 ? DType::Int32 : DType::Int16;
  PG_ASSIGN(ia, bitcast(a, bits));
  PG_ASSIGN(ib, bitcast(b, bits));
  PG_ASSIGN(zero_bits, constant(int64_t{0}, bits, a->shape));
  PG_ASSIGN(neg_a, alu(Ops::CMPLT, {ia, zero_bits}));
  PG_ASSIGN(neg_b, alu(Ops::CMPLT, {ib, zero_bits}));
  PG_ASSIGN(flip, alu(Ops::CMPNE, {neg_a, neg_b}));
  Expr e(a->dtype, a->shape);
  // A zero magnitude takes a constant signed zero, so its gradient is 0 as in torch.
  UOpRef zero = e.where(neg_b, -0.0, e.c(0.0));
  return e.done(e.where(e.eq(a, 0.0), zero, e.where(flip, e.neg(a), a)));
}

absl::StatusOr<UOpRef> lerp(const UOpRef& start, const UOpRef& end, const UOpRef& weight) {
  return elementwise("lerp", {start, end, weight}, [](Expr& e, const std::vector<UOpRef>& v) {
    UOpRef diff = e.sub(v[1], v[0]);
    UOpRef near_start = e.lt(e.abs_tie(v[2]), 0.5);
    UOpRef from_start = e.add(v[0], e.mul(v[2], diff));
    UOpRef from_end = e.sub(v[1], e.mul(diff, e.sub(e.c(1.0), v[2])));
    return e.where(near_start, from_start, from_end);
  }, Work::Activation);
}

absl::StatusOr<UOpRef> gelu_erf(const UOpRef& x) {
  return unary("gelu", x, [](Expr& e, const UOpRef& v) {
    return e.mul(e.mul(v, 0.5), e.add(erf_expr(e, e.mul(v, M_SQRT1_2)), 1.0));
  });
}

absl::StatusOr<UOpRef> isfinite(const UOpRef& x) {
  if (!dtype_is_float(x->dtype)) return constant(int64_t{1}, DType::Bool, x->shape);
  Expr e(x->dtype, x->shape);
  // x - x is 0 for finite x and nan for inf and nan.
  return e.done(e.eq(e.sub(x, x), 0.0));
}

absl::StatusOr<UOpRef> isclose(const UOpRef& a_in, const UOpRef& b_in, double rtol, double atol, bool equal_nan) {
  if (auto s = need_same({a_in, b_in}, "isclose"); !s.ok()) return s;
  if (!(rtol >= 0) || !(atol >= 0))
    return absl::InvalidArgumentError(absl::StrCat("isclose needs rtol >= 0 and atol >= 0, got ", rtol, " and ", atol));
  if (a_in->dtype == DType::Bool) {
    PG_ASSIGN(ne, alu(Ops::CMPNE, {a_in, b_in}));
    return alu(Ops::NOT, {ne});
  }
  const DType work = dtype_is_float(a_in->dtype) ? work_dtype(a_in->dtype, Work::Activation) : DType::Float64;
  PG_ASSIGN(a, cast(a_in, work));
  PG_ASSIGN(b, cast(b_in, work));
  Expr e(work, a->shape);
  UOpRef diff = e.abs_tie(e.sub(a, b));
  UOpRef allowed = e.add(e.mul(e.abs_tie(b), rtol), atol);
  // A nan or infinite difference is never within tolerance; equal infinities are caught by ==.
  UOpRef within = e.op(Ops::AND, {e.eq(e.sub(diff, diff), 0.0), e.op(Ops::NOT, {e.lt(allowed, diff)})});
  UOpRef close = e.op(Ops::OR, {e.eq(a, b), within});
  if (equal_nan) close = e.op(Ops::OR, {close, e.op(Ops::AND, {e.isnan(a), e.isnan(b)})});
  return e.done(close);
}

}  // namespace polygrad::frontend
