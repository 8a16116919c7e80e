#include "core/frontend/composite_table.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/engine/placement.h"
#include "core/frontend/arith.h"
#include "core/frontend/basic_math.h"
#include "core/frontend/composite_ops.h"
#include "core/frontend/composites.h"
#include "core/frontend/einsum.h"
#include "core/frontend/factorizations.h"
#include "core/frontend/indexing.h"
#include "core/frontend/losses.h"
#include "core/frontend/math.h"
#include "core/frontend/optimizers.h"
#include "core/frontend/random.h"
#include "core/frontend/scatter.h"
#include "core/frontend/sorting.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"
#include "core/frontend/view_write.h"

namespace polygrad::frontend {

absl::StatusOr<int64_t> one_axis(const CompositeArgs& a) {
  if (a.axes.size() != 1)
    return absl::InvalidArgumentError(absl::StrCat("needs exactly one axis in composite.axes, got ", a.axes.size()));
  return a.axes[0];
}

namespace {

using Call = CompositeCall;
using Built = absl::StatusOr<UOpRef>;

absl::StatusOr<DType> required_dtype(const Call& c) {
  if (!c.dtype) return absl::InvalidArgumentError("dtype is required");
  return *c.dtype;
}

// Scans and sorts compare every element of the axis with every other: the work of a tensor with
// the axis' size appended, held to the limits like any tensor (else one node could keep a worker
// busy for hours). An axis out of range is left to the builder to name.
absl::Status check_pairwise(const Call& c, int64_t axis) {
  const UOpRef& x = c.src[0];
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (axis < -rank || axis >= rank) return absl::OkStatus();
  Shape grid = x->shape;
  grid.push_back(x->shape[axis < 0 ? axis + rank : axis]);
  return c.check_shape(grid, "its pairwise comparisons along the axis");
}

// Builders of the ops that take one source and nothing else.
template <Built (*F)(const UOpRef&)>
Built unary(const Call& c) {
  return F(c.src[0]);
}
template <Built (*F)(const UOpRef&, const UOpRef&)>
Built binary(const Call& c) {
  return F(c.src[0], c.src[1]);
}

// Builders of the ops along one axis.
template <Built (*F)(const UOpRef&, int64_t)>
Built along(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return F(c.src[0], *axis);
}
template <Built (*F)(const UOpRef&, int64_t)>
Built scan(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = check_pairwise(c, *axis); !s.ok()) return s;
  return F(c.src[0], *axis);
}
template <Built (*F)(const UOpRef&, int64_t, bool)>
Built along_keepdim(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return F(c.src[0], *axis, c.arg.keepdim);
}
template <Built (*F)(const UOpRef&, int64_t, bool)>
Built scan_indices(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = check_pairwise(c, *axis); !s.ok()) return s;
  return F(c.src[0], *axis, c.arg.indices);
}

// Sorting compares pairwise up to kSortNetworkFrom elements per row; longer rows go through the
// bitonic network, whose stages each hold the rows padded to a power of two.
absl::Status check_sort(const Call& c, int64_t axis) {
  const UOpRef& x = c.src[0];
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (axis < -rank || axis >= rank) return absl::OkStatus();
  const int64_t n = x->shape[axis < 0 ? axis + rank : axis];
  if (n <= kSortNetworkFrom) return check_pairwise(c, axis);
  Shape padded = x->shape;
  int64_t big = 1;
  while (big < n) big *= 2;
  padded[axis < 0 ? axis + rank : axis] = big;
  return c.check_shape(padded, "its sorting network's rows padded to a power of two");
}

Built sort_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = check_sort(c, *axis); !s.ok()) return s;
  return sort(c.src[0], *axis, c.arg.descending, c.arg.indices);
}

Built topk_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  if (absl::Status s = check_sort(c, *axis); !s.ok()) return s;
  return topk(c.src[0], *axis, c.arg.n, c.arg.descending, c.arg.indices);
}

// The masked form's fourth source is the mask; p > 0 drops attention weights (seed, counter).
Built attention(const Call& c) {
  const UOpRef mask = c.src.size() > 3 ? c.src[3] : nullptr;
  PG_ASSIGN(key, random_key(c));
  return scaled_dot_product_attention(c.src[0], c.src[1], c.src[2], mask, c.arg.causal, c.arg.p, key);
}

