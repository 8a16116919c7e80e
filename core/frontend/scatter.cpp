#include "core/frontend/scatter.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/basic_math.h"
#include "core/frontend/composites.h"
#include "core/frontend/conv.h"
#include "core/frontend/indexing.h"
#include "core/frontend/sorting.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

absl::Status invalid(std::string_view op, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(op), ": ", std::string(what)));
}

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

// A client's word in quotes, cut short: a message never carries a long string back.
std::string quoted(std::string_view s) { return absl::StrCat("'", std::string(s.substr(0, 32)), "'"); }

// t (..., k) as (..., k, n): each element repeated along a new last axis.
absl::StatusOr<UOpRef> spread_last(const UOpRef& t, int64_t n) {
  Shape s = t->shape;
  s.push_back(1);
  PG_ASSIGN(r, reshape(t, s));
  s.back() = n;
  return expand(r, s);
}

// t (..., n) as (..., k, n): the row repeated k times.
absl::StatusOr<UOpRef> repeat_rows(const UOpRef& t, int64_t k) {
  Shape s = t->shape;
  s.insert(s.end() - 1, 1);
  PG_ASSIGN(r, reshape(t, s));
  s[s.size() - 2] = k;
  return expand(r, s);
}

// 0..n-1 of `dtype` along the last axis of `shape`.
absl::StatusOr<UOpRef> positions_last(const Shape& shape, DType dtype) {
  PG_ASSIGN(a, arange(shape.back(), dtype));
  Shape s(shape.size(), 1);
  s.back() = shape.back();
  PG_ASSIGN(r, reshape(a, s));
  return expand(r, shape);
}

absl::StatusOr<UOpRef> equal(const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(ne, alu(Ops::CMPNE, {a, b}));
  return alu(Ops::NOT, {ne});
}

absl::StatusOr<UOpRef> reduce_drop(Ops op, const UOpRef& t, int64_t axis) {
  PG_ASSIGN(r, reduce(op, t, {axis}));
  Shape s = t->shape;
  s.erase(s.begin() + (axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis));
  return reshape(r, s);
}

// The smallest value of `dt` (MAX's identity).
absl::StatusOr<UOpRef> lowest(DType dt, const Shape& shape) {
  if (dtype_is_float(dt)) return constant(-kInf, dt, shape);
  if (dtype_is_unsigned(dt)) return constant(int64_t{0}, dt, shape);
  const int bits = static_cast<int>(dtype_itemsize(dt)) * 8;
  return constant(bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)), dt, shape);
}

// a / b rounded toward -inf for integers with b > 0: IDIV truncates, so a negative a with a
// remainder is one too high.
absl::StatusOr<UOpRef> floor_div_positive(const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(q, alu(Ops::IDIV, {a, b}));
  PG_ASSIGN(r, alu(Ops::MOD, {a, b}));
  PG_ASSIGN(zero, constant(int64_t{0}, a->dtype, a->shape));
  PG_ASSIGN(neg, alu(Ops::CMPLT, {r, zero}));
  PG_ASSIGN(one, constant(int64_t{1}, a->dtype, a->shape));
  PG_ASSIGN(q1, alu(Ops::SUB, {q, one}));
  return alu(Ops::WHERE, {neg, q1, q});
}

// The dtype the updates combine in: bool as int32, 16-bit floats sum and multiply in float32.
DType work_dtype(DType dt, ScatterReduce reduce) {
  if (dt == DType::Bool) return DType::Int32;
  const bool accumulates = reduce != ScatterReduce::Amax && reduce != ScatterReduce::Amin;
  if (accumulates && (dt == DType::Float16 || dt == DType::BFloat16)) return DType::Float32;
  return dt;
}

absl::Status check_scatter(const UOpRef& x, int64_t axis, const UOpRef& index, const UOpRef& src) {
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (!dtype_is_int(index->dtype))
    return invalid("scatter_reduce", absl::StrCat("index must be an integer tensor, got ", dtype_name(index->dtype)));
  if (index->shape.size() != x->shape.size() || src->shape.size() != x->shape.size())
    return invalid("scatter_reduce", absl::StrCat("index ", shape_str(index->shape), " and src ", shape_str(src->shape),
                                                  " must have the input's rank ", rank));
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && index->shape[i] > x->shape[i])
      return invalid("scatter_reduce", absl::StrCat("index ", shape_str(index->shape), " exceeds the input ",
                                                    shape_str(x->shape), " on axis ", i));
    if (src->shape[i] < index->shape[i])
      return invalid("scatter_reduce", absl::StrCat("src ", shape_str(src->shape), " is smaller than index ",
                                                    shape_str(index->shape), " on axis ", i));
  }
  return absl::OkStatus();
}

