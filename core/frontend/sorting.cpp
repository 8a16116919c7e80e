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

// (B, m, 2, j) -> the halves (B, m, j) at `half` 0 or 1 of the third axis.
absl::StatusOr<UOpRef> half_of(const UOpRef& v, int64_t half) {
  const Shape& s = v->shape;
  PG_ASSIGN(cut, shrink(v, Pairs{{0, s[0]}, {0, s[1]}, {half, half + 1}, {0, s[3]}}));
  return reshape(cut, Shape{s[0], s[1], s[3]});
}

// The halves (B, m, j) back as (B, m * 2 * j): first[.., i] then second[.., i] for each block.
// WHERE of the two padded halves, not their sum, so -0.0 stays -0.0; the PAD also lets the
// scheduler cut the network into kernels (a long chain before a PAD is materialized), without
// which each stage, reading two elements of the one before, would recompute 2^stages.
absl::StatusOr<UOpRef> interleave(const UOpRef& first, const UOpRef& second) {
  const Shape& s = first->shape;
  const Shape four{s[0], s[1], 1, s[2]};
  PG_ASSIGN(a, reshape(first, four));
  PG_ASSIGN(b, reshape(second, four));
  PG_ASSIGN(pa, pad(a, Pairs{{0, 0}, {0, 0}, {0, 1}, {0, 0}}));
  PG_ASSIGN(pb, pad(b, Pairs{{0, 0}, {0, 0}, {1, 0}, {0, 0}}));
  PG_ASSIGN(slot, positions(pa->shape, -2));
  PG_ASSIGN(zero, constant(int64_t{0}, DType::Int32, slot->shape));
  PG_ASSIGN(is_first, alu(Ops::CMPNE, {slot, zero}));
  PG_ASSIGN(pick, alu(Ops::WHERE, {is_first, pb, pa}));
  return reshape(pick, Shape{s[0], s[1] * 2 * s[2]});
}

// A sort's rows as the bitonic networks see them: `rows` of `n` elements, padded to `big`, the
// next power of two.
struct NetworkRows {
  int64_t rows = 1, n, big = 1;
  explicit NetworkRows(const Shape& shape) : n(shape.back()) {
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    while (big < n) big *= 2;
  }
};

// Calls stage(k, j) for each of the log2(big)(log2(big)+1)/2 stages of a bitonic network, in order.
template <class Stage>
absl::Status for_each_stage(int64_t big, Stage stage) {
  for (int64_t k = 2; k <= big; k *= 2)
    for (int64_t j = k / 2; j >= 1; j /= 2)
      if (absl::Status s = stage(k, j); !s.ok()) return s;
  return absl::OkStatus();
}

// For the halves (B, m, j) of a bitonic stage (k, j): whether block b sorts descending, i.e. bit k
// of its first position (b * 2j) is set. A pair swaps when "the second half goes first" differs
// from this.
absl::StatusOr<UOpRef> block_descends(const Shape& halves, int64_t k, int64_t j) {
  PG_ASSIGN(blk, positions(halves, -2));
  PG_ASSIGN(span, constant(2 * j, DType::Int32, halves));
  PG_ASSIGN(start, alu(Ops::MUL, {blk, span}));
  PG_ASSIGN(kk, constant(k, DType::Int32, halves));
  PG_ASSIGN(bit, alu(Ops::AND, {start, kk}));
  PG_ASSIGN(none, constant(int64_t{0}, DType::Int32, halves));
  return alu(Ops::CMPNE, {bit, none});
}

