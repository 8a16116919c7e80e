#include "core/frontend/composites.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/arith.h"
#include "core/frontend/basic_math.h"
#include "core/frontend/expr.h"
#include "core/frontend/gradient.h"
#include "core/frontend/math.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

absl::StatusOr<UOpRef> scalar_like(double v, const UOpRef& x) { return constant(v, x->dtype, x->shape); }

absl::StatusOr<UOpRef> scale(const UOpRef& x, double v) {
  PG_ASSIGN(c, scalar_like(v, x));
  return alu(Ops::MUL, {x, c});
}

absl::Status need_float(const UOpRef& x, const char* what) {
  if (!dtype_is_float(x->dtype))
    return absl::InvalidArgumentError(absl::StrCat(what, " needs a float tensor, got ", dtype_name(x->dtype)));
  return absl::OkStatus();
}

std::vector<int64_t> all_axes(const UOpRef& x) {
  std::vector<int64_t> a;
  for (size_t i = 0; i < x->shape.size(); ++i) a.push_back(static_cast<int64_t>(i));
  return a;
}

absl::StatusOr<std::vector<int64_t>> norm_axes(std::vector<int64_t> axes, const UOpRef& x) {
  if (axes.empty()) return all_axes(x);
  int64_t rank = static_cast<int64_t>(x->shape.size());
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is out of range for rank ", rank));
    if (a < 0) a += rank;
  }
  return axes;
}

absl::StatusOr<UOpRef> reduce_keep(Ops op, const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  PG_ASSIGN(ax, norm_axes(std::move(axes), x));
  PG_ASSIGN(r, reduce(op, x, ax));
  if (keepdim) return r;
  Shape out;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (std::find(ax.begin(), ax.end(), static_cast<int64_t>(i)) == ax.end()) out.push_back(x->shape[i]);
  return reshape(r, out);
}

int64_t count(const UOpRef& x, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= x->shape[a];
  return n;
}

}  // namespace

absl::StatusOr<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return absl::InvalidArgumentError(absl::StrCat("shapes (", absl::StrJoin(a, ", "), ") and (", absl::StrJoin(b, ", "),
                                                     ") do not broadcast"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<UOpRef> broadcast_to(const UOpRef& x, const Shape& shape) {
  if (shape.size() < x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast rank ", x->shape.size(), " to rank ", shape.size()));
  Shape padded(shape.size() - x->shape.size(), 1);
  padded.insert(padded.end(), x->shape.begin(), x->shape.end());
  PG_ASSIGN(r, reshape(x, padded));
  return expand(r, shape);
}

absl::StatusOr<UOpRef> arange_from(int64_t n, DType dtype, const UOpRef& start, const UOpRef& step) {
  PG_ASSIGN(counts, arange(n, dtype));
  for (const auto& [t, name] : {std::pair{start, "start"}, std::pair{step, "step"}}) {
    if (t->dtype != dtype)
      return absl::InvalidArgumentError(absl::StrCat("arange's ", name, " must be ", dtype_name(dtype), " (the node's dtype), got ",
                                                     dtype_name(t->dtype)));
  }
  PG_ASSIGN(steps, broadcast_to(step, counts->shape));
  PG_ASSIGN(scaled, alu(Ops::MUL, {counts, steps}));
  PG_ASSIGN(starts, broadcast_to(start, counts->shape));
  return alu(Ops::ADD, {scaled, starts});
}

absl::StatusOr<UOpRef> linspace(int64_t n, double start, double stop, DType dtype) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("linspace needs at least one value, got ", n));
  if (!std::isfinite(start) || !std::isfinite(stop))
    return absl::InvalidArgumentError(absl::StrCat("linspace bounds must be finite, got ", start, " and ", stop));
  const Shape shape{n};
  PG_ASSIGN(i, arange(n, DType::Float64));
  PG_ASSIGN(step, constant(n > 1 ? (stop - start) / static_cast<double>(n - 1) : 0.0, DType::Float64, shape));
  PG_ASSIGN(first, constant(start, DType::Float64, shape));
  PG_ASSIGN(scaled, alu(Ops::MUL, {i, step}));
  PG_ASSIGN(values, alu(Ops::ADD, {scaled, first}));
  if (n == 1) return cast(values, dtype);  // the one value is start
  PG_ASSIGN(last_i, constant(static_cast<double>(n - 1), DType::Float64, shape));
  PG_ASSIGN(is_last, equal(i, last_i));
  PG_ASSIGN(last, constant(stop, DType::Float64, shape));
  PG_ASSIGN(exact, alu(Ops::WHERE, {is_last, last, values}));
  return cast(exact, dtype);
}

absl::StatusOr<UOpRef> eye(int64_t n, int64_t m, DType dtype) {
  PG_ASSIGN(rows, arange(n, DType::Int64));
  PG_ASSIGN(cols, arange(m, DType::Int64));
  PG_ASSIGN(row, reshape(rows, Shape{n, 1}));
  PG_ASSIGN(col, reshape(cols, Shape{1, m}));
  PG_ASSIGN(rs, expand(row, Shape{n, m}));
  PG_ASSIGN(cs, expand(col, Shape{n, m}));
  PG_ASSIGN(diagonal, equal(rs, cs));
  return cast(diagonal, dtype);
}

absl::StatusOr<UOpRef> cat(const std::vector<UOpRef>& xs, int64_t axis) {
  if (xs.empty()) return absl::InvalidArgumentError("cat of no tensors");
  const Shape& first = xs[0]->shape;
  const auto rank = static_cast<int64_t>(first.size());
  if (axis < -rank || axis >= rank)
    return absl::InvalidArgumentError(absl::StrCat("cat: axis ", axis, " is out of range for rank ", rank));
  const auto d = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const UOpRef& x = xs[i];
    if (x->dtype != xs[0]->dtype)
      return absl::InvalidArgumentError(absl::StrCat("cat: source ", i, " is ", dtype_name(x->dtype), ", source 0 is ",
                                                     dtype_name(xs[0]->dtype), " (cast explicitly)"));
    bool fits = x->shape.size() == first.size();
    for (size_t j = 0; fits && j < first.size(); ++j) fits = j == d || x->shape[j] == first[j];
    if (!fits)
      return absl::InvalidArgumentError(absl::StrCat("cat: source ", i, " has shape (", absl::StrJoin(x->shape, ", "),
                                                     "), source 0 (", absl::StrJoin(first, ", "), "): they differ off axis ",
                                                     d));
    total += x->shape[d];
  }
  UOpRef out;
  int64_t offset = 0;
  for (const UOpRef& x : xs) {
    Pairs where_it_lies(first.size(), {0, 0});
    where_it_lies[d] = {offset, total - offset - x->shape[d]};
    offset += x->shape[d];
    PG_ASSIGN(piece, pad(x, where_it_lies));
    if (!out) {
      out = piece;
      continue;
    }
    PG_ASSIGN(ones, constant(int64_t{1}, DType::Bool, x->shape));
    PG_ASSIGN(inside, pad(ones, where_it_lies));
    PG_ASSIGN(joined, alu(Ops::WHERE, {inside, piece, out}));
    out = joined;
  }
  return out;
}

