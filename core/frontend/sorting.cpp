#include "core/frontend/sorting.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/composites.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The op works on the last axis; these move `axis` there and back.
struct LastAxis {
  std::vector<int64_t> perm, inverse;
};

absl::StatusOr<LastAxis> last_axis(const UOpRef& x, int64_t axis, const char* op) {
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (rank == 0) return absl::InvalidArgumentError(absl::StrCat(op, " needs at least one axis, got a 0-d tensor"));
  if (axis < -rank || axis >= rank)
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " is out of range for rank ", rank));
  if (axis < 0) axis += rank;
  LastAxis l;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis) l.perm.push_back(i);
  l.perm.push_back(axis);
  l.inverse.resize(l.perm.size());
  for (size_t i = 0; i < l.perm.size(); ++i) l.inverse[l.perm[i]] = static_cast<int64_t>(i);
  return l;
}

// t (..., n) as the pairwise grid (..., n, n): `rows` repeats t along the second to last axis
// (grid[..., i, j] = t[j]), `cols` along the last (grid[..., i, j] = t[i]).
absl::StatusOr<UOpRef> grid(const UOpRef& t, bool rows) {
  Shape s = t->shape;
  const int64_t n = s.back();
  s.insert(rows ? s.end() - 1 : s.end(), 1);
  PG_ASSIGN(r, reshape(t, s));
  Shape full = t->shape;
  full.push_back(n);
  return expand(r, full);
}

// 0..n-1 as int32 along axis `at` (-1 or -2) of `shape`.
absl::StatusOr<UOpRef> positions(const Shape& shape, int at) {
  const size_t axis = shape.size() + at;
  PG_ASSIGN(a, arange(shape[axis], DType::Int32));
  Shape s(shape.size(), 1);
  s[axis] = shape[axis];
  PG_ASSIGN(r, reshape(a, s));
  return expand(r, shape);
}

absl::StatusOr<UOpRef> is_nan(const UOpRef& u) {
  if (!dtype_is_float(u->dtype)) return constant(int64_t{0}, DType::Bool, u->shape);
  return alu(Ops::CMPNE, {u, u});
}

absl::StatusOr<UOpRef> both(const UOpRef& a, const UOpRef& b) { return alu(Ops::AND, {a, b}); }
absl::StatusOr<UOpRef> either(const UOpRef& a, const UOpRef& b) { return alu(Ops::OR, {a, b}); }
absl::StatusOr<UOpRef> negate(const UOpRef& a) { return alu(Ops::NOT, {a}); }

// u == v, NaN equal to NaN (NaN is one place in the order).
absl::StatusOr<UOpRef> same(const UOpRef& u, const UOpRef& v) {
  PG_ASSIGN(ne, alu(Ops::CMPNE, {u, v}));
  PG_ASSIGN(eq, negate(ne));
  if (!dtype_is_float(u->dtype)) return eq;
  PG_ASSIGN(nu, is_nan(u));
  PG_ASSIGN(nv, is_nan(v));
  PG_ASSIGN(nans, both(nu, nv));
  return either(eq, nans);
}

// u sorts strictly before v: u < v with NaN after every number.
absl::StatusOr<UOpRef> before(const UOpRef& u, const UOpRef& v) {
  PG_ASSIGN(lt, alu(Ops::CMPLT, {u, v}));
  if (!dtype_is_float(u->dtype)) return lt;
  PG_ASSIGN(nu, is_nan(u));
  PG_ASSIGN(nv, is_nan(v));
  PG_ASSIGN(number, negate(nu));
  PG_ASSIGN(number_before_nan, both(number, nv));
  return either(lt, number_before_nan);
}

absl::StatusOr<UOpRef> count(const UOpRef& pred) {
  PG_ASSIGN(i, cast(pred, DType::Int32));
  PG_ASSIGN(s, reduce(Ops::ADD, i, {-1}));
  Shape out = s->shape;
  out.pop_back();
  return reshape(s, out);
}

// Bool compares and sums as int32.
absl::StatusOr<UOpRef> comparable(const UOpRef& t) { return t->dtype == DType::Bool ? cast(t, DType::Int32) : t; }