Built arange_op(const Call& c) {
  absl::StatusOr<DType> dt = required_dtype(c);
  if (!dt.ok()) return dt.status();
  if (c.shape.size() != 1) return absl::InvalidArgumentError("ARANGE takes shape = [n]");
  if (absl::Status s = c.check_shape(c.shape, "shape"); !s.ok()) return s;
  if (c.src.empty()) return arange(c.shape[0], *dt);
  if (c.src.size() != 2) return absl::InvalidArgumentError("ARANGE takes no sources, or two: start and step");
  return arange_from(c.shape[0], *dt, c.src[0], c.src[1]);
}

// Each Newton-Schulz step multiplies (rows x rows) by (rows x cols) once per coefficient: that
// work over the batch of matrices `s` is held to the limits before anything is built.
absl::Status check_newton_schulz_work(const Call& c, const Shape& s, const UOpRef& coefficients, std::string_view what) {
  if (s.size() < 2 || coefficients->shape.size() != 1 || c.arg.n < 1 || c.arg.n > 64) return absl::OkStatus();
  const int64_t rows = std::min(s[s.size() - 2], s.back()), cols = std::max(s[s.size() - 2], s.back());
  Shape grid(s.begin(), s.end() - 2);
  grid.insert(grid.end(), {rows, rows, cols, c.arg.n, coefficients->shape[0]});
  return c.check_work(grid, what);
}

Built newton_schulz_op(const Call& c) {
  if (absl::Status s = check_newton_schulz_work(c, c.src[0]->shape, c.src[1], "NEWTON_SCHULZ's matrix products");
      !s.ok())
    return s;
  return newton_schulz(c.src[0], c.src[1], c.arg.n, c.arg.eps);
}

// The product over every label is computed, never allocated: held to the work bound.
Built einsum_op(const Call& c) {
  return einsum(c.src, c.arg.equation, [&](const Shape& grid) { return c.check_work(grid, "EINSUM's product"); });
}

Built eye_op(const Call& c) {
  absl::StatusOr<DType> dt = required_dtype(c);
  if (!dt.ok()) return dt.status();
  if (c.shape.size() != 2) return absl::InvalidArgumentError("EYE takes shape = [n, m]");
  if (absl::Status s = c.check_shape(c.shape, "shape"); !s.ok()) return s;
  return eye(c.shape[0], c.shape[1], *dt);
}

Built linspace_op(const Call& c) {
  absl::StatusOr<DType> dt = required_dtype(c);
  if (!dt.ok()) return dt.status();
  if (c.arg.shape.size() != 1) return absl::InvalidArgumentError("LINSPACE takes composite.shape = [steps]");
  if (absl::Status s = c.check_shape(c.arg.shape, "composite.shape"); !s.ok()) return s;
  return linspace(c.arg.shape[0], c.arg.start, c.arg.stop, *dt);
}

Built cat_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  absl::StatusOr<UOpRef> joined = cat(std::vector<UOpRef>(c.src.begin(), c.src.end()), *axis);
  if (!joined.ok()) return joined.status();
  if (absl::Status s = c.check_shape((*joined)->shape, "CAT's result"); !s.ok()) return s;
  return joined;
}

Built one_hot_op(const Call& c) {
  if (c.arg.n < 1 || static_cast<uint64_t>(c.arg.n) > c.max_elements)
    return absl::InvalidArgumentError(absl::StrCat("ONE_HOT needs 1 <= n <= max_elements, got ", c.arg.n));
  return one_hot(c.src[0], c.arg.n);
}

Built gather_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return gather(c.src[0], *axis, c.src[1]);
}

}  // namespace

absl::StatusOr<RandomKey> random_key(const CompositeCall& call) {
  RandomKey key{call.arg.seed, call.arg.counter};
  PG_ASSIGN(words, random_key_words(key.seed, key.counter));
  if (call.random_key_data) {
    PG_ASSIGN(data, call.random_key_data(words));
    key.words = data;
  }
  return key;
}

