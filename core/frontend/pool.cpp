// Max and average pooling over 1, 2 or 3 spatial axes, and max pooling's indices.
#include <cstdint>
#include <limits>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/composites.h"
#include "core/frontend/conv.h"
#include "core/frontend/conv_internal.h"
#include "core/frontend/status_macros.h"

namespace polygrad::frontend {
namespace {

// The smallest value of a dtype (-inf for floats), exactly representable in it.
std::variant<int64_t, double> lowest(DType dt) {
  switch (dt) {
    case DType::Int8: return int64_t{std::numeric_limits<int8_t>::min()};
    case DType::Int16: return int64_t{std::numeric_limits<int16_t>::min()};
    case DType::Int32: return int64_t{std::numeric_limits<int32_t>::min()};
    case DType::Int64: return std::numeric_limits<int64_t>::min();
    default:
      if (dtype_is_float(dt)) return -std::numeric_limits<double>::infinity();
      return int64_t{0};  // unsigned and bool
  }
}

// The padding pairs of a pooling over kernel.size() trailing axes, after checking the counts.
absl::StatusOr<Pairs> pool_padding(const char* what, const UOpRef& x, const std::vector<int64_t>& kernel,
                                   const ConvParams& p) {
  if (kernel.empty() || kernel.size() > kMaxSpatial || kernel.size() > x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat(what, " pools over 1 to ", kMaxSpatial,
                                                   " trailing axes (the kernel's length), got a kernel of ", kernel.size(),
                                                   " values for input (", absl::StrJoin(x->shape, ", "), ")"));
  return spatial_padding(p.padding, kernel.size());
}

// A bool mask of the spatial shape, true inside the input and false in its padding.
absl::StatusOr<UOpRef> inside_mask(const Shape& spatial, const Pairs& pads) {
  PG_ASSIGN(ones, constant(int64_t{1}, DType::Bool, spatial));
  return pad_spatial(ones, pads);
}

// x padded with the dtype's lowest value, so padding never wins a maximum.
absl::StatusOr<UOpRef> pad_lowest(const UOpRef& x, const Pairs& pads) {
  PG_ASSIGN(padded, pad_spatial(x, pads));
  if (padded == x) return x;
  const Shape spatial(x->shape.end() - static_cast<std::ptrdiff_t>(pads.size()), x->shape.end());
  PG_ASSIGN(inside, inside_mask(spatial, pads));
  PG_ASSIGN(in_all, broadcast_to(inside, padded->shape));
  PG_ASSIGN(fill, constant(lowest(x->dtype), x->dtype, padded->shape));
  return alu(Ops::WHERE, {in_all, padded, fill});
}

// The last n axes of `win` reduced with `op`, then dropped.
absl::StatusOr<UOpRef> reduce_window(Ops op, const UOpRef& win, size_t n) {
  const auto r = static_cast<int64_t>(win->shape.size());
  std::vector<int64_t> axes;
  for (int64_t a = r - static_cast<int64_t>(n); a < r; ++a) axes.push_back(a);
  PG_ASSIGN(m, reduce(op, win, axes));
  return reshape(m, Shape(win->shape.begin(), win->shape.end() - static_cast<std::ptrdiff_t>(n)));
}

}  // namespace

absl::StatusOr<UOpRef> max_pool(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p) {
  PG_ASSIGN(pads, pool_padding("max_pool", x, kernel, p));
  PG_ASSIGN(src, pad_lowest(x, pads));
  PG_ASSIGN(win, pool_windows(src, kernel, p.stride, p.dilation));
  return reduce_window(Ops::MAX, win, kernel.size());
}

absl::StatusOr<UOpRef> avg_pool(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p) {
  if (!dtype_is_float(x->dtype)) return absl::InvalidArgumentError("avg_pool needs a float tensor");
  PG_ASSIGN(pads, pool_padding("avg_pool", x, kernel, p));
  PG_ASSIGN(padded, pad_spatial(x, pads));
  PG_ASSIGN(win, pool_windows(padded, kernel, p.stride, p.dilation));
  PG_ASSIGN(sum, reduce_window(Ops::ADD, win, kernel.size()));
  int64_t volume = 1;
  for (int64_t k : kernel) volume *= k;
  PG_ASSIGN(inv, constant(1.0 / static_cast<double>(volume), x->dtype, sum->shape));
  return alu(Ops::MUL, {sum, inv});
}

absl::StatusOr<UOpRef> max_pool_indices(const UOpRef& x, const std::vector<int64_t>& kernel, const ConvParams& p) {
  PG_ASSIGN(pads, pool_padding("max_pool", x, kernel, p));
  const size_t n = kernel.size();
  const Shape spatial(x->shape.end() - static_cast<std::ptrdiff_t>(n), x->shape.end());
  int64_t volume = 1;
  for (int64_t d : spatial) volume *= d;
  if (volume > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("max_pool indices: a spatial volume of ", volume,
                                                   " elements does not fit the int32 indices"));
  PG_ASSIGN(src, pad_lowest(x, pads));
  PG_ASSIGN(win, pool_windows(src, kernel, p.stride, p.dilation));  // (*prefix, *out, *k)
  // Each window element's flat position in the input, and whether it is inside the input: the
  // same windows over the spatial shape alone, broadcast over the prefix.
  PG_ASSIGN(flat, arange(volume, DType::Int64));
  PG_ASSIGN(grid, reshape(flat, spatial));
  PG_ASSIGN(grid_p, pad_spatial(grid, pads));
  PG_ASSIGN(pos_w, pool_windows(grid_p, kernel, p.stride, p.dilation));
  PG_ASSIGN(pos, broadcast_to(pos_w, win->shape));
  PG_ASSIGN(inside, inside_mask(spatial, pads));
  PG_ASSIGN(in_w, pool_windows(inside, kernel, p.stride, p.dilation));
  PG_ASSIGN(in_win, broadcast_to(in_w, win->shape));
  // Score each element so that one max picks torch's winner: a maximum inside the input scores
  // V-1-pos (the first wins), a NaN V+pos (the last wins, above any number), the rest -1.
  const auto r = static_cast<int64_t>(win->shape.size());
  std::vector<int64_t> window_axes;
  for (int64_t a = r - static_cast<int64_t>(n); a < r; ++a) window_axes.push_back(a);
  PG_ASSIGN(m, reduce(Ops::MAX, win, window_axes));  // keeps the window axes at size 1
  PG_ASSIGN(me, expand(m, win->shape));
  PG_ASSIGN(ne, alu(Ops::CMPNE, {win, me}));
  PG_ASSIGN(equal, alu(Ops::NOT, {ne}));
  PG_ASSIGN(hit, alu(Ops::AND, {equal, in_win}));
  PG_ASSIGN(vm1, constant(volume - 1, DType::Int64, win->shape));
  PG_ASSIGN(first, alu(Ops::SUB, {vm1, pos}));
  PG_ASSIGN(none, constant(int64_t{-1}, DType::Int64, win->shape));
  PG_ASSIGN(scored, alu(Ops::WHERE, {hit, first, none}));
  UOpRef score = scored;
  if (dtype_is_float(x->dtype)) {
    PG_ASSIGN(nan, alu(Ops::CMPNE, {win, win}));
    PG_ASSIGN(vv, constant(volume, DType::Int64, win->shape));
    PG_ASSIGN(last, alu(Ops::ADD, {vv, pos}));
    PG_ASSIGN(with_nan, alu(Ops::WHERE, {nan, last, scored}));
    score = with_nan;
  }
  PG_ASSIGN(best, reduce_window(Ops::MAX, score, n));
  // Decode: best >= V is a NaN at best - V; 0 <= best < V a maximum at V-1-best; -1 no element.
  const Shape& o = best->shape;
  PG_ASSIGN(v_o, constant(volume, DType::Int64, o));
  PG_ASSIGN(vm1_o, constant(volume - 1, DType::Int64, o));
  PG_ASSIGN(zero_o, constant(int64_t{0}, DType::Int64, o));
  PG_ASSIGN(none_o, constant(int64_t{-1}, DType::Int64, o));
  PG_ASSIGN(is_num, alu(Ops::CMPLT, {best, v_o}));
  PG_ASSIGN(is_none, alu(Ops::CMPLT, {best, zero_o}));
  PG_ASSIGN(from_nan, alu(Ops::SUB, {best, v_o}));
  PG_ASSIGN(from_max, alu(Ops::SUB, {vm1_o, best}));
  PG_ASSIGN(idx1, alu(Ops::WHERE, {is_num, from_max, from_nan}));
  PG_ASSIGN(idx, alu(Ops::WHERE, {is_none, none_o, idx1}));
  return cast(idx, DType::Int32);
}

}  // namespace polygrad::frontend