// Sorts t (..., n) along its last axis with a bitonic network over (value, position) pairs:
// O(n log^2 n) comparisons in log2(N)(log2(N)+1)/2 stages, N the next power of two. Ties and the
// padding to N order by position, so the sort is stable and the padding (positions >= n) lands
// last; NaN orders as in `before`. Values reach the output through WHEREs only: bit for bit,
// with their gradient.
absl::StatusOr<UOpRef> sort_last_network(const UOpRef& x, bool descending, bool want_indices) {
  PG_ASSIGN(t, comparable(x));
  const NetworkRows r(t->shape);
  const int64_t rows = r.rows, n = r.n, big = r.big;
  PG_ASSIGN(flat, reshape(t, Shape{rows, n}));
  PG_ASSIGN(val0, pad(flat, Pairs{{0, 0}, {0, big - n}}));
  PG_ASSIGN(pos, positions(Shape{rows, big}, -1));
  UOpRef val = val0, idx = pos;
  absl::Status built = for_each_stage(big, [&](int64_t k, int64_t j) -> absl::Status {
    const int64_t m = big / (2 * j);
    PG_ASSIGN(v4, reshape(val, Shape{rows, m, 2, j}));
    PG_ASSIGN(i4, reshape(idx, Shape{rows, m, 2, j}));
    PG_ASSIGN(lo, half_of(v4, 0));
    PG_ASSIGN(hi, half_of(v4, 1));
    PG_ASSIGN(ilo, half_of(i4, 0));
    PG_ASSIGN(ihi, half_of(i4, 1));
    // hi goes first: by value (either way), ties and padding by position.
    PG_ASSIGN(by_value, descending ? before(lo, hi) : before(hi, lo));
    PG_ASSIGN(tied, same(hi, lo));
    PG_ASSIGN(hi_earlier, alu(Ops::CMPLT, {ihi, ilo}));
    PG_ASSIGN(tie_first, both(tied, hi_earlier));
    PG_ASSIGN(value_first, either(by_value, tie_first));
    PG_ASSIGN(limit, constant(n, DType::Int32, ilo->shape));
    PG_ASSIGN(lo_real, alu(Ops::CMPLT, {ilo, limit}));
    PG_ASSIGN(hi_real, alu(Ops::CMPLT, {ihi, limit}));
    PG_ASSIGN(real, both(lo_real, hi_real));
    PG_ASSIGN(hi_first, alu(Ops::WHERE, {real, value_first, hi_earlier}));
    PG_ASSIGN(descends, block_descends(ilo->shape, k, j));
    PG_ASSIGN(swap, alu(Ops::CMPNE, {hi_first, descends}));
    PG_ASSIGN(v_first, alu(Ops::WHERE, {swap, hi, lo}));
    PG_ASSIGN(v_second, alu(Ops::WHERE, {swap, lo, hi}));
    PG_ASSIGN(i_first, alu(Ops::WHERE, {swap, ihi, ilo}));
    PG_ASSIGN(i_second, alu(Ops::WHERE, {swap, ilo, ihi}));
    PG_ASSIGN(nv, interleave(v_first, v_second));
    PG_ASSIGN(ni, interleave(i_first, i_second));
    val = nv;
    idx = ni;
    return absl::OkStatus();
  });
  if (!built.ok()) return built;
  PG_ASSIGN(kept, shrink(want_indices ? idx : val, Pairs{{0, rows}, {0, n}}));
  PG_ASSIGN(out, reshape(kept, x->shape));
  return !want_indices && x->dtype == DType::Bool ? cast(out, DType::Bool) : out;
}

// Whether an int32 key can order every value of `dt` exactly (widened or reinterpreted).
bool keyable(DType dt) { return dt != DType::Int64 && dt != DType::UInt64 && dt != DType::Float64; }

// x's values as int32 keys in sort order: equal values (-0.0 and 0.0, every NaN) get equal keys,
// NaN the largest. A float's bits order as signed integers once a negative one's magnitude bits
// are flipped; float16 and bfloat16 widen to float32 exactly.
absl::StatusOr<UOpRef> order_keys(const UOpRef& x) {
  auto c32 = [&](int64_t v) { return constant(v, DType::Int32, x->shape); };
  if (dtype_is_float(x->dtype)) {
    PG_ASSIGN(f, cast(x, DType::Float32));
    PG_ASSIGN(zero, constant(0.0, DType::Float32, x->shape));
    PG_ASSIGN(nonzero, alu(Ops::CMPNE, {f, zero}));
    PG_ASSIGN(canon, alu(Ops::WHERE, {nonzero, f, zero}));  // -0.0 keys as 0.0
    PG_ASSIGN(bits, bitcast(canon, DType::Int32));
    PG_ASSIGN(mag, c32(0x7FFFFFFF));
    PG_ASSIGN(flipped, alu(Ops::XOR, {bits, mag}));
    PG_ASSIGN(z, c32(0));
    PG_ASSIGN(negative, alu(Ops::CMPLT, {bits, z}));
    PG_ASSIGN(k, alu(Ops::WHERE, {negative, flipped, bits}));
    PG_ASSIGN(nan, is_nan(f));
    return alu(Ops::WHERE, {nan, mag, k});
  }
  if (x->dtype == DType::UInt32) {  // unsigned order is signed order with the top bit flipped
    PG_ASSIGN(bits, cast(x, DType::Int32));
    PG_ASSIGN(top, c32(std::numeric_limits<int32_t>::min()));
    return alu(Ops::XOR, {bits, top});
  }
  return cast(x, DType::Int32);  // bool and the narrower integers: exact
}