absl::StatusOr<UOpRef> matmul(const UOpRef& a_in, const UOpRef& b_in) {
  if (a_in->shape.empty() || b_in->shape.empty()) return absl::InvalidArgumentError("matmul of a 0-d tensor");
  if (a_in->dtype != b_in->dtype)
    return absl::InvalidArgumentError(absl::StrCat("matmul operands differ in dtype: ", dtype_name(a_in->dtype), " vs ",
                                                   dtype_name(b_in->dtype), " (cast explicitly)"));
  bool a_vec = a_in->shape.size() == 1, b_vec = b_in->shape.size() == 1;
  UOpRef a = a_in, b = b_in;
  if (a_vec) { PG_ASSIGN(r, reshape(a, {1, a->shape[0]})); a = r; }
  if (b_vec) { PG_ASSIGN(r, reshape(b, {b->shape[0], 1})); b = r; }
  int64_t m = a->shape[a->shape.size() - 2], k = a->shape.back();
  int64_t k2 = b->shape[b->shape.size() - 2], n = b->shape.back();
  if (k != k2)
    return absl::InvalidArgumentError(absl::StrCat("matmul inner dimensions differ: ", k, " vs ", k2));
  Shape batch_a(a->shape.begin(), a->shape.end() - 2), batch_b(b->shape.begin(), b->shape.end() - 2);
  PG_ASSIGN(batch, broadcast_shape(batch_a, batch_b));
  // (..., m, 1, k) * (..., 1, n, k) summed over k: one fused kernel with register tiling.
  Shape full = batch;
  full.insert(full.end(), {m, n, k});
  Shape a3 = batch_a;
  a3.insert(a3.end(), {m, 1, k});
  PG_ASSIGN(ar, reshape(a, a3));
  PG_ASSIGN(ae, broadcast_to(ar, full));
  std::vector<int64_t> perm = all_axes(b);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  PG_ASSIGN(bt, permute(b, perm));
  Shape b3 = batch_b;
  b3.insert(b3.end(), {1, n, k});
  PG_ASSIGN(br, reshape(bt, b3));
  PG_ASSIGN(be, broadcast_to(br, full));
  PG_ASSIGN(prod, alu(Ops::MUL, {ae, be}));
  PG_ASSIGN(s, reduce(Ops::ADD, prod, {static_cast<int64_t>(full.size()) - 1}));
  Shape out = batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  return reshape(s, out);
}