// x's elements at positions (m,) int32 along `axis`, the same positions for every other index.
absl::StatusOr<UOpRef> gather_at(const UOpRef& x, int64_t axis, const UOpRef& positions) {
  const int64_t m = positions->shape[0];
  Shape s(x->shape.size(), 1);
  s[axis] = m;
  PG_ASSIGN(r, reshape(positions, s));
  Shape full = x->shape;
  full[axis] = m;
  PG_ASSIGN(e, expand(r, full));
  return gather(x, axis, e);
}

absl::StatusOr<UOpRef> f64(double v, int64_t m) { return constant(v, DType::Float64, Shape{m}); }

// min(t, hi) for an int32 t.
absl::StatusOr<UOpRef> at_most(const UOpRef& t, int64_t hi) {
  PG_ASSIGN(h, constant(hi, t->dtype, t->shape));
  PG_ASSIGN(below, alu(Ops::CMPLT, {t, h}));
  return alu(Ops::WHERE, {below, t, h});
}

// One axis of interpolate: n -> m. Positions as torch (area_pixel_compute_source_index and the
// nearest rules), in float64 from 0..m-1.
absl::StatusOr<UOpRef> resize_axis(const UOpRef& x, int64_t axis, int64_t m, std::string_view mode,
                                   bool align_corners) {
  const int64_t n = x->shape[axis];
  PG_ASSIGN(dst, arange(m, DType::Float64));
  if (mode != "linear") {
    // nearest: floor(dst * n/m); nearest-exact: floor((dst + 0.5) * n/m); never past n - 1.
    PG_ASSIGN(off, f64(mode == "nearest-exact" ? 0.5 : 0.0, m));
    PG_ASSIGN(shifted, alu(Ops::ADD, {dst, off}));
    PG_ASSIGN(scale, f64(static_cast<double>(n) / static_cast<double>(m), m));
    PG_ASSIGN(src, alu(Ops::MUL, {shifted, scale}));
    PG_ASSIGN(idx, cast(src, DType::Int32));  // src >= 0: truncation is floor
    PG_ASSIGN(clamped, at_most(idx, n - 1));
    return gather_at(x, axis, clamped);
  }
  UOpRef src;
  if (align_corners) {
    const double scale = m > 1 ? static_cast<double>(n - 1) / static_cast<double>(m - 1) : 0.0;
    PG_ASSIGN(sc, f64(scale, m));
    PG_ASSIGN(s, alu(Ops::MUL, {dst, sc}));
    src = s;
  } else {  // max((dst + 0.5) * n/m - 0.5, 0)
    PG_ASSIGN(half, f64(0.5, m));
    PG_ASSIGN(centre, alu(Ops::ADD, {dst, half}));
    PG_ASSIGN(sc, f64(static_cast<double>(n) / static_cast<double>(m), m));
    PG_ASSIGN(scaled, alu(Ops::MUL, {centre, sc}));
    PG_ASSIGN(back, alu(Ops::SUB, {scaled, half}));
    PG_ASSIGN(zero, f64(0.0, m));
    PG_ASSIGN(s, alu(Ops::MAX, {back, zero}));
    src = s;
  }
  PG_ASSIGN(lo_raw, cast(src, DType::Int32));
  PG_ASSIGN(lo, at_most(lo_raw, n - 1));
  PG_ASSIGN(one, constant(int64_t{1}, DType::Int32, Shape{m}));
  PG_ASSIGN(lo1, alu(Ops::ADD, {lo, one}));
  PG_ASSIGN(hi, at_most(lo1, n - 1));
  PG_ASSIGN(lo_f, cast(lo, DType::Float64));
  PG_ASSIGN(frac64, alu(Ops::SUB, {src, lo_f}));
  PG_ASSIGN(frac, cast(frac64, x->dtype));
  // One reduce for the axis, not a gather per neighbour (a kernel per axis, not 2^axes copies of
  // the ones before): out[..., j] = sum_i [i == lo_j] x_i (1 - f_j) + [i == hi_j] x_i f_j,
  // selected with WHERE so an inf elsewhere in the row stays out.
  const std::vector<int64_t> perm = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(xt, permute(x, perm));
  PG_ASSIGN(xg, repeat_rows(xt, m));  // (..., m, n)
  const Shape& g = xg->shape;
  auto per_output = [&](const UOpRef& t) -> absl::StatusOr<UOpRef> {  // (m,) along the grid's m axis
    Shape s(g.size(), 1);
    s[g.size() - 2] = m;
    PG_ASSIGN(r, reshape(t, s));
    return expand(r, g);
  };
  PG_ASSIGN(pos, positions_last(g, DType::Int32));
  PG_ASSIGN(lo_g, per_output(lo));
  PG_ASSIGN(hi_g, per_output(hi));
  PG_ASSIGN(f_g, per_output(frac));
  PG_ASSIGN(is_lo, equal(pos, lo_g));
  PG_ASSIGN(is_hi, equal(pos, hi_g));
  PG_ASSIGN(ones, constant(1.0, x->dtype, g));
  PG_ASSIGN(zeros, constant(0.0, x->dtype, g));
  PG_ASSIGN(wl, alu(Ops::SUB, {ones, f_g}));
  PG_ASSIGN(xl, alu(Ops::MUL, {xg, wl}));
  PG_ASSIGN(xh, alu(Ops::MUL, {xg, f_g}));
  PG_ASSIGN(a, alu(Ops::WHERE, {is_lo, xl, zeros}));
  PG_ASSIGN(b, alu(Ops::WHERE, {is_hi, xh, zeros}));
  PG_ASSIGN(both, alu(Ops::ADD, {a, b}));
  PG_ASSIGN(out, reduce_drop(Ops::ADD, both, -1));
  return permute(out, inverse_permutation(perm));
}

}  // namespace

