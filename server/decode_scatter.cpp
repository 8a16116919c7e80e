#include "server/decode_scatter.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/scatter.h"
#include "server/decode.h"

namespace polygrad::server {
namespace {

absl::StatusOr<int64_t> one_axis(const v1::CompositeArg& c) {
  if (c.axes_size() != 1)
    return absl::InvalidArgumentError(absl::StrCat("needs exactly one axis in composite.axes, got ", c.axes_size()));
  return c.axes(0);
}

// `shape` with `extra` appended: the grid an op compares over.
absl::Status check_grid(Shape shape, int64_t extra, const Limits& limits, std::string_view what) {
  shape.push_back(extra);
  return check_shape(shape, limits, what);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;  // bounded: every decoded tensor passed check_shape
  return n;
}

absl::StatusOr<UOpRef> scatter_reduce(const v1::CompositeArg& c, const std::vector<UOpRef>& src, const Limits& limits) {
  absl::StatusOr<int64_t> axis = one_axis(c);
  if (!axis.ok()) return axis.status();
  absl::StatusOr<frontend::ScatterReduce> reduce = frontend::parse_scatter_reduce(c.mode());
  if (!reduce.ok()) return reduce.status();
  const UOpRef& x = src[0];
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (*axis >= -rank && *axis < rank && src[1]->shape.size() == x->shape.size()) {
    const int64_t n = x->shape[*axis < 0 ? *axis + rank : *axis];
    if (absl::Status s = check_grid(src[1]->shape, n, limits, "its index-by-position comparisons"); !s.ok()) return s;
  }
  return frontend::scatter_reduce(x, *axis, src[1], src[2], *reduce, c.include_self());
}

absl::StatusOr<UOpRef> interpolate(const v1::CompositeArg& c, const UOpRef& x, const Limits& limits) {
  std::vector<int64_t> sizes(c.shape().begin(), c.shape().end());
  if (absl::Status s = check_shape(sizes, limits, "composite.shape (the output sizes)"); !s.ok()) return s;
  // Each axis gathers: (shape so far with the axis resized) by the axis' old size.
  Shape cur = x->shape;
  for (size_t k = 0; k < sizes.size() && sizes.size() <= cur.size(); ++k) {
    const size_t axis = cur.size() - sizes.size() + k;
    const int64_t n = cur[axis];
    cur[axis] = sizes[k];
    if (absl::Status s = check_grid(cur, n, limits, "its gather along an axis"); !s.ok()) return s;
  }
  return frontend::interpolate(x, sizes, c.mode(), c.align_corners());
}

absl::StatusOr<UOpRef> nonzero(const v1::CompositeArg& c, const UOpRef& x, const Limits& limits) {
  const int64_t n = numel(x->shape);
  if (c.n() < 0) return absl::InvalidArgumentError(absl::StrCat("n (the count) must be >= 0, got ", c.n()));
  // The running count compares every element with every other; then each of the n rows with
  // every element.
  if (absl::Status s = check_shape(Shape{n, n}, limits, "its running count of the nonzero elements"); !s.ok()) return s;
  if (absl::Status s = check_shape(Shape{c.n(), n}, limits, "its count-by-element comparisons"); !s.ok()) return s;
  return frontend::nonzero(x, c.n());
}

absl::StatusOr<UOpRef> multinomial(const v1::CompositeArg& c, const UOpRef& w, const Limits& limits) {
  if (!w->shape.empty() && w->shape.size() <= 2 && c.n() >= 1) {
    const int64_t rows = w->shape.size() == 2 ? w->shape[0] : 1, classes = w->shape.back();
    // Replacement: a running sum (classes²) and every draw against every class; without: a sort.
    absl::Status s = check_shape(Shape{rows, classes, classes}, limits, "its comparisons along the classes");
    if (s.ok()) s = check_shape(Shape{rows, c.n(), classes}, limits, "its draw-by-class comparisons");
    if (!s.ok()) return s;
  }
  return frontend::multinomial(w, c.n(), c.replacement(), frontend::RandomKey{c.seed(), c.counter()});
}

}  // namespace

bool is_scatter_op(v1::Op op) {
  switch (op) {
    case v1::SCATTER_REDUCE:
    case v1::NLL_LOSS:
    case v1::INTERPOLATE:
    case v1::UNFOLD:
    case v1::NONZERO:
    case v1::MULTINOMIAL: return true;
    default: return false;
  }
}

absl::StatusOr<UOpRef> build_scatter_op(v1::Op op, const v1::CompositeArg& c, const std::vector<UOpRef>& src,
                                        const Limits& limits) {
  switch (op) {
    case v1::SCATTER_REDUCE: return scatter_reduce(c, src, limits);
    case v1::NLL_LOSS:
      return frontend::nll_loss(src[0], src[1], src.size() > 2 ? src[2] : nullptr, c.ignore_index(), c.mode());
    case v1::INTERPOLATE: return interpolate(c, src[0], limits);
    case v1::UNFOLD: {
      absl::StatusOr<int64_t> axis = one_axis(c);
      if (!axis.ok()) return axis.status();
      return frontend::unfold(src[0], *axis, c.n(), c.step());
    }
    case v1::NONZERO: return nonzero(c, src[0], limits);
    case v1::MULTINOMIAL: return multinomial(c, src[0], limits);
    default: return absl::InternalError("not a scatter op");
  }
}

}  // namespace polygrad::server