namespace {

// a `op` b with numpy broadcasting; `what` names the op in the error.
absl::StatusOr<UOpRef> broadcast_alu(Ops op, const UOpRef& a, const UOpRef& b, const char* what) {
  if (a->dtype != b->dtype)
    return absl::InvalidArgumentError(absl::StrCat(what, " operands differ in dtype: ", dtype_name(a->dtype), " vs ",
                                                   dtype_name(b->dtype), " (cast explicitly)"));
  absl::StatusOr<Shape> shape = broadcast_shape(a->shape, b->shape);
  if (!shape.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", shape.status().message()));
  PG_ASSIGN(ab, broadcast_to(a, *shape));
  PG_ASSIGN(bb, broadcast_to(b, *shape));
  return alu(op, {ab, bb});
}

}  // namespace

absl::StatusOr<UOpRef> linear(const UOpRef& x, const UOpRef& w, const UOpRef& bias) {
  absl::StatusOr<UOpRef> y = w->shape.size() == 1 ? broadcast_alu(Ops::MUL, x, w, "linear") : matmul(x, w);
  if (!y.ok() || !bias) return y;
  return broadcast_alu(Ops::ADD, *y, bias, "linear's bias");
}

absl::StatusOr<UOpRef> sum(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce_keep(Ops::ADD, x, std::move(axes), keepdim);
}

absl::StatusOr<UOpRef> max(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce_keep(Ops::MAX, x, std::move(axes), keepdim);
}

absl::StatusOr<UOpRef> order_reversed(const UOpRef& x) {
  if (x->dtype == DType::Bool) return alu(Ops::NOT, {x});
  if (dtype_is_float(x->dtype)) return alu(Ops::NEG, {x});
  PG_ASSIGN(ones, constant(int64_t{-1}, x->dtype, x->shape));  // every bit set
  return alu(Ops::XOR, {x, ones});
}

absl::StatusOr<UOpRef> min(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  PG_ASSIGN(r, order_reversed(x));
  PG_ASSIGN(m, reduce_keep(Ops::MAX, r, std::move(axes), keepdim));
  return order_reversed(m);
}

absl::StatusOr<UOpRef> minimum(const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(ra, order_reversed(a));
  PG_ASSIGN(rb, order_reversed(b));
  PG_ASSIGN(m, alu(Ops::MAX, {ra, rb}));
  return order_reversed(m);
}

absl::StatusOr<UOpRef> mean(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  if (auto s = need_float(x, "mean"); !s.ok()) return s;
  PG_ASSIGN(ax, norm_axes(std::move(axes), x));
  PG_ASSIGN(s, reduce_keep(Ops::ADD, x, ax, keepdim));
  // Over zero elements the mean is NaN, as torch (0 * inf).
  const int64_t n = count(x, ax);
  return scale(s, n == 0 ? std::numeric_limits<double>::infinity() : 1.0 / static_cast<double>(n));
}

absl::StatusOr<UOpRef> var(const UOpRef& x, std::vector<int64_t> axes, bool keepdim, double correction) {
  if (auto s = need_float(x, "var"); !s.ok()) return s;
  PG_ASSIGN(ax, norm_axes(std::move(axes), x));
  PG_ASSIGN(m, mean(x, ax, true));
  PG_ASSIGN(me, expand(m, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {x, me}));
  PG_ASSIGN(sq, alu(Ops::MUL, {d, d}));
  PG_ASSIGN(s, reduce_keep(Ops::ADD, sq, ax, keepdim));
  double n = static_cast<double>(count(x, ax)) - correction;
  return scale(s, 1.0 / std::max(n, 0.0));
}

absl::StatusOr<UOpRef> var_of_each(const UOpRef& x, double correction) {
  if (auto s = need_float(x, "var"); !s.ok()) return s;
  PG_ASSIGN(d, alu(Ops::SUB, {x, x}));
  return scale(d, 1.0 / std::max(1.0 - correction, 0.0));
}

absl::StatusOr<UOpRef> std_dev(const UOpRef& x, std::vector<int64_t> axes, bool keepdim, double correction) {
  PG_ASSIGN(v, var(x, std::move(axes), keepdim, correction));
  return alu(Ops::SQRT, {v});
}

absl::StatusOr<UOpRef> exp(const UOpRef& x) {
  if (auto s = need_float(x, "exp"); !s.ok()) return s;
  PG_ASSIGN(t, scale(x, kLog2E));
  return alu(Ops::EXP2, {t});
}

absl::StatusOr<UOpRef> log(const UOpRef& x) {
  if (auto s = need_float(x, "log"); !s.ok()) return s;
  PG_ASSIGN(l, alu(Ops::LOG2, {x}));
  return scale(l, kLn2);
}

namespace {

// exp(x - max(x)) along `axis` (so large inputs cannot overflow), its sum with the axis kept,
// and the max: the shared core of softmax and logsumexp.
struct ShiftedExp {
  UOpRef max, exp, sum;
};

absl::StatusOr<ShiftedExp> shifted_exp(const UOpRef& x, int64_t axis, const char* what) {
  if (auto s = need_float(x, what); !s.ok()) return s;
  PG_ASSIGN(m, reduce_keep(Ops::MAX, x, {axis}, true));
  PG_ASSIGN(me, expand(m, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {x, me}));
  PG_ASSIGN(e, exp(d));
  PG_ASSIGN(s, reduce_keep(Ops::ADD, e, {axis}, true));
  return ShiftedExp{m, e, s};
}

// torch's softmax gradient, y (g - sum(g y)) along the axis: walking the construction would also
// send each row's share through the max, which cancels only up to rounding (4e-7 off torch). The
// inputs are x and the kept-axis sum, whose shape names the axis (any axis of size 1 in x, where
// they agree: a softmax over one element has no gradient).
absl::StatusOr<std::vector<UOpRef>> softmax_gradient(const UOpRef& y, const std::vector<UOpRef>& in, const UOpRef& g) {
  const Shape &xs = in[0]->shape, &ss = in[1]->shape;
  int64_t axis = -1;
  for (size_t i = 0; i < xs.size() && axis < 0; ++i)
    if (ss[i] != xs[i]) axis = static_cast<int64_t>(i);
  for (size_t i = 0; i < xs.size() && axis < 0; ++i)
    if (xs[i] == 1) axis = static_cast<int64_t>(i);
  PG_ASSIGN(gy, alu(Ops::MUL, {g, y}));
  UOpRef total = gy;
  if (axis >= 0) {
    PG_ASSIGN(s, reduce_keep(Ops::ADD, gy, {axis}, true));
    PG_ASSIGN(se, expand(s, y->shape));
    total = se;
  }
  PG_ASSIGN(d, alu(Ops::SUB, {g, total}));
  PG_ASSIGN(gx, alu(Ops::MUL, {y, d}));
  return std::vector<UOpRef>{gx, nullptr};
}

}  // namespace

absl::StatusOr<UOpRef> softmax(const UOpRef& x, int64_t axis) {
  PG_ASSIGN(se, shifted_exp(x, axis, "softmax"));
  PG_ASSIGN(sum, expand(se.sum, x->shape));
  PG_ASSIGN(out, alu(Ops::FDIV, {se.exp, sum}));
  set_gradient_rule(out, {x, se.sum}, softmax_gradient);
  return out;
}

absl::StatusOr<UOpRef> logsumexp(const UOpRef& x, int64_t axis, bool keepdim) {
  PG_ASSIGN(se, shifted_exp(x, axis, "logsumexp"));
  PG_ASSIGN(l, log(se.sum));
  PG_ASSIGN(out, alu(Ops::ADD, {l, se.max}));
  if (keepdim) return out;
  PG_ASSIGN(ax, norm_axes({axis}, x));
  Shape shape;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (static_cast<int64_t>(i) != ax[0]) shape.push_back(x->shape[i]);
  return reshape(out, shape);
}

absl::StatusOr<UOpRef> log_softmax(const UOpRef& x, int64_t axis) {
  PG_ASSIGN(lse, logsumexp(x, axis, true));
  PG_ASSIGN(le, expand(lse, x->shape));
  return alu(Ops::SUB, {x, le});
}

absl::StatusOr<UOpRef> softmin(const UOpRef& x, int64_t axis) {
  if (auto s = need_float(x, "softmin"); !s.ok()) return s;
  if (x->shape.empty()) {  // a 0-d tensor is a row of one
    if (axis != 0 && axis != -1) return absl::InvalidArgumentError(absl::StrCat("softmin: axis ", axis, " of a 0-d tensor"));
    PG_ASSIGN(row, reshape(x, {1}));
    PG_ASSIGN(out, softmin(row, 0));
    return reshape(out, {});
  }
  PG_ASSIGN(neg, alu(Ops::NEG, {x}));
  return softmax(neg, axis);
}

absl::StatusOr<UOpRef> lp_normalize(const UOpRef& x, double p, int64_t axis, double eps) {
  if (auto s = need_float(x, "normalize"); !s.ok()) return s;
  if (std::isnan(p)) return absl::InvalidArgumentError("normalize needs a number p, got nan");
  PG_ASSIGN(ax, norm_axes({axis}, x));
  UOpRef norm;
  if (p == 0) {
    PG_ASSIGN(zero, scalar_like(0.0, x));
    PG_ASSIGN(nonzero, alu(Ops::CMPNE, {x, zero}));
    PG_ASSIGN(count, cast(nonzero, x->dtype));
    PG_ASSIGN(n, reduce_keep(Ops::ADD, count, ax, true));
    norm = n;
  } else if (p == 2) {  // sqrt of the sum of squares: one rounding less than pow
    PG_ASSIGN(sq, alu(Ops::MUL, {x, x}));
    PG_ASSIGN(ss, reduce_keep(Ops::ADD, sq, ax, true));
    PG_ASSIGN(n, alu(Ops::SQRT, {ss}));
    norm = n;
  } else {
    PG_ASSIGN(neg, alu(Ops::NEG, {x}));
    PG_ASSIGN(a, alu(Ops::MAX, {x, neg}));
    if (std::isinf(p)) {
      PG_ASSIGN(n, p > 0 ? reduce_keep(Ops::MAX, a, ax, true) : min(a, ax, true));
      norm = n;
    } else if (p == 1) {
      PG_ASSIGN(n, reduce_keep(Ops::ADD, a, ax, true));
      norm = n;
    } else {
      PG_ASSIGN(pe, scalar_like(p, a));
      PG_ASSIGN(ap, pow(a, pe));
      PG_ASSIGN(s, reduce_keep(Ops::ADD, ap, ax, true));
      PG_ASSIGN(inv, scalar_like(1.0 / p, s));
      PG_ASSIGN(n, pow(s, inv));
      norm = n;
    }
  }
  PG_ASSIGN(e, scalar_like(eps, norm));
  PG_ASSIGN(den, alu(Ops::MAX, {norm, e}));
  PG_ASSIGN(de, expand(den, x->shape));
  return alu(Ops::FDIV, {x, de});
}

absl::StatusOr<UOpRef> layernorm(const UOpRef& x, int64_t normalized_axes, double eps) {
  if (auto s = need_float(x, "layernorm"); !s.ok()) return s;
  int64_t rank = static_cast<int64_t>(x->shape.size());
  if (normalized_axes < 1 || normalized_axes > rank)
    return absl::InvalidArgumentError(absl::StrCat("layernorm over ", normalized_axes, " axes of a rank-", rank, " tensor"));
  std::vector<int64_t> axes;
  for (int64_t i = rank - normalized_axes; i < rank; ++i) axes.push_back(i);
  PG_ASSIGN(m, mean(x, axes, true));
  PG_ASSIGN(me, expand(m, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {x, me}));
  PG_ASSIGN(sq, alu(Ops::MUL, {d, d}));
  PG_ASSIGN(v, mean(sq, axes, true));
  PG_ASSIGN(ve, scalar_like(eps, v));
  PG_ASSIGN(vs, alu(Ops::ADD, {v, ve}));
  PG_ASSIGN(rs, alu(Ops::SQRT, {vs}));
  PG_ASSIGN(inv, alu(Ops::RECIP, {rs}));
  PG_ASSIGN(ie, expand(inv, x->shape));
  return alu(Ops::MUL, {d, ie});
}

absl::StatusOr<UOpRef> relu(const UOpRef& x) {
  // Selected, not max(x, 0): a max splits its gradient at the tie x = 0, where torch's relu has
  // gradient 0. A NaN passes through.
  PG_ASSIGN(z, scalar_like(0, x));
  PG_ASSIGN(positive, alu(Ops::CMPLT, {z, x}));
  PG_ASSIGN(nan, alu(Ops::CMPNE, {x, x}));
  PG_ASSIGN(keep, alu(Ops::OR, {positive, nan}));
  return alu(Ops::WHERE, {keep, x, z});
}

absl::StatusOr<UOpRef> sigmoid(const UOpRef& x) {
  if (auto s = need_float(x, "sigmoid"); !s.ok()) return s;
  // e = exp(-|x|) never overflows (1 / (1 + exp(-x)) does for x below about -88 in float32, -11
  // in float16, and its gradient then multiplies 0 by inf): sigmoid is 1 / (1 + e) for x >= 0
  // and e / (1 + e) below. -|x| is selected, not max(x, -x): a max splits its gradient at x = 0
  // into +1/2 and -1/2, which would make sigmoid's (and tanh's) gradient 0 there.
  PG_ASSIGN(zero, scalar_like(0, x));
  PG_ASSIGN(below, alu(Ops::CMPLT, {x, zero}));
  PG_ASSIGN(nx, alu(Ops::NEG, {x}));
  PG_ASSIGN(neg_abs, alu(Ops::WHERE, {below, x, nx}));
  PG_ASSIGN(t, scale(neg_abs, kLog2E));
  PG_ASSIGN(e, alu(Ops::EXP2, {t}));
  PG_ASSIGN(one, scalar_like(1, x));
  PG_ASSIGN(d, alu(Ops::ADD, {one, e}));
  PG_ASSIGN(pos, alu(Ops::RECIP, {d}));
  PG_ASSIGN(neg, alu(Ops::MUL, {e, pos}));
  return alu(Ops::WHERE, {below, neg, pos});
}

absl::StatusOr<UOpRef> gelu(const UOpRef& x) {
  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
  PG_ASSIGN(x2, alu(Ops::MUL, {x, x}));
  PG_ASSIGN(x3, alu(Ops::MUL, {x2, x}));
  PG_ASSIGN(c, scale(x3, 0.044715));
  PG_ASSIGN(inner, alu(Ops::ADD, {x, c}));
  PG_ASSIGN(arg, scale(inner, std::sqrt(2.0 / M_PI)));
  PG_ASSIGN(t, tanh(arg));
  PG_ASSIGN(one, scalar_like(1, x));
  PG_ASSIGN(p, alu(Ops::ADD, {one, t}));
  PG_ASSIGN(h, scale(x, 0.5));
  return alu(Ops::MUL, {h, p});
}

absl::StatusOr<UOpRef> silu(const UOpRef& x) {
  PG_ASSIGN(s, sigmoid(x));
  return alu(Ops::MUL, {x, s});
}

absl::StatusOr<UOpRef> rms_norm(const UOpRef& x, int64_t normalized_axes, double eps) {
  if (auto s = need_float(x, "rms_norm"); !s.ok()) return s;
  int64_t rank = static_cast<int64_t>(x->shape.size());
  if (normalized_axes < 1 || normalized_axes > rank)
    return absl::InvalidArgumentError(absl::StrCat("rms_norm over ", normalized_axes, " axes of a rank-", rank, " tensor"));
  std::vector<int64_t> axes;
  for (int64_t i = rank - normalized_axes; i < rank; ++i) axes.push_back(i);
  PG_ASSIGN(sq, alu(Ops::MUL, {x, x}));
  PG_ASSIGN(ms, mean(sq, axes, true));
  PG_ASSIGN(e, scalar_like(eps, ms));
  PG_ASSIGN(se, alu(Ops::ADD, {ms, e}));
  PG_ASSIGN(r, alu(Ops::SQRT, {se}));
  PG_ASSIGN(inv, alu(Ops::RECIP, {r}));
  PG_ASSIGN(ie, expand(inv, x->shape));
  return alu(Ops::MUL, {x, ie});
}

absl::StatusOr<UOpRef> group_norm(const UOpRef& x, int64_t groups, double eps) {
  if (auto s = need_float(x, "group_norm"); !s.ok()) return s;
  if (x->shape.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat("group_norm needs (N, C, ...), got rank ", x->shape.size()));
  const int64_t n = x->shape[0], c = x->shape[1];
  if (groups < 1 || c % groups != 0)
    return absl::InvalidArgumentError(absl::StrCat("group_norm: ", c, " channels do not split into ", groups, " groups"));
  int64_t rest = 1;
  for (size_t i = 1; i < x->shape.size(); ++i) rest *= x->shape[i];
  PG_ASSIGN(g, reshape(x, {n, groups, rest / groups}));
  PG_ASSIGN(nrm, layernorm(g, 1, eps));
  return reshape(nrm, x->shape);
}

namespace {

// y * weight + bias with weight and bias (each may be null) of y's dtype and shape `expected`,
// reshaped to `spread` (expected with size-1 axes where y has others) and broadcast to y.
absl::StatusOr<UOpRef> affine(const UOpRef& y, const UOpRef& weight, const UOpRef& bias, const Shape& expected,
                              const Shape& spread) {
  UOpRef out = y;
  for (const auto& [t, op, name] : {std::tuple{weight, Ops::MUL, "weight"}, std::tuple{bias, Ops::ADD, "bias"}}) {
    if (!t) continue;
    if (t->shape != expected || t->dtype != y->dtype)
      return absl::InvalidArgumentError(absl::StrCat(name, " must be ", dtype_name(y->dtype), " of shape (",
                                                     absl::StrJoin(expected, ", "), "), got ", dtype_name(t->dtype),
                                                     " (", absl::StrJoin(t->shape, ", "), ")"));
    PG_ASSIGN(r, reshape(t, spread));
    PG_ASSIGN(e, expand(r, y->shape));
    PG_ASSIGN(next, alu(op, {out, e}));
    out = next;
  }
  return out;
}

}  // namespace

absl::StatusOr<UOpRef> channel_affine(const UOpRef& y, const UOpRef& weight, const UOpRef& bias) {
  if (y->shape.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat("a per-channel affine needs (N, C, ...), got rank ", y->shape.size()));
  Shape spread(y->shape.size(), 1);
  spread[1] = y->shape[1];
  return affine(y, weight, bias, Shape{y->shape[1]}, spread);
}

absl::StatusOr<UOpRef> trailing_affine(const UOpRef& y, const UOpRef& weight, const UOpRef& bias,
                                       int64_t normalized_axes) {
  const auto rank = static_cast<int64_t>(y->shape.size());
  if (normalized_axes < 1 || normalized_axes > rank)
    return absl::InvalidArgumentError(absl::StrCat("an affine over the last ", normalized_axes, " axes of a rank-", rank,
                                                   " tensor"));
  const Shape tail(y->shape.end() - normalized_axes, y->shape.end());
  Shape spread(y->shape.size(), 1);
  std::copy(tail.begin(), tail.end(), spread.end() - normalized_axes);
  return affine(y, weight, bias, tail, spread);
}

namespace {

// The axes batch norm reduces over (all but the channel axis 1), or an error for rank < 2.
absl::StatusOr<std::vector<int64_t>> batch_axes(const UOpRef& x) {
  if (x->shape.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat("batchnorm needs (N, C, ...), got rank ", x->shape.size()));
  std::vector<int64_t> axes{0};
  for (size_t i = 2; i < x->shape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  return axes;
}

// (x - mean) / sqrt(var + eps) with mean and var shaped (1, C, 1, ...).
absl::StatusOr<UOpRef> normalize(const UOpRef& x, const UOpRef& mean_k, const UOpRef& var_k, double eps) {
  PG_ASSIGN(me, expand(mean_k, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {x, me}));
  PG_ASSIGN(e, scalar_like(eps, var_k));
  PG_ASSIGN(ve, alu(Ops::ADD, {var_k, e}));
  PG_ASSIGN(r, alu(Ops::SQRT, {ve}));
  PG_ASSIGN(inv, alu(Ops::RECIP, {r}));
  PG_ASSIGN(ie, expand(inv, x->shape));
  return alu(Ops::MUL, {d, ie});
}

}  // namespace

absl::StatusOr<UOpRef> batchnorm_train(const UOpRef& x, double eps) {
  if (auto s = need_float(x, "batchnorm"); !s.ok()) return s;
  PG_ASSIGN(axes, batch_axes(x));
  PG_ASSIGN(m, mean(x, axes, true));
  PG_ASSIGN(v, var(x, axes, true, 0.0));
  return normalize(x, m, v, eps);
}

absl::StatusOr<UOpRef> batchnorm_eval(const UOpRef& x, const UOpRef& mean_in, const UOpRef& var_in, double eps) {
  if (auto s = need_float(x, "batchnorm"); !s.ok()) return s;
  PG_ASSIGN(axes, batch_axes(x));
  const Shape stat{x->shape[1]};
  for (const UOpRef& t : {mean_in, var_in})
    if (t->shape != stat || t->dtype != x->dtype)
      return absl::InvalidArgumentError(absl::StrCat("batchnorm statistics must be ", dtype_name(x->dtype), " of shape (",
                                                     x->shape[1], "), got ", dtype_name(t->dtype), " (",
                                                     absl::StrJoin(t->shape, ", "), ")"));
  Shape kshape(x->shape.size(), 1);
  kshape[1] = x->shape[1];
  PG_ASSIGN(m, reshape(mean_in, kshape));
  PG_ASSIGN(v, reshape(var_in, kshape));
  return normalize(x, m, v, eps);
}

absl::StatusOr<UOpRef> batchnorm_invstd(const UOpRef& x, const UOpRef& mean_in, const UOpRef& invstd,
                                        const UOpRef& weight, const UOpRef& bias, const std::vector<int64_t>& axes) {
  if (auto s = need_float(x, "batchnorm"); !s.ok()) return s;
  const auto rank = static_cast<int64_t>(x->shape.size());
  Shape stat, spread(x->shape.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1]))
      return absl::InvalidArgumentError(absl::StrCat("batchnorm: axes (", absl::StrJoin(axes, ", "),
                                                     ") are not increasing axes of a rank-", rank, " tensor"));
    stat.push_back(x->shape[axes[i]]);
    spread[axes[i]] = x->shape[axes[i]];
  }
  for (const auto& [t, name] : {std::pair{mean_in, "mean"}, std::pair{invstd, "invstd"}})
    if (t->dtype != x->dtype)
      return absl::InvalidArgumentError(absl::StrCat("batchnorm: ", name, " must be ", dtype_name(x->dtype), ", got ",
                                                     dtype_name(t->dtype)));
  if (mean_in->shape != stat)
    return absl::InvalidArgumentError(absl::StrCat("batchnorm: mean must have shape (", absl::StrJoin(stat, ", "),
                                                   "), got (", absl::StrJoin(mean_in->shape, ", "), ")"));
  PG_ASSIGN(m, reshape(mean_in, spread));
  PG_ASSIGN(me, expand(m, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {x, me}));
  // invstd is along the axes like mean, or any shape that broadcasts to x (tinygrad's rule: by rank).
  auto along_axes = [&]() -> absl::StatusOr<UOpRef> {
    PG_ASSIGN(r, reshape(invstd, spread));
    return expand(r, x->shape);
  };
  absl::StatusOr<UOpRef> is = invstd->shape == stat ? along_axes() : broadcast_to(invstd, x->shape);
  if (!is.ok())
    return absl::InvalidArgumentError(absl::StrCat("batchnorm: invstd of shape (", absl::StrJoin(invstd->shape, ", "),
                                                   ") is neither (", absl::StrJoin(stat, ", "),
                                                   ") nor broadcastable to x (", absl::StrJoin(x->shape, ", "), ")"));
  PG_ASSIGN(y, alu(Ops::MUL, {d, *is}));
  return affine(y, weight, bias, stat, spread);
}