// Sorts t (..., n) along its last axis.
absl::StatusOr<UOpRef> sort_last(const UOpRef& x, bool descending, bool want_indices) {
  PG_ASSIGN(t, comparable(x));
  PG_ASSIGN(tj, grid(t, true));   // [i, j] = t[j]
  PG_ASSIGN(ti, grid(t, false));  // [i, j] = t[i]
  // t[j] goes before t[i] when it sorts strictly before, or is equal and comes first (stable).
  PG_ASSIGN(strictly, descending ? before(ti, tj) : before(tj, ti));
  PG_ASSIGN(eq, same(tj, ti));
  PG_ASSIGN(j, positions(tj->shape, -1));
  PG_ASSIGN(i, positions(tj->shape, -2));
  PG_ASSIGN(earlier, alu(Ops::CMPLT, {j, i}));
  PG_ASSIGN(tie_first, both(eq, earlier));
  PG_ASSIGN(goes_before, either(strictly, tie_first));
  PG_ASSIGN(rank, count(goes_before));  // (..., n): where t[i] lands
  // out[r] is the element whose rank is r: [r, i] compares rank[i] with r.
  PG_ASSIGN(rank_i, grid(rank, true));
  PG_ASSIGN(r, positions(rank_i->shape, -2));
  PG_ASSIGN(lands, alu(Ops::CMPNE, {rank_i, r}));
  PG_ASSIGN(match, negate(lands));
  if (want_indices) {
    PG_ASSIGN(zero, constant(int64_t{0}, DType::Int32, match->shape));
    PG_ASSIGN(from, positions(match->shape, -1));
    PG_ASSIGN(picked, alu(Ops::WHERE, {match, from, zero}));
    PG_ASSIGN(s, reduce(Ops::ADD, picked, {-1}));
    return reshape(s, x->shape);
  }
  // Exactly one element per output survives and the others are 1: a product, unlike a sum (which
  // starts from +0.0), returns that element bit for bit, -0.0 and NaN included, and its gradient
  // (the product of the others) is 1 there. At an infinity that gradient is NaN (inf / inf).
  PG_ASSIGN(vals, grid(t, true));
  PG_ASSIGN(filler, constant(int64_t{1}, t->dtype, match->shape));
  PG_ASSIGN(picked, alu(Ops::WHERE, {match, vals, filler}));
  PG_ASSIGN(s, reduce(Ops::MUL, picked, {-1}));
  PG_ASSIGN(out, reshape(s, x->shape));
  return x->dtype == DType::Bool ? cast(out, DType::Bool) : out;
}

// The smallest value of `dt` (MAX's identity).
absl::StatusOr<UOpRef> lowest(DType dt, const Shape& shape) {
  if (dtype_is_float(dt)) return constant(-kInf, dt, shape);
  if (dtype_is_unsigned(dt) || dt == DType::Bool) return constant(int64_t{0}, dt, shape);
  const int bits = static_cast<int>(dtype_itemsize(dt)) * 8;
  return constant(bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)), dt, shape);
}

// [i, j] true where j <= i, on the (..., n, n) grid.
absl::StatusOr<UOpRef> prefix_mask(const Shape& grid_shape) {
  PG_ASSIGN(j, positions(grid_shape, -1));
  PG_ASSIGN(i, positions(grid_shape, -2));
  PG_ASSIGN(after, alu(Ops::CMPLT, {i, j}));
  return negate(after);
}

absl::StatusOr<UOpRef> cummax_last(const UOpRef& x, bool want_indices) {
  PG_ASSIGN(t, comparable(x));
  PG_ASSIGN(tj, grid(t, true));
  PG_ASSIGN(mask, prefix_mask(tj->shape));
  PG_ASSIGN(low, lowest(t->dtype, tj->shape));
  PG_ASSIGN(masked, alu(Ops::WHERE, {mask, tj, low}));
  PG_ASSIGN(m, reduce(Ops::MAX, masked, {-1}));
  PG_ASSIGN(values, reshape(m, t->shape));
  UOpRef v = values;
  if (dtype_is_float(t->dtype)) {  // once a NaN is seen every later value is NaN, as torch
    PG_ASSIGN(nj, is_nan(tj));
    PG_ASSIGN(nan_before, both(mask, nj));
    PG_ASSIGN(nans, count(nan_before));
    PG_ASSIGN(none, constant(int64_t{0}, DType::Int32, nans->shape));
    PG_ASSIGN(seen, alu(Ops::CMPLT, {none, nans}));
    PG_ASSIGN(nan, constant(std::nan(""), t->dtype, t->shape));
    PG_ASSIGN(with_nan, alu(Ops::WHERE, {seen, nan, values}));
    v = with_nan;
  }
  if (!want_indices) return x->dtype == DType::Bool ? cast(v, DType::Bool) : v;
  // The last j <= i holding the running extreme.
  PG_ASSIGN(vi, grid(v, false));
  PG_ASSIGN(eq, same(tj, vi));
  PG_ASSIGN(hit, both(mask, eq));
  PG_ASSIGN(j, positions(tj->shape, -1));
  PG_ASSIGN(none, constant(int64_t{-1}, DType::Int32, tj->shape));
  PG_ASSIGN(where_hit, alu(Ops::WHERE, {hit, j, none}));
  PG_ASSIGN(last, reduce(Ops::MAX, where_hit, {-1}));
  return reshape(last, x->shape);
}