absl::StatusOr<ScatterReduce> parse_scatter_reduce(std::string_view name) {
  if (name == "none") return ScatterReduce::None;
  if (name == "sum") return ScatterReduce::Sum;
  if (name == "prod") return ScatterReduce::Prod;
  if (name == "mean") return ScatterReduce::Mean;
  if (name == "amax") return ScatterReduce::Amax;
  if (name == "amin") return ScatterReduce::Amin;
  return absl::InvalidArgumentError(absl::StrCat(
      "scatter_reduce: reduce must be 'none', 'sum', 'prod', 'mean', 'amax' or 'amin', got ", quoted(name)));
}

absl::StatusOr<UOpRef> scatter_reduce(const UOpRef& x, int64_t axis_in, const UOpRef& index, const UOpRef& src_in,
                                      ScatterReduce reduce, bool include_self) {
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (rank == 0) return invalid("scatter_reduce", "needs at least one axis, got a 0-d tensor");
  if (axis_in < -rank || axis_in >= rank)
    return invalid("scatter_reduce", absl::StrCat("axis ", axis_in, " is out of range for rank ", rank));
  const int64_t axis = axis_in < 0 ? axis_in + rank : axis_in;
  if (absl::Status s = check_scatter(x, axis, index, src_in); !s.ok()) return s;
  UOpRef src = src_in;
  if (src->shape != index->shape) {
    Pairs keep;
    for (int64_t d : index->shape) keep.push_back({0, d});
    PG_ASSIGN(cut, shrink(src, keep));
    src = cut;
  }
  const DType w = work_dtype(x->dtype, reduce);
  const std::vector<int64_t> perm = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(xt, permute(x, perm));   // (..., n)
  // Positions compare in int32 or int64: in a narrow or unsigned index dtype, an arange past its
  // range would wrap onto small positions.
  PG_ASSIGN(wide_in, index->dtype == DType::Int32 ? index : cast(index, DType::Int64));
  UOpRef wide = wide_in;
  Pairs grow;  // an index smaller than x off the axis (torch allows it) updates that corner only
  for (int64_t i = 0; i < rank; ++i) grow.push_back({0, i == axis ? 0 : x->shape[i] - index->shape[i]});
  if (std::any_of(grow.begin(), grow.end(), [](const auto& p) { return p.second > 0; })) {
    // The grown index is -1 (no position) there: shifted up by one, padded with 0, shifted back.
    PG_ASSIGN(one, constant(int64_t{1}, wide->dtype, wide->shape));
    PG_ASSIGN(up, alu(Ops::ADD, {wide, one}));
    PG_ASSIGN(grown, pad(up, grow));
    PG_ASSIGN(minus_one, constant(int64_t{-1}, wide->dtype, grown->shape));
    PG_ASSIGN(back, alu(Ops::ADD, {grown, minus_one}));
    PG_ASSIGN(src_grown, pad(src, grow));
    wide = back;
    src = src_grown;
  }
  PG_ASSIGN(it, permute(wide, perm));  // (..., m)
  PG_ASSIGN(ut, permute(src, perm));
  const int64_t n = xt->shape.back();
  // hits[..., j, i]: update j lands on position i.
  PG_ASSIGN(ie, spread_last(it, n));
  PG_ASSIGN(pos, positions_last(ie->shape, it->dtype));
  PG_ASSIGN(hits, equal(ie, pos));
  PG_ASSIGN(uw, cast(ut, w));
  PG_ASSIGN(upd, spread_last(uw, n));
  PG_ASSIGN(hit_count, cast(hits, DType::Int32));
  PG_ASSIGN(count, reduce_drop(Ops::ADD, hit_count, -2));  // (..., n): updates per position
  PG_ASSIGN(none, constant(int64_t{0}, DType::Int32, count->shape));
  PG_ASSIGN(written, alu(Ops::CMPLT, {none, count}));
  PG_ASSIGN(keep, cast(xt, w));
  const bool with_self = include_self && reduce != ScatterReduce::None;
  // The updates landing on each position folded with `op` (`filler`, its identity, where none
  // lands), then with the input's own value when it takes part.
  auto fold = [&](Ops op, const UOpRef& u, const UOpRef& filler, const UOpRef& self) -> absl::StatusOr<UOpRef> {
    PG_ASSIGN(picked, alu(Ops::WHERE, {hits, u, filler}));
    PG_ASSIGN(r, reduce_drop(op, picked, -2));
    if (!with_self) return r;
    return alu(op, {r, self});
  };
  UOpRef total;
  switch (reduce) {
    case ScatterReduce::None: {
      // torch writes the updates in order: of several landing on one position, the last wins.
      const Shape& hs = hits->shape;
      Shape js(hs.size(), 1);
      js[hs.size() - 2] = hs[hs.size() - 2];
      PG_ASSIGN(j, arange(js[hs.size() - 2], DType::Int32));
      PG_ASSIGN(j_col, reshape(j, js));
      PG_ASSIGN(jpos, expand(j_col, hs));
      PG_ASSIGN(no_j, constant(int64_t{-1}, DType::Int32, hs));
      PG_ASSIGN(hit_j, alu(Ops::WHERE, {hits, jpos, no_j}));
      PG_ASSIGN(last_j, frontend::reduce(Ops::MAX, hit_j, {-2}));
      PG_ASSIGN(last_all, expand(last_j, hs));
      PG_ASSIGN(wins, equal(jpos, last_all));
      PG_ASSIGN(winner, alu(Ops::AND, {hits, wins}));
      PG_ASSIGN(zero, constant(int64_t{0}, w, upd->shape));
      PG_ASSIGN(picked, alu(Ops::WHERE, {winner, upd, zero}));
      PG_ASSIGN(s, reduce_drop(Ops::ADD, picked, -2));
      total = s;
      break;
    }
    case ScatterReduce::Sum:
    case ScatterReduce::Mean: {
      PG_ASSIGN(zero, constant(int64_t{0}, w, upd->shape));
      PG_ASSIGN(s, fold(Ops::ADD, upd, zero, keep));
      total = s;
      if (reduce == ScatterReduce::Mean) {
        PG_ASSIGN(one, constant(int64_t{1}, DType::Int32, count->shape));
        UOpRef c = count;
        if (with_self) {
          PG_ASSIGN(c1, alu(Ops::ADD, {count, one}));
          c = c1;
        }
        PG_ASSIGN(at_least_one, alu(Ops::MAX, {c, one}));
        PG_ASSIGN(divisor, cast(at_least_one, w));
        PG_ASSIGN(q, dtype_is_float(w) ? alu(Ops::FDIV, {total, divisor}) : floor_div_positive(total, divisor));
        total = q;
      }
      break;
    }
    case ScatterReduce::Prod: {
      PG_ASSIGN(one, constant(int64_t{1}, w, upd->shape));
      PG_ASSIGN(p, fold(Ops::MUL, upd, one, keep));
      total = p;
      break;
    }
    case ScatterReduce::Amax:
    case ScatterReduce::Amin: {
      const bool is_min = reduce == ScatterReduce::Amin;
      UOpRef u = upd, k = keep;
      if (is_min) {
        PG_ASSIGN(ru, order_reversed(upd));
        PG_ASSIGN(rk, order_reversed(keep));
        u = ru;
        k = rk;
      }
      PG_ASSIGN(low, lowest(w, u->shape));
      PG_ASSIGN(mx, fold(Ops::MAX, u, low, k));
      total = mx;
      if (is_min) {
        PG_ASSIGN(back, order_reversed(total));
        total = back;
      }
      break;
    }
  }
  PG_ASSIGN(result, cast(total, x->dtype));
  PG_ASSIGN(out, alu(Ops::WHERE, {written, result, xt}));
  return permute(out, inverse_permutation(perm));
}