absl::StatusOr<UOpRef> scaled_dot_product_attention(const UOpRef& q, const UOpRef& k, const UOpRef& v,
                                                    const UOpRef& mask, bool causal, double dropout_p,
                                                    RandomKey key) {
  if (auto s = need_float(q, "scaled_dot_product_attention"); !s.ok()) return s;
  if (q->shape.size() < 2 || k->shape.size() < 2 || v->shape.size() < 2)
    return absl::InvalidArgumentError("scaled_dot_product_attention needs q, k, v of rank >= 2");
  if (k->dtype != q->dtype || v->dtype != q->dtype)
    return absl::InvalidArgumentError("scaled_dot_product_attention: q, k and v differ in dtype");
  const int64_t d = q->shape.back();
  if (k->shape.back() != d)
    return absl::InvalidArgumentError(absl::StrCat("scaled_dot_product_attention: q has ", d, " features, k has ",
                                                   k->shape.back()));
  std::vector<int64_t> perm = all_axes(k);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  PG_ASSIGN(kt, permute(k, perm));
  PG_ASSIGN(qk, matmul(q, kt));
  PG_ASSIGN(scores, scale(qk, 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d, 1)))));
  UOpRef s = scores;
  const int64_t l = s->shape[s->shape.size() - 2], sk = s->shape.back();
  if (mask) {
    PG_ASSIGN(full, broadcast_shape(mask->shape, s->shape));
    if (full != s->shape)
      return absl::InvalidArgumentError(absl::StrCat("attention mask (", absl::StrJoin(mask->shape, ", "),
                                                     ") does not broadcast to the scores (", absl::StrJoin(s->shape, ", "), ")"));
    PG_ASSIGN(mb, broadcast_to(mask, s->shape));
    if (mb->dtype == DType::Bool) {
      PG_ASSIGN(ninf, scalar_like(-INFINITY, s));
      PG_ASSIGN(m, alu(Ops::WHERE, {mb, s, ninf}));
      s = m;
    } else {
      PG_ASSIGN(mc, cast(mb, s->dtype));
      PG_ASSIGN(m, alu(Ops::ADD, {s, mc}));
      s = m;
    }
  }
  if (causal) {
    // keep j <= i: i from a column arange, j from a row arange, compared as int32.
    PG_ASSIGN(ai, arange(l, DType::Int32));
    PG_ASSIGN(aj, arange(sk, DType::Int32));
    PG_ASSIGN(ri, reshape(ai, {l, 1}));
    PG_ASSIGN(rj, reshape(aj, {1, sk}));
    PG_ASSIGN(ei, expand(ri, {l, sk}));
    PG_ASSIGN(ej, expand(rj, {l, sk}));
    PG_ASSIGN(after, alu(Ops::CMPLT, {ei, ej}));
    PG_ASSIGN(keep2, alu(Ops::NOT, {after}));
    PG_ASSIGN(keep, broadcast_to(keep2, s->shape));
    PG_ASSIGN(ninf, scalar_like(-INFINITY, s));
    PG_ASSIGN(m, alu(Ops::WHERE, {keep, s, ninf}));
    s = m;
  }
  PG_ASSIGN(p, softmax(s, -1));
  PG_ASSIGN(kept, dropout(p, dropout_p, key));
  return matmul(kept, v);
}