// The bitonic network of sort_last_network over one int64 key per element, (value key << 32) +
// position: one array and one compare per stage instead of a (value, position) pair compared
// three ways, and every key distinct, so the network's order is the stable order. The positions
// come out of the low half; the values are gathered at them (bit for bit, with their gradient).
// Descending sorts complemented value keys: larger first, ties still by position.
absl::StatusOr<UOpRef> sort_last_keys(const UOpRef& x, bool descending, bool want_indices) {
  const NetworkRows r(x->shape);
  const int64_t rows = r.rows, n = r.n, big = r.big;
  PG_ASSIGN(flat, reshape(x, Shape{rows, n}));
  PG_ASSIGN(k32, order_keys(flat));
  UOpRef vk = k32;
  if (descending) {
    PG_ASSIGN(ones, constant(int64_t{-1}, DType::Int32, k32->shape));
    PG_ASSIGN(inv, alu(Ops::XOR, {k32, ones}));
    vk = inv;
  }
  PG_ASSIGN(k64, cast(vk, DType::Int64));
  PG_ASSIGN(shift, constant(int64_t{1} << 32, DType::Int64, k64->shape));
  PG_ASSIGN(high, alu(Ops::MUL, {k64, shift}));
  PG_ASSIGN(pos, positions(k64->shape, -1));
  PG_ASSIGN(pos64, cast(pos, DType::Int64));
  PG_ASSIGN(keys, alu(Ops::ADD, {high, pos64}));
  // The padding to a power of two sorts last: the largest key (no real key reaches it).
  PG_ASSIGN(padded, pad(keys, Pairs{{0, 0}, {0, big - n}}));
  PG_ASSIGN(slot, positions(padded->shape, -1));
  PG_ASSIGN(limit, constant(n, DType::Int32, slot->shape));
  PG_ASSIGN(real, alu(Ops::CMPLT, {slot, limit}));
  PG_ASSIGN(top, constant(std::numeric_limits<int64_t>::max(), DType::Int64, slot->shape));
  PG_ASSIGN(key0, alu(Ops::WHERE, {real, padded, top}));
  UOpRef key = key0;
  absl::Status built = for_each_stage(big, [&](int64_t k, int64_t j) -> absl::Status {
    const int64_t m = big / (2 * j);
    PG_ASSIGN(k4, reshape(key, Shape{rows, m, 2, j}));
    PG_ASSIGN(lo, half_of(k4, 0));
    PG_ASSIGN(hi, half_of(k4, 1));
    PG_ASSIGN(hi_less, alu(Ops::CMPLT, {hi, lo}));
    PG_ASSIGN(descends, block_descends(lo->shape, k, j));
    PG_ASSIGN(swap, alu(Ops::CMPNE, {hi_less, descends}));
    PG_ASSIGN(first, alu(Ops::WHERE, {swap, hi, lo}));
    PG_ASSIGN(second, alu(Ops::WHERE, {swap, lo, hi}));
    PG_ASSIGN(next, interleave(first, second));
    key = next;
    return absl::OkStatus();
  });
  if (!built.ok()) return built;
  PG_ASSIGN(kept, shrink(key, Pairs{{0, rows}, {0, n}}));
  PG_ASSIGN(low, constant(int64_t{0xFFFFFFFF}, DType::Int64, kept->shape));
  PG_ASSIGN(at64, alu(Ops::AND, {kept, low}));
  PG_ASSIGN(at, cast(at64, DType::Int32));
  if (want_indices) return reshape(at, x->shape);
  PG_ASSIGN(values, gather_last(flat, at));
  return reshape(values, x->shape);
}

// Sorts t (..., n) along its last axis.
absl::StatusOr<UOpRef> sort_last(const UOpRef& x, bool descending, bool want_indices) {
  if (x->shape.back() > kSortNetworkFrom) {
    return keyable(x->dtype) ? sort_last_keys(x, descending, want_indices)
                             : sort_last_network(x, descending, want_indices);
  }
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