absl::StatusOr<UOpRef> nll_loss(const UOpRef& logp, const UOpRef& target_in, const UOpRef& weight,
                                int64_t ignore_index, std::string_view reduction) {
  const auto rank = static_cast<int64_t>(logp->shape.size());
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return invalid("nll_loss", absl::StrCat("reduction must be 'mean', 'sum' or 'none', got ", quoted(reduction)));
  if (rank == 0) return invalid("nll_loss", "log-probabilities need a class axis, got a 0-d tensor");
  if (!dtype_is_float(logp->dtype))
    return invalid("nll_loss", absl::StrCat("log-probabilities must be float, got ", dtype_name(logp->dtype)));
  const int64_t ax = rank >= 2 ? 1 : 0;
  const int64_t classes = logp->shape[ax];
  Shape want = logp->shape;
  want.erase(want.begin() + ax);
  if (target_in->shape != want)
    return invalid("nll_loss", absl::StrCat("targets of shape ", shape_str(target_in->shape),
                                            " do not fit log-probabilities ", shape_str(logp->shape), " (want ",
                                            shape_str(want), ")"));
  if (!dtype_is_float(target_in->dtype) && !dtype_is_int(target_in->dtype))
    return invalid("nll_loss", absl::StrCat("targets must be class indices, got ", dtype_name(target_in->dtype)));
  // Compared as int64: in a narrow or unsigned dtype, ignore_index (-100 for none) or a class
  // number past the dtype would wrap onto a real class. Float targets (class indices loaded as
  // floats, the seed API) are truncated.
  UOpRef target = target_in;
  if (target->dtype != DType::Int64) {
    PG_ASSIGN(t, cast(target, DType::Int64));
    target = t;
  }
  if (weight && weight->shape != Shape{classes})
    return invalid("nll_loss",
                   absl::StrCat("weight ", shape_str(weight->shape), " must have one entry per class (", classes, ")"));
  if (classes == 0) return invalid("nll_loss", "no classes");
  // Sums of 16-bit floats accumulate in float32.
  const DType w = logp->dtype == DType::Float16 || logp->dtype == DType::BFloat16 ? DType::Float32 : logp->dtype;
  PG_ASSIGN(hot, one_hot(target, classes));  // (..., C)
  PG_ASSIGN(hit_last, cast(hot, DType::Bool));
  PG_ASSIGN(tgt, spread_last(target, classes));
  PG_ASSIGN(ignore, constant(ignore_index, target->dtype, tgt->shape));
  PG_ASSIGN(counted, alu(Ops::CMPNE, {tgt, ignore}));
  PG_ASSIGN(hit_counted, alu(Ops::AND, {hit_last, counted}));
  // Class axis back to ax: (N, ..., C) -> (N, C, ...).
  UOpRef hit = hit_counted;
  if (ax == 1 && rank > 2) {
    std::vector<int64_t> p{0, rank - 1};
    for (int64_t i = 1; i < rank - 1; ++i) p.push_back(i);
    PG_ASSIGN(h, permute(hit_counted, p));
    hit = h;
  }
  PG_ASSIGN(lp, cast(logp, w));
  PG_ASSIGN(zero, constant(0.0, w, lp->shape));
  UOpRef wt;  // each element's weight where counted
  if (weight) {
    PG_ASSIGN(wc, cast(weight, w));
    Shape s(static_cast<size_t>(rank), 1);
    s[ax] = classes;
    PG_ASSIGN(wr, reshape(wc, s));
    PG_ASSIGN(we, expand(wr, lp->shape));
    PG_ASSIGN(ws, alu(Ops::WHERE, {hit, we, zero}));
    wt = ws;
  } else {
    PG_ASSIGN(one, constant(1.0, w, lp->shape));
    PG_ASSIGN(ws, alu(Ops::WHERE, {hit, one, zero}));
    wt = ws;
  }
  // Selected with WHERE: a -inf log-probability of another class times weight 0 would be NaN.
  PG_ASSIGN(prod, alu(Ops::MUL, {lp, wt}));
  PG_ASSIGN(picked, alu(Ops::WHERE, {hit, prod, zero}));
  PG_ASSIGN(per_target, reduce_drop(Ops::ADD, picked, ax));
  PG_ASSIGN(loss, alu(Ops::NEG, {per_target}));
  if (reduction == "none") return cast(loss, logp->dtype);
  std::vector<int64_t> all;
  for (size_t i = 0; i < loss->shape.size(); ++i) all.push_back(static_cast<int64_t>(i));
  PG_ASSIGN(total, sum(loss, all, false));
  if (reduction == "sum") return cast(total, logp->dtype);
  std::vector<int64_t> every;
  for (int64_t i = 0; i < rank; ++i) every.push_back(i);
  PG_ASSIGN(weights, sum(wt, every, false));
  PG_ASSIGN(mean, alu(Ops::FDIV, {total, weights}));
  return cast(mean, logp->dtype);
}