absl::StatusOr<UOpRef> newton_schulz(const UOpRef& x, const UOpRef& coefficients, int64_t steps, double eps) {
  if (auto s = need_float(x, "newton_schulz"); !s.ok()) return s;
  const size_t rank = x->shape.size();
  if (rank < 2)
    return absl::InvalidArgumentError(absl::StrCat("newton_schulz needs a matrix (or a batch of them), got rank ", rank));
  if (coefficients->shape.size() != 1 || coefficients->shape[0] < 1 || coefficients->shape[0] > 16 ||
      !dtype_is_float(coefficients->dtype))
    return absl::InvalidArgumentError("newton_schulz takes 1 to 16 float coefficients (a 1-D tensor)");
  if (steps < 1 || steps > 64) return absl::InvalidArgumentError(absl::StrCat("newton_schulz: steps must be 1 to 64, got ", steps));
  std::vector<int64_t> flip = all_axes(x);
  std::swap(flip[rank - 1], flip[rank - 2]);
  if (x->shape[rank - 2] > x->shape[rank - 1]) {
    PG_ASSIGN(wide, permute(x, flip));
    PG_ASSIGN(done, newton_schulz(wide, coefficients, steps, eps));
    return permute(done, flip);
  }
  // Coefficient i as a tensor of x's shape.
  std::vector<UOpRef> c;
  for (int64_t i = 0; i < coefficients->shape[0]; ++i) {
    PG_ASSIGN(one, shrink(coefficients, Pairs{{i, i + 1}}));
    PG_ASSIGN(typed, cast(one, x->dtype));
    PG_ASSIGN(spread, broadcast_to(typed, x->shape));
    c.push_back(spread);
  }
  PG_ASSIGN(sq, alu(Ops::MUL, {x, x}));
  PG_ASSIGN(total, sum(sq, {-2, -1}, true));
  PG_ASSIGN(norm, alu(Ops::SQRT, {total}));
  PG_ASSIGN(eps_t, scalar_like(eps, norm));
  PG_ASSIGN(denom, alu(Ops::ADD, {norm, eps_t}));
  PG_ASSIGN(spread_denom, broadcast_to(denom, x->shape));
  PG_ASSIGN(start, alu(Ops::FDIV, {x, spread_denom}));
  UOpRef cur = start;
  for (int64_t s = 0; s < steps; ++s) {
    PG_ASSIGN(t, permute(cur, flip));
    PG_ASSIGN(gram, matmul(cur, t));
    UOpRef term = cur;
    PG_ASSIGN(acc0, alu(Ops::MUL, {cur, c[0]}));
    UOpRef acc = acc0;
    for (size_t i = 1; i < c.size(); ++i) {
      PG_ASSIGN(next, matmul(gram, term));
      term = next;
      PG_ASSIGN(scaled, alu(Ops::MUL, {term, c[i]}));
      PG_ASSIGN(sum_i, alu(Ops::ADD, {acc, scaled}));
      acc = sum_i;
    }
    cur = acc;
  }
  return cur;
}

