#include "core/frontend/indexing.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/composites.h"
#include "core/frontend/conv.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

absl::StatusOr<int64_t> axis_of(int64_t axis, const UOpRef& x) {
  auto r = static_cast<int64_t>(x->shape.size());
  if (axis < -r || axis >= r) return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ", r));
  return axis < 0 ? axis + r : axis;
}

// arange(n) of `dtype`, reshaped to size n on axis `at` of a rank-`rank` tensor and expanded to `shape`.
absl::StatusOr<UOpRef> arange_along(int64_t n, DType dtype, size_t at, const Shape& shape) {
  PG_ASSIGN(a, arange(n, dtype));
  Shape s(shape.size(), 1);
  s[at] = n;
  PG_ASSIGN(r, reshape(a, s));
  return expand(r, shape);
}

absl::StatusOr<UOpRef> eq(const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(ne, alu(Ops::CMPNE, {a, b}));
  return alu(Ops::NOT, {ne});
}

absl::StatusOr<UOpRef> arg_extreme(const UOpRef& x, int64_t axis_in, bool keepdim, bool is_max) {
  PG_ASSIGN(axis, axis_of(axis_in, x));
  UOpRef v = x;
  if (!is_max) {  // not -x: an int32's -2^31 would wrap onto itself and tie with the largest
    PG_ASSIGN(r, order_reversed(x));
    v = r;
  }
  const int64_t n = x->shape[axis];
  PG_ASSIGN(m, reduce(Ops::MAX, v, {axis}));
  PG_ASSIGN(me, expand(m, v->shape));
  PG_ASSIGN(equal, eq(v, me));
  UOpRef hit = equal;
  if (dtype_is_float(v->dtype)) {  // a NaN is the extreme (max propagates it): its first position
    PG_ASSIGN(nan_v, alu(Ops::CMPNE, {v, v}));
    PG_ASSIGN(nan_m, alu(Ops::CMPNE, {me, me}));
    PG_ASSIGN(both_nan, alu(Ops::AND, {nan_v, nan_m}));
    PG_ASSIGN(either, alu(Ops::OR, {equal, both_nan}));
    hit = either;
  }
  // The first maximum wins: score positions n, n-1, ..., 1 and take the largest hit.
  PG_ASSIGN(pos, arange_along(n, DType::Int32, static_cast<size_t>(axis), v->shape));
  PG_ASSIGN(nn, constant(int64_t{n}, DType::Int32, v->shape));
  PG_ASSIGN(score, alu(Ops::SUB, {nn, pos}));
  PG_ASSIGN(zero, constant(int64_t{0}, DType::Int32, v->shape));
  PG_ASSIGN(scored, alu(Ops::WHERE, {hit, score, zero}));
  PG_ASSIGN(best, reduce(Ops::MAX, scored, {axis}));
  PG_ASSIGN(nb, constant(int64_t{n}, DType::Int32, best->shape));
  PG_ASSIGN(idx, alu(Ops::SUB, {nb, best}));
  if (keepdim) return idx;
  Shape out;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (static_cast<int64_t>(i) != axis) out.push_back(x->shape[i]);
  return reshape(idx, out);
}

absl::StatusOr<UOpRef> triangle(const UOpRef& x, int64_t k, bool lower) {
  if (x->shape.size() < 2) return absl::InvalidArgumentError("tril/triu need at least 2 axes");
  size_t r = x->shape.size();
  PG_ASSIGN(i, arange_along(x->shape[r - 2], DType::Int64, r - 2, x->shape));
  PG_ASSIGN(j, arange_along(x->shape[r - 1], DType::Int64, r - 1, x->shape));
  PG_ASSIGN(d, alu(Ops::SUB, {j, i}));
  // lower: j - i <= k  <=>  j - i < k + 1;  upper: j - i >= k  <=>  !(j - i < k)
  PG_ASSIGN(kk, constant(lower ? k + 1 : k, DType::Int64, x->shape));
  PG_ASSIGN(below, alu(Ops::CMPLT, {d, kk}));
  UOpRef keep = below;
  if (!lower) {
    PG_ASSIGN(nb, alu(Ops::NOT, {below}));
    keep = nb;
  }
  PG_ASSIGN(zero, constant(int64_t{0}, x->dtype, x->shape));
  return alu(Ops::WHERE, {keep, x, zero});
}

}  // namespace

absl::StatusOr<UOpRef> one_hot(const UOpRef& idx, int64_t n) {
  if (!dtype_is_int(idx->dtype)) return absl::InvalidArgumentError(absl::StrCat("one_hot needs integer indices, got ", dtype_name(idx->dtype)));
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("one_hot needs n >= 1, got ", n));
  Shape s = idx->shape;
  s.push_back(1);
  PG_ASSIGN(r, reshape(idx, s));
  s.back() = n;
  PG_ASSIGN(e, expand(r, s));
  PG_ASSIGN(a, arange_along(n, idx->dtype, s.size() - 1, s));
  PG_ASSIGN(hit, eq(e, a));
  return cast(hit, idx->dtype);
}

absl::StatusOr<UOpRef> argmax(const UOpRef& x, int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, true); }
absl::StatusOr<UOpRef> argmin(const UOpRef& x, int64_t axis, bool keepdim) { return arg_extreme(x, axis, keepdim, false); }

absl::StatusOr<UOpRef> cumsum(const UOpRef& x, int64_t axis_in) {
  PG_ASSIGN(axis, axis_of(axis_in, x));
  std::vector<int64_t> perm = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(t, permute(x, perm));
  const int64_t n = t->shape.back();
  if (n == 0) return x;
  // Window i of the left-padded axis covers elements 0..i: a sum over windows of size n.
  Pairs pads(t->shape.size(), {0, 0});
  pads.back() = {n - 1, 0};
  PG_ASSIGN(padded, pad(t, pads));
  PG_ASSIGN(win, pool_windows(padded, {n}, {1}, {1}));  // (..., n, n)
  int64_t r = static_cast<int64_t>(win->shape.size());
  PG_ASSIGN(s, reduce(Ops::ADD, win, {r - 1}));
  PG_ASSIGN(flat, reshape(s, t->shape));
  return permute(flat, inverse_permutation(perm));
}

absl::StatusOr<UOpRef> tril(const UOpRef& x, int64_t k) { return triangle(x, k, true); }
absl::StatusOr<UOpRef> triu(const UOpRef& x, int64_t k) { return triangle(x, k, false); }

absl::StatusOr<UOpRef> gather(const UOpRef& x, int64_t axis_in, const UOpRef& index) {
  PG_ASSIGN(axis, axis_of(axis_in, x));
  if (!dtype_is_int(index->dtype)) return absl::InvalidArgumentError("gather needs integer indices");
  if (index->shape.size() != x->shape.size())
    return absl::InvalidArgumentError("gather: index must have the input's rank");
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (static_cast<int64_t>(i) != axis && index->shape[i] != x->shape[i])
      return absl::InvalidArgumentError(absl::StrCat("gather: index axis ", i, " has size ", index->shape[i], ", input has ", x->shape[i]));
  std::vector<int64_t> perm = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(xt, permute(x, perm));       // (..., n)
  PG_ASSIGN(it, permute(index, perm));   // (..., m)
  PG_ASSIGN(g, gather_last(xt, it));
  return permute(g, inverse_permutation(perm));
}

}  // namespace polygrad::frontend