absl::StatusOr<UOpRef> interpolate(const UOpRef& x, const std::vector<int64_t>& sizes, std::string_view mode,
                                   bool align_corners) {
  if (mode != "linear" && mode != "nearest" && mode != "nearest-exact")
    return invalid("interpolate",
                   absl::StrCat("mode must be 'linear', 'nearest' or 'nearest-exact', got ", quoted(mode)));
  const size_t rank = x->shape.size();
  if (sizes.empty() || sizes.size() > rank)
    return invalid("interpolate", absl::StrCat("needs 1 to ", rank, " output sizes for a tensor of shape ",
                                               shape_str(x->shape), ", got ", sizes.size()));
  UOpRef t = x;
  if (mode == "linear" && !dtype_is_float(x->dtype)) {
    PG_ASSIGN(f, cast(x, DType::Float32));
    t = f;
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto axis = static_cast<int64_t>(rank - sizes.size() + k);
    if (sizes[k] < 1)
      return invalid("interpolate", absl::StrCat("output size ", sizes[k], " for axis ", axis, " is not positive"));
    if (t->shape[axis] == 0) return invalid("interpolate", absl::StrCat("axis ", axis, " is empty"));
    PG_ASSIGN(r, resize_axis(t, axis, sizes[k], mode, align_corners));
    t = r;
  }
  return t;
}