absl::StatusOr<UOpRef> prod(const UOpRef& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce_keep(Ops::MUL, x, std::move(axes), keepdim);
}

namespace {

// torch's pow gradients: b a^(b-1) for the base (0 where b = 0, so x ** 0 is flat everywhere) and
// a^b ln a for the exponent (0 where a = 0 and b >= 0). pow's construction would give 0 where it
// is nan (negative bases with fractions, whose result is a selected nan constant) and nan where
// it is finite (0 to a positive power, through log2 0).
absl::StatusOr<std::vector<UOpRef>> pow_gradient(const UOpRef& out, const std::vector<UOpRef>& in, const UOpRef& g) {
  const UOpRef &a = in[0], &b = in[1];
  PG_ASSIGN(one, scalar_like(1, b));
  PG_ASSIGN(b_minus_one, alu(Ops::SUB, {b, one}));
  PG_ASSIGN(p, pow(a, b_minus_one));
  PG_ASSIGN(ln_a, log(a));
  Expr e(a->dtype, a->shape);
  UOpRef ga = e.where(e.eq(b, 0.0), 0.0, e.mul(g, e.mul(b, p)));
  UOpRef a_zero_b_nonneg = e.op(Ops::AND, {e.eq(a, 0.0), e.op(Ops::NOT, {e.lt(b, 0.0)})});
  UOpRef gb = e.where(a_zero_b_nonneg, 0.0, e.mul(g, e.mul(out, ln_a)));
  PG_ASSIGN(grad_a, e.done(ga));
  PG_ASSIGN(grad_b, e.done(gb));
  return std::vector<UOpRef>{grad_a, grad_b};
}

}  // namespace

