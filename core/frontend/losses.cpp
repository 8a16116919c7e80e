#include "core/frontend/losses.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/composites.h"
#include "core/frontend/indexing.h"
#include "core/frontend/math.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

using Built = absl::StatusOr<UOpRef>;

absl::Status invalid(std::string_view op, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(op), ": ", std::string(what)));
}

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

absl::Status check_reduction(std::string_view op, std::string_view reduction) {
  if (reduction == "mean" || reduction == "sum" || reduction == "none") return absl::OkStatus();
  // A client's word, cut short: a message never carries a long string back.
  return invalid(op, absl::StrCat("reduction must be 'mean', 'sum' or 'none', got '", std::string(reduction.substr(0, 32)), "'"));
}

absl::Status check_smoothing(std::string_view op, double s) {
  if (s >= 0 && s <= 1) return absl::OkStatus();  // false for NaN too
  return invalid(op, absl::StrCat("label_smoothing must be in [0, 1], got ", s));
}

// The float dtype a loss of predictions in `dt` is reported in, and the one it computes in.
DType float_of(DType dt) { return dtype_is_float(dt) ? dt : DType::Float32; }
DType work_of(DType dt) {
  const DType f = float_of(dt);
  return f == DType::Float16 || f == DType::BFloat16 ? DType::Float32 : f;
}

Built scaled(const UOpRef& x, double v) {
  PG_ASSIGN(c, constant(v, x->dtype, x->shape));
  return alu(Ops::MUL, {x, c});
}

// 1 - x.
Built one_minus(const UOpRef& x) {
  PG_ASSIGN(one, constant(1.0, x->dtype, x->shape));
  return alu(Ops::SUB, {one, x});
}

// The per-element losses reduced as asked, in the reported dtype.
Built reduced(const UOpRef& loss, std::string_view reduction, DType out) {
  if (reduction == "none") return cast(loss, out);
  PG_ASSIGN(r, reduction == "sum" ? sum(loss, {}, false) : mean(loss, {}, false));
  return cast(r, out);
}

// Class indices as an integer tensor: integral floats (labels loaded as floats) truncated.
Built class_indices(std::string_view op, const UOpRef& y) {
  if (dtype_is_int(y->dtype)) return y;
  if (dtype_is_float(y->dtype)) return cast(y, DType::Int32);
  return invalid(op, absl::StrCat("class indices must be integers, got ", dtype_name(y->dtype)));
}

// Predictions and targets of one float dtype and shape (the clients broadcast and promote them,
// as for any elementwise op), cast to the dtype the loss computes in.
absl::Status same_float(std::string_view op, const std::vector<UOpRef>& xs) {
  for (const UOpRef& t : xs) {
    if (!dtype_is_float(t->dtype))
      return invalid(op, absl::StrCat("needs float operands, got ", dtype_name(t->dtype)));
    if (t->dtype != xs[0]->dtype || t->shape != xs[0]->shape)
      return invalid(op, absl::StrCat("operands differ in dtype or shape: ", dtype_name(xs[0]->dtype), " ",
                                      shape_str(xs[0]->shape), " vs ", dtype_name(t->dtype), " ", shape_str(t->shape)));
  }
  return absl::OkStatus();
}

Built to_work(const UOpRef& x) { return cast(x, work_of(x->dtype)); }

}  // namespace