absl::StatusOr<UOpRef> unfold(const UOpRef& x, int64_t axis_in, int64_t size, int64_t step) {
  const auto rank = static_cast<int64_t>(x->shape.size());
  const int64_t r1 = std::max<int64_t>(rank, 1);  // a 0-d tensor has the one axis 0 (-1)
  if (axis_in < -r1 || axis_in >= r1)
    return invalid("unfold", absl::StrCat("dim ", axis_in, " is out of range for rank ", rank));
  const int64_t axis = axis_in < 0 ? axis_in + r1 : axis_in;
  const int64_t n = rank ? x->shape[axis] : 1;
  if (size < 0 || size > n)
    return invalid("unfold", absl::StrCat("size ", size, " must be from 0 to ", n, " (the size of dim ", axis_in, ")"));
  if (step < 1) return invalid("unfold", absl::StrCat("step must be >= 1, got ", step));
  if (rank == 0) {  // torch: the one element as a window of `size` (0 or 1) elements, no count axis
    PG_ASSIGN(r, reshape(x, Shape{1}));
    return shrink(r, Pairs{{0, size}});
  }
  const std::vector<int64_t> perm = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(t, permute(x, perm));
  const int64_t count = (n - size) / step + 1;
  UOpRef w;
  if (size == 0) {  // windows of nothing: no element to view
    Shape s = t->shape;
    s.back() = count;
    s.push_back(0);
    PG_ASSIGN(c, constant(int64_t{0}, x->dtype, s));
    w = c;
  } else {
    PG_ASSIGN(v, pool_windows(t, {size}, {step}, {1}));  // (..., count, size)
    w = v;
  }
  std::vector<int64_t> back = inverse_permutation(perm);
  back.push_back(rank);  // the window stays last
  return permute(w, back);
}

absl::StatusOr<UOpRef> nonzero(const UOpRef& x, int64_t count, int64_t fill) {
  if (count < 0) return invalid("nonzero", absl::StrCat("count must be >= 0, got ", count));
  if (fill < std::numeric_limits<int32_t>::min() || fill > std::numeric_limits<int32_t>::max()) {
    return invalid("nonzero", absl::StrCat("fill ", fill, " does not fit int32"));
  }
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (count == 0 || rank == 0) return constant(int64_t{0}, DType::Int32, Shape{count, rank});
  int64_t n = 1;
  for (int64_t d : x->shape) n *= d;
  if (n > std::numeric_limits<int32_t>::max()) return invalid("nonzero", "positions past 2^31 - 1 do not fit int32");
  PG_ASSIGN(flat, reshape(x, Shape{n}));
  PG_ASSIGN(zero, constant(int64_t{0}, x->dtype, flat->shape));
  PG_ASSIGN(mask, alu(Ops::CMPNE, {flat, zero}));  // NaN != 0: nonzero, as torch
  PG_ASSIGN(mi, cast(mask, DType::Int32));
  PG_ASSIGN(running, cumsum(mi, 0));
  // hit[k, i]: element i is the k-th nonzero (its running count is k + 1).
  PG_ASSIGN(rank_row, repeat_rows(running, count));         // (count, n)
  PG_ASSIGN(k, arange(count, DType::Int32));
  PG_ASSIGN(one, constant(int64_t{1}, DType::Int32, Shape{count}));
  PG_ASSIGN(k1, alu(Ops::ADD, {k, one}));
  PG_ASSIGN(kk, spread_last(k1, n));                        // (count, n)
  PG_ASSIGN(is_k, equal(rank_row, kk));
  PG_ASSIGN(mask_row, repeat_rows(mask, count));
  PG_ASSIGN(hit, alu(Ops::AND, {is_k, mask_row}));
  PG_ASSIGN(pos, positions_last(hit->shape, DType::Int32));
  PG_ASSIGN(none, constant(int64_t{0}, DType::Int32, hit->shape));
  PG_ASSIGN(picked, alu(Ops::WHERE, {hit, pos, none}));
  PG_ASSIGN(where, reduce_drop(Ops::ADD, picked, 1));     // (count,) flat positions
  UOpRef found;  // (count,) the row has an element; only asked for when rows can be filled
  if (fill != 0) {
    PG_ASSIGN(hits, cast(hit, DType::Int32));
    PG_ASSIGN(hit_count, reduce_drop(Ops::ADD, hits, 1));
    PG_ASSIGN(no_hit, constant(int64_t{0}, DType::Int32, Shape{count}));
    PG_ASSIGN(any_hit, alu(Ops::CMPNE, {hit_count, no_hit}));
    found = any_hit;
  }
  // Row-major coordinates, one column per axis, joined by padding each to (count, rank).
  UOpRef out;
  int64_t stride = 1;
  for (int64_t a = rank - 1; a >= 0; --a) {
    const int64_t d = x->shape[a];
    PG_ASSIGN(st, constant(stride, DType::Int32, Shape{count}));
    PG_ASSIGN(dd, constant(d, DType::Int32, Shape{count}));
    PG_ASSIGN(q, alu(Ops::IDIV, {where, st}));
    PG_ASSIGN(pos_coord, alu(Ops::MOD, {q, dd}));
    UOpRef coord = pos_coord;
    if (fill != 0) {
      PG_ASSIGN(fills, constant(fill, DType::Int32, Shape{count}));
      PG_ASSIGN(filled, alu(Ops::WHERE, {found, pos_coord, fills}));
      coord = filled;
    }
    PG_ASSIGN(col, reshape(coord, Shape{count, 1}));
    PG_ASSIGN(padded, pad(col, Pairs{{0, 0}, {a, rank - 1 - a}}));
    if (out) {
      PG_ASSIGN(sum_cols, alu(Ops::ADD, {out, padded}));
      out = sum_cols;
    } else {
      out = padded;
    }
    stride *= d;
  }
  return out;
}