absl::StatusOr<UOpRef> pow(const UOpRef& a, const UOpRef& b) {
  if (auto s = need_float(a, "pow"); !s.ok()) return s;
  if (a->dtype != b->dtype || a->shape != b->shape)
    return absl::InvalidArgumentError(absl::StrCat("pow operands differ in dtype or shape: ", dtype_name(a->dtype), " (",
                                                   absl::StrJoin(a->shape, ", "), ") vs ", dtype_name(b->dtype), " (",
                                                   absl::StrJoin(b->shape, ", "), ")"));
  if (auto squared = pow_by_squaring(a, b)) return *std::move(squared);
  PG_ASSIGN(zero, scalar_like(0, a));
  PG_ASSIGN(one, scalar_like(1, a));
  PG_ASSIGN(na, alu(Ops::NEG, {a}));
  // |a| selected, not max(a, -a), whose gradient would split at a = 0.
  PG_ASSIGN(neg_base, alu(Ops::CMPLT, {a, zero}));
  PG_ASSIGN(mag_a, alu(Ops::WHERE, {neg_base, na, a}));
  PG_ASSIGN(l, alu(Ops::LOG2, {mag_a}));
  PG_ASSIGN(bl, alu(Ops::MUL, {b, l}));
  PG_ASSIGN(mag, alu(Ops::EXP2, {bl}));
  // Negative bases: the sign comes from the exponent's parity; non-integer exponents give nan,
  // except for -inf, which C's pow (and torch) treat as +inf there: inf for b > 0, 0 below.
  PG_ASSIGN(nb, alu(Ops::NEG, {b}));
  PG_ASSIGN(mag_b, alu(Ops::MAX, {b, nb}));
  PG_ASSIGN(tb, trunc(b));
  PG_ASSIGN(b_int, equal(b, tb));
  PG_ASSIGN(half_b, scale(b, 0.5));
  PG_ASSIGN(t_half, trunc(half_b));
  PG_ASSIGN(even, equal(half_b, t_half));
  PG_ASSIGN(neg_mag, alu(Ops::NEG, {mag}));
  PG_ASSIGN(signed_mag, alu(Ops::WHERE, {even, mag, neg_mag}));
  PG_ASSIGN(nan, scalar_like(std::nan(""), a));
  PG_ASSIGN(minus_inf, scalar_like(-std::numeric_limits<double>::infinity(), a));
  PG_ASSIGN(a_minus_inf, equal(a, minus_inf));
  PG_ASSIGN(fraction, alu(Ops::WHERE, {a_minus_inf, mag, nan}));
  PG_ASSIGN(neg_result, alu(Ops::WHERE, {b_int, signed_mag, fraction}));
  PG_ASSIGN(result, alu(Ops::WHERE, {neg_base, neg_result, mag}));
  // 2 ** (0 * log2 0) would be nan: anything to the power 0 is 1. So is 1 to any power (nan
  // included), and -1 to ±inf (inf * log2 1 is nan), as C's pow.
  PG_ASSIGN(b_zero, equal(b, zero));
  // Only where the formula gives nan (b nan or infinite): elsewhere 1 ** b computes 1 and keeps
  // its gradient (b with respect to the base).
  PG_ASSIGN(inf, scalar_like(std::numeric_limits<double>::infinity(), b));
  PG_ASSIGN(b_mag_inf, equal(mag_b, inf));
  PG_ASSIGN(b_nan, alu(Ops::CMPNE, {b, b}));
  PG_ASSIGN(b_odd, alu(Ops::OR, {b_mag_inf, b_nan}));
  PG_ASSIGN(a_one, equal(a, one));
  PG_ASSIGN(one_to_odd, alu(Ops::AND, {a_one, b_odd}));
  PG_ASSIGN(a_mag_one, equal(mag_a, one));
  PG_ASSIGN(unit_to_inf, alu(Ops::AND, {a_mag_one, b_mag_inf}));
  PG_ASSIGN(ones_a, alu(Ops::OR, {b_zero, one_to_odd}));
  PG_ASSIGN(ones, alu(Ops::OR, {ones_a, unit_to_inf}));
  PG_ASSIGN(out, alu(Ops::WHERE, {ones, one, result}));
  set_gradient_rule(out, {a, b}, pow_gradient);
  return out;
}

}  // namespace polygrad::frontend
