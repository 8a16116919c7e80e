#include "core/frontend/composite_ops.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/random.h"
#include "core/frontend/scatter.h"

namespace polygrad::frontend {
namespace {

// `shape` with `extra` appended: the grid an op compares over.
absl::Status check_grid(Shape shape, int64_t extra, const CompositeCall& call, std::string_view what) {
  shape.push_back(extra);
  return call.check_shape(shape, what);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;  // bounded: every decoded tensor passed check_shape
  return n;
}

}  // namespace

absl::StatusOr<UOpRef> build_scatter_reduce(const CompositeCall& call) {
  absl::StatusOr<int64_t> axis = one_axis(call.arg);
  if (!axis.ok()) return axis.status();
  absl::StatusOr<frontend::ScatterReduce> reduce = frontend::parse_scatter_reduce(call.arg.mode);
  if (!reduce.ok()) return reduce.status();
  const UOpRef& x = call.src[0];
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (*axis >= -rank && *axis < rank && call.src[1]->shape.size() == x->shape.size()) {
    const int64_t n = x->shape[*axis < 0 ? *axis + rank : *axis];
    if (absl::Status s = check_grid(call.src[1]->shape, n, call, "its index-by-position comparisons"); !s.ok()) return s;
  }
  return frontend::scatter_reduce(x, *axis, call.src[1], call.src[2], *reduce, call.arg.include_self);
}

absl::StatusOr<UOpRef> build_interpolate(const CompositeCall& call) {
  const std::vector<int64_t>& sizes = call.arg.shape;
  if (absl::Status s = call.check_shape(sizes, "composite.shape (the output sizes)"); !s.ok()) return s;
  // Each axis gathers: (shape so far with the axis resized) by the axis' old size.
  Shape cur = call.src[0]->shape;
  for (size_t k = 0; k < sizes.size() && sizes.size() <= cur.size(); ++k) {
    const size_t axis = cur.size() - sizes.size() + k;
    const int64_t n = cur[axis];
    cur[axis] = sizes[k];
    if (absl::Status s = check_grid(cur, n, call, "its gather along an axis"); !s.ok()) return s;
  }
  return frontend::interpolate(call.src[0], sizes, call.arg.mode, call.arg.align_corners);
}

absl::StatusOr<UOpRef> build_nonzero(const CompositeCall& call) {
  const UOpRef& x = call.src[0];
  const int64_t n = numel(x->shape);
  if (call.arg.n < 0) return absl::InvalidArgumentError(absl::StrCat("n (the count) must be >= 0, got ", call.arg.n));
  // The running count compares every element with every other; then each of the n rows with
  // every element.
  if (absl::Status s = call.check_shape(Shape{n, n}, "its running count of the nonzero elements"); !s.ok()) return s;
  if (absl::Status s = call.check_shape(Shape{call.arg.n, n}, "its count-by-element comparisons"); !s.ok()) return s;
  return frontend::nonzero(x, call.arg.n, call.arg.fill);
}

absl::StatusOr<UOpRef> build_masked_select(const CompositeCall& call) {
  const int64_t n = numel(call.src[1]->shape);
  // NONZERO's running count and count-by-element comparisons, over the flattened mask.
  if (absl::Status s = call.check_shape(Shape{n, n}, "its running count of the selected elements"); !s.ok()) return s;
  if (absl::Status s = call.check_shape(Shape{call.arg.n, n}, "its count-by-element comparisons"); !s.ok()) return s;
  return frontend::masked_select(call.src[0], call.src[1], call.src[2], call.arg.n);
}

absl::StatusOr<UOpRef> build_max_unpool(const CompositeCall& call) {
  const std::vector<int64_t>& sizes = call.arg.shape;
  if (absl::Status s = call.check_shape(sizes, "composite.shape (the output's spatial sizes)"); !s.ok()) return s;
  const UOpRef& x = call.src[0];
  if (!sizes.empty() && sizes.size() <= x->shape.size()) {
    const auto lead = static_cast<std::ptrdiff_t>(x->shape.size() - sizes.size());
    Shape grid(x->shape.begin(), x->shape.begin() + lead);
    grid.push_back(numel(Shape(x->shape.begin() + lead, x->shape.end())));
    if (absl::Status s = check_grid(grid, numel(sizes), call, "its value-by-position comparisons"); !s.ok()) return s;
  }
  return frontend::max_unpool(x, call.src[1], sizes);
}

absl::StatusOr<UOpRef> build_multinomial(const CompositeCall& call) {
  const UOpRef& w = call.src[0];
  if (!w->shape.empty() && w->shape.size() <= 2 && call.arg.n >= 1) {
    const int64_t rows = w->shape.size() == 2 ? w->shape[0] : 1, classes = w->shape.back();
    // Replacement: a running sum (classes²) and every draw against every class; without: a sort.
    absl::Status s = call.check_shape(Shape{rows, classes, classes}, "its comparisons along the classes");
    if (s.ok()) s = call.check_shape(Shape{rows, call.arg.n, classes}, "its draw-by-class comparisons");
    if (!s.ok()) return s;
  }
  absl::StatusOr<frontend::RandomKey> key = frontend::random_key(call);
  if (!key.ok()) return key.status();
  return frontend::multinomial(w, call.arg.n, call.arg.replacement, *key);
}

}  // namespace polygrad::frontend