// f applied along `axis` (moved last and back). Over an empty axis there is nothing to compute:
// the values are x itself, the indices an empty int32 tensor of x's shape.
template <typename Last>
absl::StatusOr<UOpRef> along(const UOpRef& x, int64_t axis, const char* op, const Last& f, bool indices = false) {
  PG_ASSIGN(l, last_axis(x, axis, op));
  PG_ASSIGN(t, permute(x, l.perm));
  if (t->shape.back() == 0) {
    if (indices) return constant(int64_t{0}, DType::Int32, x->shape);
    return x;
  }
  PG_ASSIGN(out, f(t));
  return permute(out, l.inverse);
}

}  // namespace

absl::StatusOr<UOpRef> sort(const UOpRef& x, int64_t axis, bool descending, bool indices) {
  return along(x, axis, "sort", [&](const UOpRef& t) { return sort_last(t, descending, indices); }, indices);
}

absl::StatusOr<UOpRef> topk(const UOpRef& x, int64_t axis, int64_t k, bool largest, bool indices) {
  PG_ASSIGN(l, last_axis(x, axis, "topk"));
  const int64_t n = x->shape[l.perm.back()];
  if (k < 0 || k > n) return absl::InvalidArgumentError(absl::StrCat("topk: k ", k, " is out of range for an axis of ", n));
  PG_ASSIGN(sorted, sort(x, axis, largest, indices));
  Pairs keep;
  for (size_t i = 0; i < x->shape.size(); ++i) keep.push_back({0, x->shape[i]});
  keep[l.perm.back()] = {0, k};
  return shrink(sorted, keep);
}

absl::StatusOr<UOpRef> cummax(const UOpRef& x, int64_t axis, bool indices) {
  return along(x, axis, "cummax", [&](const UOpRef& t) { return cummax_last(t, indices); }, indices);
}

absl::StatusOr<UOpRef> cummin(const UOpRef& x, int64_t axis, bool indices) {
  return along(x, axis, "cummin", [&](const UOpRef& t) -> absl::StatusOr<UOpRef> {
    PG_ASSIGN(c, comparable(t));
    PG_ASSIGN(r, order_reversed(c));
    PG_ASSIGN(m, cummax_last(r, indices));
    if (indices) return m;
    PG_ASSIGN(back, order_reversed(m));
    return t->dtype == DType::Bool ? cast(back, DType::Bool) : back;
  }, indices);
}

absl::StatusOr<UOpRef> cumprod(const UOpRef& x, int64_t axis) {
  return along(x, axis, "cumprod", [&](const UOpRef& t) -> absl::StatusOr<UOpRef> {
    PG_ASSIGN(c, comparable(t));
    PG_ASSIGN(tj, grid(c, true));
    PG_ASSIGN(mask, prefix_mask(tj->shape));
    PG_ASSIGN(one, constant(int64_t{1}, c->dtype, tj->shape));
    PG_ASSIGN(masked, alu(Ops::WHERE, {mask, tj, one}));
    PG_ASSIGN(p, reduce(Ops::MUL, masked, {-1}));
    return reshape(p, t->shape);
  });
}

absl::StatusOr<UOpRef> logcumsumexp(const UOpRef& x, int64_t axis) {
  if (!dtype_is_float(x->dtype))
    return absl::InvalidArgumentError(absl::StrCat("logcumsumexp needs a float tensor, got ", dtype_name(x->dtype)));
  return along(x, axis, "logcumsumexp", [&](const UOpRef& t) -> absl::StatusOr<UOpRef> {
    PG_ASSIGN(m, cummax_last(t, false));
    // Shift each prefix by its running maximum where that is finite (else by 0: exp(-inf) is 0,
    // exp(inf) is inf, both right).
    PG_ASSIGN(neg_inf, constant(-kInf, t->dtype, t->shape));
    PG_ASSIGN(pos_inf, constant(kInf, t->dtype, t->shape));
    PG_ASSIGN(above, alu(Ops::CMPLT, {neg_inf, m}));
    PG_ASSIGN(below, alu(Ops::CMPLT, {m, pos_inf}));
    PG_ASSIGN(finite, both(above, below));
    PG_ASSIGN(zero, constant(0.0, t->dtype, t->shape));
    PG_ASSIGN(shift, alu(Ops::WHERE, {finite, m, zero}));
    PG_ASSIGN(tj, grid(t, true));
    PG_ASSIGN(si, grid(shift, false));
    PG_ASSIGN(d, alu(Ops::SUB, {tj, si}));
    // Masked before exp, not after: a later element can overflow exp, and its (unused) inf
    // would turn the zero gradient of the masked branch into NaN.
    PG_ASSIGN(mask, prefix_mask(tj->shape));
    PG_ASSIGN(none, constant(-kInf, t->dtype, tj->shape));
    PG_ASSIGN(masked, alu(Ops::WHERE, {mask, d, none}));
    PG_ASSIGN(e, exp(masked));
    PG_ASSIGN(s, reduce(Ops::ADD, e, {-1}));
    PG_ASSIGN(sr, reshape(s, t->shape));
    PG_ASSIGN(l, log(sr));
    return alu(Ops::ADD, {l, shift});
  });
}

}  // namespace polygrad::frontend