absl::StatusOr<UOpRef> masked_select(const UOpRef& mask, const UOpRef& x, const UOpRef& fill, int64_t count) {
  if (mask->dtype != DType::Bool)
    return invalid("masked_select", absl::StrCat("the mask must be bool, got ", dtype_name(mask->dtype)));
  if (mask->shape != x->shape)
    return invalid("masked_select", absl::StrCat("mask ", shape_str(mask->shape), " and x ", shape_str(x->shape),
                                                 " differ in shape (the client broadcasts them)"));
  int64_t fill_elements = 1, n = 1;
  for (int64_t d : fill->shape) fill_elements *= d;
  for (int64_t d : x->shape) n *= d;  // bounded: every decoded tensor passed check_shape
  if (fill->dtype != x->dtype || fill_elements != 1)
    return invalid("masked_select", absl::StrCat("fill must be one element of x's dtype ", dtype_name(x->dtype),
                                                 ", got ", dtype_name(fill->dtype), " ", shape_str(fill->shape)));
  if (count < 0) return invalid("masked_select", absl::StrCat("count must be >= 0, got ", count));
  PG_ASSIGN(one, reshape(fill, Shape{1}));
  PG_ASSIGN(fills, expand(one, Shape{count}));
  if (n == 0 || count == 0) return fills;
  // Rows past the count point one past the end: nothing is gathered there, and fill takes over.
  PG_ASSIGN(flat_mask, reshape(mask, Shape{n}));
  PG_ASSIGN(positions, nonzero(flat_mask, count, n));
  PG_ASSIGN(index, reshape(positions, Shape{count}));
  PG_ASSIGN(flat_x, reshape(x, Shape{n}));
  PG_ASSIGN(picked, gather_last(flat_x, index));
  PG_ASSIGN(end, constant(n, DType::Int32, Shape{count}));
  PG_ASSIGN(selected, alu(Ops::CMPLT, {index, end}));
  return alu(Ops::WHERE, {selected, picked, fills});
}

