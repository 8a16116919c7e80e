#include "core/frontend/view_write.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/scatter.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

absl::Status invalid(const std::string& why) { return absl::InvalidArgumentError(absl::StrCat("write_view: ", why)); }

std::string shape_str(const Shape& s) { return absl::StrCat("(", absl::StrJoin(s, ", "), ")"); }

// The steps from `view` down to `target`, view's first.
absl::StatusOr<std::vector<const UOp*>> chain_to(const UOpRef& target, const UOpRef& view) {
  std::vector<const UOp*> steps;
  for (const UOp* u = view.get(); u != target.get(); u = u->src[0].get()) {
    switch (u->op) {
      case Ops::RESHAPE:
      case Ops::PERMUTE:
      case Ops::SHRINK:
      case Ops::PAD:
      case Ops::FLIP:
      case Ops::GATHER:  // slice_at's, or any gather along the last axis
        steps.push_back(u);
        break;
      case Ops::EXPAND:
        return invalid(absl::StrCat("the view expands ", shape_str(u->src[0]->shape), " to ", shape_str(u->shape),
                                    ": an element of the target would take several values"));
      default:
        return invalid(absl::StrCat("the view is not a chain of reshape, permute, shrink, pad, flip and gather over the "
                                    "target: it reaches ", op_name(u->op), " ", shape_str(u->shape), " first"));
    }
  }
  return steps;
}

// A gather along the last axis undone: each gathered element back where it was read, 0 elsewhere,
// the last write winning on a repeat. A few gathered elements per row (a KV cache's new row) are a
// WHERE each, with no reduction, so the result fuses into what reads it (and a symbolic dim's loop
// stop reaches it); more are a scatter.
absl::StatusOr<UOpRef> ungather(const Shape& before, const UOpRef& index, const UOpRef& x) {
  constexpr int64_t kUnrolled = 4;
  const size_t last = before.size() - 1;
  const int64_t m = x->shape.back();
  PG_ASSIGN(empty, constant(int64_t{0}, x->dtype, before));
  if (m > kUnrolled) return scatter_reduce(empty, -1, index, x, ScatterReduce::None, false);
  PG_ASSIGN(positions, arange(before.back(), index->dtype));
  Shape along(before.size(), 1);
  along.back() = before.back();
  PG_ASSIGN(row, reshape(positions, along));
  PG_ASSIGN(at, expand(row, before));
  UOpRef out = empty;
  for (int64_t k = 0; k < m; ++k) {
    Pairs one;
    for (size_t d = 0; d < last; ++d) one.emplace_back(0, x->shape[d]);
    one.emplace_back(k, k + 1);
    PG_ASSIGN(index_k, shrink(index, one));
    PG_ASSIGN(value_k, shrink(x, one));
    PG_ASSIGN(wide_index, expand(index_k, before));
    PG_ASSIGN(wide_value, expand(value_k, before));
    PG_ASSIGN(differs, alu(Ops::CMPNE, {wide_index, at}));
    PG_ASSIGN(kept, alu(Ops::WHERE, {differs, out, wide_value}));
    out = kept;
  }
  return out;
}

// Undoes one step on x: from the step's shape back to its source's.
absl::StatusOr<UOpRef> undo(const UOp& step, const UOpRef& x) {
  const Shape& before = step.src[0]->shape;
  switch (step.op) {
    case Ops::RESHAPE:
      return reshape(x, before);
    case Ops::PERMUTE:
      return permute(x, inverse_permutation(step.arg_ints()));
    case Ops::FLIP:
      return flip(x, step.arg_ints());
    case Ops::SHRINK: {
      const std::vector<int64_t>& a = step.arg_ints();
      Pairs pads;
      for (size_t i = 0; i < before.size(); ++i) pads.emplace_back(a[2 * i], before[i] - a[2 * i + 1]);
      return pad(x, pads);
    }
    case Ops::PAD: {
      const std::vector<int64_t>& a = step.arg_ints();
      Pairs cut;
      for (size_t i = 0; i < before.size(); ++i) cut.emplace_back(a[2 * i], a[2 * i] + before[i]);
      return shrink(x, cut);
    }
    case Ops::GATHER:
      return ungather(before, step.src[1], x);
    default:
      return invalid(absl::StrCat("cannot undo ", op_name(step.op)));
  }
}

}  // namespace

absl::StatusOr<UOpRef> write_view(const UOpRef& target, const UOpRef& view, const UOpRef& value) {
  if (value->dtype != target->dtype)
    return invalid(absl::StrCat("the value is ", dtype_name(value->dtype), ", the target ", dtype_name(target->dtype)));
  if (value->shape != view->shape)
    return invalid(absl::StrCat("the value's shape ", shape_str(value->shape), " differs from the view's ",
                                shape_str(view->shape)));
  if (!target->extents.empty() || !view->extents.empty() || !value->extents.empty())
    return invalid("a symbolic dim (a Variable's size) in the target, view or value");
  PG_ASSIGN(steps, chain_to(target, view));
  UOpRef out = value;
  PG_ASSIGN(all, constant(int64_t{1}, DType::Bool, view->shape));
  UOpRef written = all;
  bool everywhere = true;  // only a shrink or a gather leaves elements of the target unwritten
  for (const UOp* step : steps) {
    PG_ASSIGN(o, undo(*step, out));
    PG_ASSIGN(w, undo(*step, written));
    out = o;
    written = w;
    everywhere &= step->op != Ops::SHRINK && step->op != Ops::GATHER;
  }
  if (everywhere) return out;
  return alu(Ops::WHERE, {written, out, target});
}

}  // namespace polygrad::frontend