namespace {

template <Built (*F)(const Shape&, DType, RandomKey)>
Built random_op(const Call& c) {
  absl::StatusOr<DType> dt = required_dtype(c);
  if (!dt.ok()) return dt.status();
  if (absl::Status s = c.check_shape(c.arg.shape, "composite.shape"); !s.ok()) return s;
  PG_ASSIGN(key, random_key(c));
  return F(c.arg.shape, *dt, key);
}

// randn * std + mean, in the node's dtype (the clients built it so before).
Built normal_op(const Call& c) {
  PG_ASSIGN(z, random_op<randn>(c));
  PG_ASSIGN(std, constant(c.arg.std, z->dtype, z->shape));
  PG_ASSIGN(mean, constant(c.arg.mean, z->dtype, z->shape));
  PG_ASSIGN(scaled, alu(Ops::MUL, {z, std}));
  return alu(Ops::ADD, {scaled, mean});
}

Built randint_op(const Call& c) {
  absl::StatusOr<DType> dt = required_dtype(c);
  if (!dt.ok()) return dt.status();
  if (absl::Status s = c.check_shape(c.arg.shape, "composite.shape"); !s.ok()) return s;
  PG_ASSIGN(key, random_key(c));
  return randint(c.arg.shape, *dt, c.arg.low, c.arg.high, key);
}

Built copy_op(const Call& c) {
  // The name is parsed to a code here and never used as text again.
  absl::StatusOr<int64_t> code = device_code(c.arg.device);
  if (!code.ok()) return absl::InvalidArgumentError(absl::StrCat("COPY: ", code.status().message()));
  if (c.check_device) {
    if (absl::Status s = c.check_device(*code); !s.ok()) return s;
  }
  return copy(c.src[0], *code);
}

Built unfold_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return unfold(c.src[0], *axis, c.arg.n, c.arg.step);
}

Built normalize_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return lp_normalize(c.src[0], c.arg.p, *axis, c.arg.eps);
}

Built cross_entropy_op(const Call& c) {
  absl::StatusOr<int64_t> axis = one_axis(c.arg);
  if (!axis.ok()) return axis.status();
  return cross_entropy(c.src[0], c.src[1], *axis, c.arg.label_smoothing, c.arg.mode);
}

// An optional trailing source, null when absent.
UOpRef optional_src(const Call& c, size_t i) { return c.src.size() > i ? c.src[i] : nullptr; }

// The normalizations: N sources to normalize with, then the optional per-channel weight and bias.
Built groups_norm(const Call& c) { return group_norm(c.src[0], c.arg.groups, c.arg.eps); }
Built train_norm(const Call& c) { return batchnorm_train(c.src[0], c.arg.eps); }
Built eval_norm(const Call& c) { return batchnorm_eval(c.src[0], c.src[1], c.src[2], c.arg.eps); }
template <size_t N, Built (*F)(const Call&)>
Built normalization_op(const Call& c) {
  PG_ASSIGN(y, F(c));
  return channel_affine(y, optional_src(c, N), optional_src(c, N + 1));
}

// Layer and RMS norm: over the last normalized_axes axes, then the optional weight and bias of
// those axes' shape (RMS_NORM's schema takes no bias).
Built layer_norm(const Call& c) { return layernorm(c.src[0], c.arg.normalized_axes, c.arg.eps); }
Built rms_norm_of(const Call& c) { return rms_norm(c.src[0], c.arg.normalized_axes, c.arg.eps); }
template <Built (*F)(const Call&)>
Built trailing_norm(const Call& c) {
  PG_ASSIGN(y, F(c));
  return trailing_affine(y, optional_src(c, 1), optional_src(c, 2), c.arg.normalized_axes);
}

Built sgd_update_op(const Call& c) {
  const SgdRule rule{.momentum = c.arg.momentum, .weight_decay = c.arg.weight_decay, .nesterov = c.arg.nesterov};
  return sgd_update(c.src[0], c.src[1], c.src[2], optional_src(c, 3), rule, c.arg.mode);
}

Built adam_update_op(const Call& c) {
  const AdamRule rule{.beta1 = c.arg.beta1, .beta2 = c.arg.beta2, .eps = c.arg.eps,
                      .weight_decay = c.arg.weight_decay, .decoupled = c.arg.decoupled};
  return adam_update(c.src[0], c.src[1], c.src[2], c.src[3], c.src[4], c.src[5], optional_src(c, 6), rule,
                     c.arg.mode);
}

Built lars_update_op(const Call& c) {
  const LarsRule rule{.momentum = c.arg.momentum, .weight_decay = c.arg.weight_decay,
                      .trust_coefficient = c.arg.trust_coefficient, .nesterov = c.arg.nesterov,
                      .classic = c.arg.classic_momentum};
  return lars_update(c.src[0], c.src[1], c.src[2], optional_src(c, 3), rule, c.arg.mode);
}