absl::StatusOr<UOpRef> max_unpool(const UOpRef& x, const UOpRef& indices, const Shape& spatial) {
  const size_t n = spatial.size();
  if (n < 1 || n > 3 || x->shape.size() < n)
    return invalid("max_unpool", absl::StrCat("needs 1 to 3 output sizes, at most the values' rank; got ", shape_str(spatial),
                                              " for values ", shape_str(x->shape)));
  if (indices->shape != x->shape || !dtype_is_int(indices->dtype))
    return invalid("max_unpool", absl::StrCat("indices must be integers of the values' shape ", shape_str(x->shape),
                                              ", got ", dtype_name(indices->dtype), " ", shape_str(indices->shape)));
  Shape flat(x->shape.begin(), x->shape.end() - static_cast<std::ptrdiff_t>(n)), out = flat, flat_out = flat;
  int64_t count = 1, volume = 1;
  for (size_t i = 0; i < n; ++i) count *= x->shape[x->shape.size() - n + i], volume *= spatial[i];  // checked
  flat.push_back(count);
  flat_out.push_back(volume);
  out.insert(out.end(), spatial.begin(), spatial.end());
  PG_ASSIGN(idx, reshape(indices, flat));
  PG_ASSIGN(v, reshape(x, flat));
  // The values are written as their bits (a sum over the positions would turn -0.0 into +0.0):
  // the last write wins, so copies of one element (overlapping windows) leave it exact.
  const bool is_float = dtype_is_float(x->dtype);
  const DType bits = is_float ? uint_of_size(dtype_itemsize(x->dtype)) : x->dtype;
  PG_ASSIGN(vb, is_float ? bitcast(v, bits) : absl::StatusOr<UOpRef>(v));
  PG_ASSIGN(zero_bits, constant(int64_t{0}, bits, flat_out));
  PG_ASSIGN(written_bits, scatter_reduce(zero_bits, -1, idx, vb, ScatterReduce::None, false));
  if (!is_float) return reshape(written_bits, out);
  PG_ASSIGN(written, bitcast(written_bits, x->dtype));
  // The gradient path: a summed scatter of v - v (+0 wherever v is finite; the where keeps a
  // nan or inf from reaching the sum), subtracted, which leaves every value's bits (-0.0 - +0 is
  // -0.0). Its gradient gives each value the output's gradient at its index, all of it to every
  // copy: torch's max_unpool backward, a gather.
  PG_ASSIGN(dv, detached(v));
  PG_ASSIGN(diff, alu(Ops::SUB, {dv, v}));
  PG_ASSIGN(zero, constant(int64_t{0}, x->dtype, flat));
  PG_ASSIGN(is_zero, equal(diff, zero));
  PG_ASSIGN(nothing, alu(Ops::WHERE, {is_zero, diff, zero}));
  PG_ASSIGN(zeros, constant(int64_t{0}, x->dtype, flat_out));
  PG_ASSIGN(moved, scatter_reduce(zeros, -1, idx, nothing, ScatterReduce::Sum, false));
  PG_ASSIGN(kept, alu(Ops::SUB, {written, moved}));
  return reshape(kept, out);
}

absl::StatusOr<UOpRef> multinomial(const UOpRef& weights, int64_t num_samples, bool replacement, RandomKey key) {
  const size_t rank = weights->shape.size();
  if (rank != 1 && rank != 2)
    return invalid("multinomial",
                   absl::StrCat("takes a 1-D or 2-D tensor of weights, got shape ", shape_str(weights->shape)));
  if (num_samples < 1) return invalid("multinomial", absl::StrCat("num_samples must be >= 1, got ", num_samples));
  const int64_t rows = rank == 2 ? weights->shape[0] : 1, n = weights->shape.back();
  if (n == 0) return invalid("multinomial", "no classes to draw from");
  if (!replacement && num_samples > n)
    return invalid("multinomial", absl::StrCat(num_samples, " samples without replacement from ", n, " classes"));
  const DType w = weights->dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  PG_ASSIGN(wc, cast(weights, w));
  PG_ASSIGN(w2, reshape(wc, Shape{rows, n}));
  UOpRef out;
  if (replacement) {
    // The number of classes whose running share is <= u, for u uniform in [0, 1).
    PG_ASSIGN(run, cumsum(w2, 1));
    PG_ASSIGN(total, sum(w2, {1}, true));
    PG_ASSIGN(te, expand(total, run->shape));
    PG_ASSIGN(cdf, alu(Ops::FDIV, {run, te}));
    PG_ASSIGN(u, rand(Shape{rows, num_samples, 1}, w, key));
    PG_ASSIGN(ue, expand(u, Shape{rows, num_samples, n}));
    PG_ASSIGN(cr, reshape(cdf, Shape{rows, 1, n}));
    PG_ASSIGN(ce, expand(cr, Shape{rows, num_samples, n}));
    PG_ASSIGN(below, alu(Ops::CMPLT, {ue, ce}));
    PG_ASSIGN(passed, alu(Ops::NOT, {below}));
    PG_ASSIGN(pi, cast(passed, DType::Int32));
    PG_ASSIGN(c, reduce_drop(Ops::ADD, pi, 2));
    PG_ASSIGN(clamped, at_most(c, n - 1));  // rounding can leave the last share just under 1
    out = clamped;
  } else {
    // Gumbel top-k: the k largest of log(w) + g, g = -log(-log(u)), are a draw without replacement.
    PG_ASSIGN(u, rand(Shape{rows, n}, w, key));
    PG_ASSIGN(tiny, constant(1e-20, w, u->shape));
    PG_ASSIGN(up, alu(Ops::MAX, {u, tiny}));
    PG_ASSIGN(l1, log(up));
    PG_ASSIGN(n1, alu(Ops::NEG, {l1}));
    PG_ASSIGN(l2, log(n1));
    PG_ASSIGN(g, alu(Ops::NEG, {l2}));
    PG_ASSIGN(lw, log(w2));
    PG_ASSIGN(score, alu(Ops::ADD, {lw, g}));
    PG_ASSIGN(top, topk(score, 1, num_samples, true, true));
    out = top;
  }
  return rank == 2 ? out : reshape(out, Shape{num_samples});
}

}  // namespace polygrad::frontend