Built cross_entropy(const UOpRef& x, const UOpRef& y, int64_t axis, double label_smoothing,
                    std::string_view reduction) {
  constexpr std::string_view kOp = "cross_entropy";
  if (absl::Status s = check_reduction(kOp, reduction); !s.ok()) return s;
  if (absl::Status s = check_smoothing(kOp, label_smoothing); !s.ok()) return s;
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (rank == 0) return invalid(kOp, "logits need a class axis, got a 0-d tensor");
  if (axis < -rank || axis >= rank) return invalid(kOp, absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  const int64_t ax = axis < 0 ? axis + rank : axis;
  const int64_t classes = x->shape[ax];
  Shape per_sample = x->shape;
  per_sample.erase(per_sample.begin() + ax);
  PG_ASSIGN(xw, to_work(x));
  UOpRef target;
  if (y->shape == per_sample && static_cast<int64_t>(y->shape.size()) == rank - 1) {
    PG_ASSIGN(idx, class_indices(kOp, y));
    PG_ASSIGN(hot, one_hot(idx, classes));  // (..., C): the class axis last
    UOpRef t = hot;
    if (ax != rank - 1) {  // back to `ax`
      std::vector<int64_t> order;
      for (int64_t i = 0; i < ax; ++i) order.push_back(i);
      order.push_back(rank - 1);
      for (int64_t i = ax; i < rank - 1; ++i) order.push_back(i);
      PG_ASSIGN(p, permute(hot, order));
      t = p;
    }
    PG_ASSIGN(f, cast(t, xw->dtype));
    target = f;
  } else if (y->shape == x->shape) {
    PG_ASSIGN(f, cast(y, xw->dtype));
    target = f;
  } else {
    return invalid(kOp, absl::StrCat("targets of shape ", shape_str(y->shape), " fit neither class indices ",
                                     shape_str(per_sample), " nor class probabilities ", shape_str(x->shape)));
  }
  if (label_smoothing != 0) {
    PG_ASSIGN(kept, scaled(target, 1 - label_smoothing));
    PG_ASSIGN(spread, constant(label_smoothing / static_cast<double>(classes), xw->dtype, x->shape));
    PG_ASSIGN(t, alu(Ops::ADD, {kept, spread}));
    target = t;
  }
  PG_ASSIGN(lsm, log_softmax(xw, ax));
  PG_ASSIGN(prod, alu(Ops::MUL, {lsm, target}));
  PG_ASSIGN(total, sum(prod, {ax}, false));
  PG_ASSIGN(loss, alu(Ops::NEG, {total}));
  return reduced(loss, reduction, float_of(x->dtype));
}

Built sparse_categorical_crossentropy(const UOpRef& x, const UOpRef& y, int64_t ignore_index, double label_smoothing,
                                      std::string_view reduction) {
  constexpr std::string_view kOp = "sparse_categorical_crossentropy";
  if (absl::Status s = check_reduction(kOp, reduction); !s.ok()) return s;
  if (absl::Status s = check_smoothing(kOp, label_smoothing); !s.ok()) return s;
  if (x->shape.empty()) return invalid(kOp, "logits need a class axis, got a 0-d tensor");
  const Shape rows(x->shape.begin(), x->shape.end() - 1);
  if (y->shape != rows)
    return invalid(kOp, absl::StrCat("targets of shape ", shape_str(y->shape), " do not fit logits ",
                                     shape_str(x->shape), " (want class indices of shape ", shape_str(rows), ")"));
  PG_ASSIGN(idx, class_indices(kOp, y));
  PG_ASSIGN(xw, to_work(x));
  const DType w = xw->dtype;
  PG_ASSIGN(lp, log_softmax(xw, -1));
  UOpRef counted;  // bool (...): the targets that count
  if (ignore_index == -1) {
    PG_ASSIGN(all, constant(int64_t{1}, DType::Bool, rows));
    counted = all;
  } else {
    // Compared as int64: in a narrow or unsigned dtype ignore_index would wrap onto a real class.
    PG_ASSIGN(wide, cast(idx, DType::Int64));
    PG_ASSIGN(ig, constant(ignore_index, DType::Int64, rows));
    PG_ASSIGN(ne, alu(Ops::CMPNE, {wide, ig}));
    counted = ne;
  }
  PG_ASSIGN(maskf, cast(counted, w));
  Shape col = rows;
  col.push_back(1);
  PG_ASSIGN(mask_col, reshape(maskf, col));
  PG_ASSIGN(mask_rows, expand(mask_col, x->shape));
  PG_ASSIGN(hot, one_hot(idx, x->shape.back()));
  PG_ASSIGN(hotf, cast(hot, w));
  PG_ASSIGN(target, alu(Ops::MUL, {hotf, mask_rows}));
  PG_ASSIGN(picked, alu(Ops::MUL, {lp, target}));
  PG_ASSIGN(picked_sum, sum(picked, {-1}, false));
  PG_ASSIGN(unreduced_hit, scaled(picked_sum, 1 - label_smoothing));
  PG_ASSIGN(row_mean, mean(lp, {-1}, false));
  PG_ASSIGN(row_mean_counted, alu(Ops::MUL, {row_mean, maskf}));
  PG_ASSIGN(smoothing, scaled(row_mean_counted, label_smoothing));
  PG_ASSIGN(unreduced, alu(Ops::ADD, {unreduced_hit, smoothing}));
  const DType out = float_of(x->dtype);
  if (reduction == "none") {
    PG_ASSIGN(neg, alu(Ops::NEG, {unreduced}));
    return cast(neg, out);
  }
  PG_ASSIGN(total, sum(unreduced, {}, false));
  UOpRef r = total;
  if (reduction == "mean") {  // over the counted targets only
    PG_ASSIGN(n, sum(maskf, {}, false));
    PG_ASSIGN(m, alu(Ops::FDIV, {total, n}));
    r = m;
  }
  PG_ASSIGN(neg, alu(Ops::NEG, {r}));
  return cast(neg, out);
}

Built binary_crossentropy(const UOpRef& x, const UOpRef& y, std::string_view reduction) {
  constexpr std::string_view kOp = "binary_crossentropy";
  if (absl::Status s = check_reduction(kOp, reduction); !s.ok()) return s;
  if (absl::Status s = same_float(kOp, {x, y}); !s.ok()) return s;
  PG_ASSIGN(xw, to_work(x));
  PG_ASSIGN(yw, to_work(y));
  PG_ASSIGN(log_x, log(xw));
  PG_ASSIGN(not_x, one_minus(xw));
  PG_ASSIGN(log_not_x, log(not_x));
  PG_ASSIGN(not_y, one_minus(yw));
  PG_ASSIGN(neg_y, alu(Ops::NEG, {yw}));
  PG_ASSIGN(pos, alu(Ops::MUL, {neg_y, log_x}));
  PG_ASSIGN(negative, alu(Ops::MUL, {not_y, log_not_x}));
  PG_ASSIGN(loss, alu(Ops::SUB, {pos, negative}));
  return reduced(loss, reduction, x->dtype);
}

Built binary_crossentropy_logits(const UOpRef& x, const UOpRef& y, const UOpRef& pos_weight,
                                 std::string_view reduction) {
  constexpr std::string_view kOp = "binary_crossentropy_logits";
  if (absl::Status s = check_reduction(kOp, reduction); !s.ok()) return s;
  std::vector<UOpRef> operands{x, y};
  if (pos_weight) operands.push_back(pos_weight);
  if (absl::Status s = same_float(kOp, operands); !s.ok()) return s;
  PG_ASSIGN(xw, to_work(x));
  PG_ASSIGN(yw, to_work(y));
  UOpRef wy = yw;
  if (pos_weight) {
    PG_ASSIGN(pw, to_work(pos_weight));
    PG_ASSIGN(p, alu(Ops::MUL, {pw, yw}));
    wy = p;
  }
  PG_ASSIGN(ls_pos, logsigmoid(xw));
  PG_ASSIGN(neg_x, alu(Ops::NEG, {xw}));
  PG_ASSIGN(ls_neg, logsigmoid(neg_x));
  PG_ASSIGN(not_y, one_minus(yw));
  PG_ASSIGN(a, alu(Ops::MUL, {wy, ls_pos}));
  PG_ASSIGN(b, alu(Ops::MUL, {not_y, ls_neg}));
  PG_ASSIGN(both, alu(Ops::ADD, {a, b}));
  PG_ASSIGN(loss, alu(Ops::NEG, {both}));
  return reduced(loss, reduction, x->dtype);
}

}  // namespace polygrad::frontend