// Muon's direction is orthogonalized as a (rows, rest) matrix.
Built muon_step_op(const Call& c) {
  const Shape& s = c.src[0]->shape;
  if (s.size() >= 2) {
    int64_t rest = 1;
    for (size_t i = 1; i < s.size(); ++i) rest *= s[i];
    if (absl::Status st = check_newton_schulz_work(c, Shape{s[0], rest}, c.src[3], "MUON_STEP's matrix products");
        !st.ok())
      return st;
  }
  const MuonRule rule{.momentum = c.arg.momentum, .weight_decay = c.arg.weight_decay, .eps = c.arg.eps,
                      .steps = c.arg.n, .nesterov = c.arg.nesterov};
  return muon_step(c.src[0], c.src[1], c.src[2], c.src[3], optional_src(c, 4), rule, c.arg.mode);
}

Built adam_step_op(const Call& c) {
  const AdamRule rule{.beta1 = c.arg.beta1, .beta2 = c.arg.beta2, .eps = c.arg.eps,
                      .weight_decay = c.arg.weight_decay, .decoupled = c.arg.decoupled};
  return adam_step(c.src[0], c.src[1], c.src[2], c.src[3], c.src[4], c.src[5], rule, c.arg.mode);
}

Built lamb_step_op(const Call& c) {
  const LambRule rule{.beta1 = c.arg.beta1, .beta2 = c.arg.beta2, .eps = c.arg.eps, .weight_decay = c.arg.weight_decay};
  return lamb_step(c.src[0], c.src[1], c.src[2], c.src[3], c.src[4], c.src[5], rule, c.arg.mode);
}

Built lamb_update_op(const Call& c) {
  const LambRule rule{.beta1 = c.arg.beta1, .beta2 = c.arg.beta2, .eps = c.arg.eps, .weight_decay = c.arg.weight_decay};
  return lamb_update(c.src[0], c.src[1], c.src[2], c.src[3], c.src[4], c.src[5], c.src[6], rule, c.arg.mode);
}

// VAR and STD (its square root): over composite.axes, or over no axes at all (no_axes).
template <bool Root>
Built spread(const Call& c) {
  if (c.arg.no_axes && !c.arg.axes.empty())
    return absl::InvalidArgumentError(absl::StrCat("no_axes with ", c.arg.axes.size(), " axes in composite.axes"));
  if (!c.arg.no_axes) return Root ? std_dev(c.src[0], c.arg.axes, c.arg.keepdim, c.arg.correction)
                                  : var(c.src[0], c.arg.axes, c.arg.keepdim, c.arg.correction);
  PG_ASSIGN(v, var_of_each(c.src[0], c.arg.correction));
  return Root ? alu(Ops::SQRT, {v}) : v;
}

template <WindowKind K>
Built window_op(const Call& c) {
  return build_window(K, c);
}

// `symbolic_ok`: the builder never reads a size of its sources' axes as a number, so a symbolic
// dim (core/ir/symbolic_dims.h) passes through it: elementwise ops, matmul, and the ops whose only
// use of an axis is a reduction over it (reduce masks what lies past the extent). Others (a mean
// divides by the axis' size) refuse a source with a symbolic dim.
struct Entry {
  std::string_view first;
  CompositeBuilder second;
  bool symbolic_ok = false;
};

// Sorted by name (checked once), so a lookup is a binary search.
constexpr auto kTable = std::to_array<Entry>({
    {"ABS", unary<abs>, true},
    {"ACOS", unary<acos>, true},
    {"ACOSH", unary<acosh>, true},
    {"ADAM_STEP", adam_step_op},
    {"ADAM_UPDATE", adam_update_op},
    {"ARANGE", arange_op},
    {"ARGMAX", along_keepdim<argmax>},
    {"ARGMIN", along_keepdim<argmin>},
    {"ASIN", unary<asin>, true},
    {"ASINH", unary<asinh>, true},
    {"ATAN", unary<atan>, true},
    {"ATANH", unary<atanh>, true},
    {"AVG_POOL2D", window_op<WindowKind::AvgPool>},
    {"BATCHNORM_EVAL", normalization_op<3, eval_norm>},
    {"BATCHNORM_INVSTD",
     [](const Call& c) {
       return batchnorm_invstd(c.src[0], c.src[1], c.src[2], optional_src(c, 3), optional_src(c, 4), c.arg.axes);
     }},
    {"BATCHNORM_TRAIN", normalization_op<1, train_norm>},
    {"BINARY_CROSSENTROPY", [](const Call& c) { return binary_crossentropy(c.src[0], c.src[1], c.arg.mode); }},
    {"BINARY_CROSSENTROPY_LOGITS",
     [](const Call& c) {
       return binary_crossentropy_logits(c.src[0], c.src[1], optional_src(c, 2), c.arg.mode);
     }},
    {"CAT", cat_op},
    {"CEIL", unary<ceil>, true},
    {"CELU", [](const Call& c) { return celu(c.src[0], c.arg.alpha); }},
    {"CLAMP_MAX", binary<clamp_max>, true},
    {"CLAMP_MIN", binary<clamp_min>, true},
    {"CMPEQ", binary<equal>, true},
    {"CMPLE", binary<less_equal>, true},
    {"CONV2D", window_op<WindowKind::Conv>},
    {"CONV_TRANSPOSE2D", window_op<WindowKind::ConvTranspose>},
    {"COPY", copy_op},
    {"COPYSIGN", binary<copysign>, true},
    {"COS", unary<cos>, true},
    {"COSH", unary<cosh>, true},
    {"CROSS_ENTROPY", cross_entropy_op},
    {"CUMMAX", scan_indices<cummax>},
    {"CUMMIN", scan_indices<cummin>},
    {"CUMPROD", scan<cumprod>},
    {"CUMSUM", scan<cumsum>},
    {"DROPOUT", [](const Call& c) -> Built {
       PG_ASSIGN(key, random_key(c));
       return dropout(c.src[0], c.arg.p, key);
     }},
    {"EINSUM", einsum_op},
    {"ELU", [](const Call& c) { return elu(c.src[0], c.arg.alpha); }},
    {"ERF", unary<erf>, true},
    {"EXP", unary<exp>, true},
    {"EXPM1", unary<expm1>, true},
    {"EYE", eye_op},
    {"FLOOR", unary<floor>, true},
    {"FLOOR_DIVIDE", binary<floor_divide>, true},
    {"FMOD", binary<fmod>, true},
    {"GATHER", gather_op},
    {"GELU", unary<gelu>, true},
    {"GELU_ERF", unary<gelu_erf>, true},
    {"GROUP_NORM", normalization_op<1, groups_norm>},
    {"HARDSIGMOID", [](const Call& c) { return hardsigmoid(c.src[0], c.arg.alpha, c.arg.beta); }},
    {"HARDSWISH", unary<hardswish>, true},
    {"HARDTANH", [](const Call& c) { return hardtanh(c.src[0], c.arg.min_val, c.arg.max_val); }},
    {"INTERPOLATE", build_interpolate},
    {"INT_POW", binary<int_pow>, true},
    {"ISCLOSE",
     [](const Call& c) { return isclose(c.src[0], c.src[1], c.arg.rtol, c.arg.atol, c.arg.equal_nan); }},
    {"ISFINITE", unary<isfinite>, true},
    {"ISINF", [](const Call& c) { return isinf(c.src[0], c.arg.detect_positive, c.arg.detect_negative); }},
    {"ISNAN", unary<isnan>, true},
    {"LAMB_STEP", lamb_step_op},
    {"LAMB_UPDATE", lamb_update_op},
    {"LARS_UPDATE", lars_update_op},
    {"LAYERNORM", trailing_norm<layer_norm>},
    {"LEAKY_RELU", [](const Call& c) { return leaky_relu(c.src[0], c.arg.neg_slope); }},
    {"LERP", [](const Call& c) { return lerp(c.src[0], c.src[1], c.src[2]); }},
    {"LINEAR", [](const Call& c) { return linear(c.src[0], c.src[1], optional_src(c, 2)); }},
    {"LINSPACE", linspace_op},
    {"LOG", unary<log>, true},
    {"LOG10", unary<log10>, true},
    {"LOG1P", unary<log1p>, true},
    {"LOGADDEXP", binary<logaddexp>, true},
    {"LOGCUMSUMEXP", scan<logcumsumexp>},
    {"LOGSIGMOID", unary<logsigmoid>, true},
    {"LOGSUMEXP", along_keepdim<logsumexp>, true},
    {"LOG_SOFTMAX", along<log_softmax>, true},
    {"LSHIFT", binary<shift_left>, true},
    {"MASKED_SELECT", build_masked_select},
    {"MATMUL", binary<matmul>, true},
    {"MAX_POOL2D", window_op<WindowKind::MaxPool>},
    {"MAX_UNPOOL2D", build_max_unpool},
    {"MEAN", [](const Call& c) { return mean(c.src[0], c.arg.axes, c.arg.keepdim); }},
    {"MINIMUM", binary<minimum>, true},
    {"MISH", unary<mish>, true},
    {"MULTINOMIAL", build_multinomial},
    {"MUON_STEP", muon_step_op},
    {"NEWTON_SCHULZ", newton_schulz_op},
    {"NLL_LOSS",
     [](const Call& c) {
       return nll_loss(c.src[0], c.src[1], optional_src(c, 2), c.arg.ignore_index, c.arg.mode);
     }},
    {"NONZERO", build_nonzero},
    {"NORMAL", normal_op},
    {"NORMALIZE", normalize_op},
    {"ONE_HOT", one_hot_op},
    {"POW", binary<pow>, true},
    {"QR", [](const Call& c) { return qr(c.src[0], c.arg.mode); }},
    {"QUICK_GELU", unary<quick_gelu>, true},
    {"RAND", random_op<rand>},
    {"RANDINT", randint_op},
    {"RANDN", random_op<randn>},
    {"REDUCE_ALL", [](const Call& c) { return all(c.src[0], c.arg.axes, c.arg.keepdim); }, true},
    {"REDUCE_ANY", [](const Call& c) { return any(c.src[0], c.arg.axes, c.arg.keepdim); }, true},
    {"REDUCE_MIN", [](const Call& c) { return min(c.src[0], c.arg.axes, c.arg.keepdim); }, true},
    {"RELU", unary<relu>, true},
    {"RELU6", unary<relu6>, true},
    {"REMAINDER", binary<remainder>, true},
    {"RMS_NORM", trailing_norm<rms_norm_of>},
    {"ROUND", unary<round_half_even>, true},
    {"RSHIFT", binary<shift_right>, true},
    {"RSQRT", unary<rsqrt>, true},
    {"SCALED_DOT_PRODUCT_ATTENTION", attention},
    {"SCALED_DOT_PRODUCT_ATTENTION_MASKED", attention},
    {"SCATTER_REDUCE", build_scatter_reduce},
    {"SELU", unary<selu>, true},
    {"SGD_UPDATE", sgd_update_op},
    {"SIGMOID", unary<sigmoid>, true},
    {"SIGN", unary<sign>, true},
    {"SILU", unary<silu>, true},
    {"SINH", unary<sinh>, true},
    {"SOFTMAX", along<softmax>, true},
    {"SOFTMIN", along<softmin>},
    {"SOFTPLUS", [](const Call& c) { return softplus(c.src[0], c.arg.beta, c.arg.threshold); }},
    {"SOFTSIGN", unary<softsign>, true},
    {"SORT", sort_op},
    {"SPARSE_CATEGORICAL_CROSSENTROPY",
     [](const Call& c) {
       return sparse_categorical_crossentropy(c.src[0], c.src[1], c.arg.ignore_index, c.arg.label_smoothing, c.arg.mode);
     }},
    {"SQUARE", unary<square>, true},
    {"STD", spread<true>},
    {"SVD", [](const Call& c) { return svd(c.src[0], c.arg.n, c.arg.mode); }},
    {"TAN", unary<tan>, true},
    {"TANH", unary<tanh>, true},
    {"TOPK", topk_op},
    {"TRIL", [](const Call& c) { return tril(c.src[0], c.arg.diagonal); }},
    {"TRIU", [](const Call& c) { return triu(c.src[0], c.arg.diagonal); }},
    {"TRUNC", unary<trunc>, true},
    {"UNFOLD", unfold_op},
    {"VAR", spread<false>},
    {"WRITE_VIEW", [](const Call& c) { return write_view(c.src[0], c.src[1], c.src[2]); }},
});

constexpr bool sorted_by_name() {
  for (size_t i = 1; i < kTable.size(); ++i) {
    if (!(kTable[i - 1].first < kTable[i].first)) return false;
  }
  return true;
}
static_assert(sorted_by_name(), "kTable must be sorted by name, each name once");

}  // namespace

CompositeBuilder find_composite(std::string_view name) {
  auto it = std::lower_bound(kTable.begin(), kTable.end(), name,
                             [](const Entry& e, std::string_view n) { return e.first < n; });
  return it != kTable.end() && it->first == name ? it->second : nullptr;
}

bool composite_takes_symbolic(std::string_view name) {
  auto it = std::lower_bound(kTable.begin(), kTable.end(), name,
                             [](const Entry& e, std::string_view n) { return e.first < n; });
  return it != kTable.end() && it->first == name && it->symbolic_ok;
}

std::vector<std::string_view> composite_names() {
  std::vector<std::string_view> out;
  out.reserve(kTable.size());
  for (const Entry& e : kTable) out.push_back(e.first);
  return out;
}

}  // namespace polygrad::frontend
