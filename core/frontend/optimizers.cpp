#include "core/frontend/optimizers.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/composites.h"
#include "core/frontend/expr.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

using Built = absl::StatusOr<UOpRef>;

enum class Output { Param, M, V };

absl::Status invalid(std::string_view op, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(op), ": ", std::string(what)));
}

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

absl::StatusOr<Output> parse_output(std::string_view op, std::string_view output, bool has_v) {
  if (output == "param") return Output::Param;
  if (output == "m") return Output::M;
  if (output == "v" && has_v) return Output::V;
  // A client's word, cut short: a message never carries a long string back.
  return invalid(op, absl::StrCat("output (composite.mode) must be 'param', 'm'", has_v ? " or 'v'" : "", ", got '",
                                  std::string(output.substr(0, 32)), "'"));
}

// The named tensors (null ones skipped) are float; `like` ones have the parameter's shape, the
// others are 0-d.
struct Operand {
  const char* name;
  const UOpRef& t;
  bool like_param;
};

absl::Status check_operands(std::string_view op, const UOpRef& param, std::initializer_list<Operand> operands) {
  for (const Operand& o : operands) {
    if (!o.t) continue;
    if (!dtype_is_float(o.t->dtype))
      return invalid(op, absl::StrCat(o.name, " must be float, got ", dtype_name(o.t->dtype)));
    const Shape want = o.like_param ? param->shape : Shape{};
    if (o.t->shape != want)
      return invalid(op, absl::StrCat(o.name, " has shape ", shape_str(o.t->shape), ", want ", shape_str(want),
                                      o.like_param ? " (the parameter's)" : " (a 0-d tensor)"));
  }
  return absl::OkStatus();
}

// The dtype an update computes in: the widest float of its sources (two 16-bit kinds: float32).
DType widest(std::initializer_list<UOpRef> ts) {
  DType w = (*ts.begin())->dtype;
  for (const UOpRef& t : ts) {
    if (!t || t->dtype == w) continue;
    const size_t a = dtype_itemsize(w), b = dtype_itemsize(t->dtype);
    w = a > b ? w : b > a ? t->dtype : DType::Float32;
  }
  return w;
}

// t in the work dtype and the parameter's shape (a 0-d scalar spread over it); null stays null.
Built operand(const UOpRef& t, DType work, const Shape& shape) {
  if (!t) return t;
  PG_ASSIGN(c, cast(t, work));
  if (c->shape == shape) return c;
  PG_ASSIGN(r, reshape(c, Shape(shape.size(), 1)));
  return expand(r, shape);
}

// Every source as operand() makes it, in order, and the work dtype they share.
struct Sources {
  DType work;
  std::vector<UOpRef> at;
};
absl::StatusOr<Sources> sources(std::initializer_list<UOpRef> ts, const Shape& shape) {
  const DType w = widest(ts);
  Sources out{w, {}};
  for (const UOpRef& t : ts) {
    PG_ASSIGN(o, operand(t, w, shape));
    out.at.push_back(o);
  }
  return out;
}

// The per-step numbers of step k, from the 0-d lr and step: computed in float64 (as the clients
// computed them on the host) and rounded to float32, the dtype they travelled in before, so an
// update computes in the dtype it did.
class PerStep {
 public:
  static absl::StatusOr<PerStep> of(std::string_view op, const UOpRef& param, const UOpRef& lr, const UOpRef& step) {
    if (absl::Status s = check_operands(op, param, {{"lr", lr, false}, {"step", step, false}}); !s.ok()) return s;
    PerStep p;
    PG_ASSIGN(lr64, cast(lr, DType::Float64));
    PG_ASSIGN(k64, cast(step, DType::Float64));
    p.lr_ = lr64;
    p.k_ = k64;
    return p;
  }

  // 1 - beta^k, beta^k as 2^(k log2 beta) (0 for beta = 0).
  Built bias_correction(double beta) const {
    PG_ASSIGN(log_beta, constant(std::log2(beta), DType::Float64, Shape{}));
    PG_ASSIGN(exponent, alu(Ops::MUL, {k_, log_beta}));
    PG_ASSIGN(power, alu(Ops::EXP2, {exponent}));
    PG_ASSIGN(one, constant(1.0, DType::Float64, Shape{}));
    return alu(Ops::SUB, {one, power});
  }

  const UOpRef& lr() const { return lr_; }

  // A float64 value as the float32 0-d tensor an update takes.
  static Built rounded(absl::StatusOr<UOpRef> v) {
    if (!v.ok()) return v;
    return cast(*v, DType::Float32);
  }

 private:
  UOpRef lr_, k_;
};

// SGD's and LARS's sources (param, grad, lr[, momentum buffer]), checked, in their work dtype.
absl::StatusOr<Sources> momentum_sources(std::string_view op, const UOpRef& param, const UOpRef& grad,
                                         const UOpRef& lr, const UOpRef& m, double momentum, bool nesterov,
                                         Output out) {
  if (absl::Status s = check_operands(op, param, {{"param", param, true}, {"grad", grad, true}, {"lr", lr, false},
                                                   {"momentum buffer", m, true}});
      !s.ok())
    return s;
  if ((momentum != 0) != static_cast<bool>(m))
    return invalid(op, momentum != 0 ? "momentum needs a momentum buffer (a fourth source)"
                                     : "a momentum buffer needs momentum != 0");
  if (nesterov && !(momentum > 0)) return invalid(op, "nesterov momentum needs momentum > 0");
  if (out == Output::M && !m) return invalid(op, "output 'm' needs momentum");
  return sources({param, grad, lr, m}, param->shape);
}

// ||t|| over the whole tensor in `work`, spread back over `shape`.
Built spread_norm(const UOpRef& t, DType work, const Shape& shape) {
  PG_ASSIGN(sq, alu(Ops::MUL, {t, t}));
  PG_ASSIGN(total, sum(sq, {}, false));
  PG_ASSIGN(root, alu(Ops::SQRT, {total}));
  return operand(root, work, shape);
}

// The value the node stands for, cast back to the dtype of the tensor it replaces.
Built finish(Expr& e, const UOpRef& value, DType out) {
  PG_ASSIGN(r, e.done(value));
  return cast(r, out);
}

}  // namespace

Built sgd_update(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& m, const SgdRule& rule,
                 std::string_view output) {
  constexpr std::string_view kOp = "sgd_update";
  PG_ASSIGN(out, parse_output(kOp, output, false));
  PG_ASSIGN(in, momentum_sources(kOp, param, grad, lr, m, rule.momentum, rule.nesterov, out));
  const UOpRef &p = in.at[0], &g0 = in.at[1], &rate = in.at[2], &b = in.at[3];
  Expr e(in.work, param->shape);
  UOpRef g = rule.weight_decay != 0 ? e.add(g0, e.mul(p, rule.weight_decay)) : g0;
  UOpRef step = g;
  if (m) {
    UOpRef b_new = e.add(e.mul(b, rule.momentum), g);
    if (out == Output::M) return finish(e, b_new, m->dtype);
    step = rule.nesterov ? e.add(g, e.mul(b_new, rule.momentum)) : b_new;
  }
  return finish(e, e.sub(p, e.mul(step, rate)), param->dtype);
}

Built lars_update(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& m, const LarsRule& rule,
                  std::string_view output) {
  constexpr std::string_view kOp = "lars_update";
  PG_ASSIGN(out, parse_output(kOp, output, false));
  PG_ASSIGN(in, momentum_sources(kOp, param, grad, lr, m, rule.momentum, rule.nesterov, out));
  const UOpRef &p = in.at[0], &g0 = in.at[1], &rate = in.at[2], &b = in.at[3];
  const Shape& shape = param->shape;
  Expr e(in.work, shape);
  UOpRef ratio;  // null: 1
  if (rule.trust_coefficient != 0) {
    // From the raw gradient's norm; the decay enters through weight_decay ||param||.
    PG_ASSIGN(r1, spread_norm(p, in.work, shape));
    PG_ASSIGN(r2, spread_norm(g0, in.work, shape));
    UOpRef trust = e.div(e.mul(r1, rule.trust_coefficient), e.add(r2, e.mul(r1, rule.weight_decay)));
    ratio = e.where(e.gt(r1, 0.0), e.where(e.gt(r2, 0.0), trust, 1.0), 1.0);
  }
  auto scaled = [&](const UOpRef& x) { return e.mul(ratio ? e.mul(x, ratio) : x, rate); };
  const UOpRef g = rule.weight_decay != 0 ? e.add(g0, e.mul(p, rule.weight_decay)) : g0;
  const UOpRef u = rule.classic ? scaled(g) : g;
  UOpRef step = u;
  if (m) {
    UOpRef b_new = e.add(e.mul(b, rule.momentum), u);
    if (out == Output::M) return finish(e, b_new, m->dtype);
    step = rule.nesterov ? e.add(u, e.mul(b_new, rule.momentum)) : b_new;
  }
  if (!rule.classic) step = scaled(step);
  return finish(e, e.sub(p, step), param->dtype);
}

Built muon_step(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& coefficients, const UOpRef& m,
                const MuonRule& rule, std::string_view output) {
  constexpr std::string_view kOp = "muon_step";
  PG_ASSIGN(out, parse_output(kOp, output, false));
  const Shape& shape = param->shape;
  if (shape.size() < 2)
    return invalid(kOp, absl::StrCat("Muon orthogonalizes matrices: the parameter has shape ", shape_str(shape),
                                     " (biases and norms need another optimizer)"));
  PG_ASSIGN(in, momentum_sources(kOp, param, grad, lr, m, rule.momentum, rule.nesterov, out));
  const UOpRef &p = in.at[0], &g = in.at[1], &rate = in.at[2], &b = in.at[3];
  Expr e(in.work, shape);
  UOpRef direction = g;
  if (m) {
    UOpRef b_new = e.add(e.mul(b, rule.momentum), g);
    if (out == Output::M) return finish(e, b_new, m->dtype);
    direction = rule.nesterov ? e.add(g, e.mul(b_new, rule.momentum)) : b_new;
  }
  PG_ASSIGN(d, e.done(direction));
  int64_t rest = 1;
  for (size_t i = 1; i < shape.size(); ++i) rest *= shape[i];
  PG_ASSIGN(matrix, reshape(d, Shape{shape[0], rest}));
  PG_ASSIGN(ortho, newton_schulz(matrix, coefficients, rule.steps, rule.eps));
  PG_ASSIGN(u, reshape(ortho, shape));
  UOpRef base = p;
  if (rule.weight_decay != 0) {
    // 1 - lr wd in float64 and rounded to float32, as the client computed it on the host before.
    PG_ASSIGN(lr64, cast(lr, DType::Float64));
    PG_ASSIGN(wd, constant(rule.weight_decay, DType::Float64, Shape{}));
    PG_ASSIGN(one, constant(1.0, DType::Float64, Shape{}));
    PG_ASSIGN(lr_wd, alu(Ops::MUL, {lr64, wd}));
    PG_ASSIGN(keep64, alu(Ops::SUB, {one, lr_wd}));
    PG_ASSIGN(keep32, cast(keep64, DType::Float32));
    PG_ASSIGN(decay, operand(keep32, in.work, shape));
    base = e.mul(p, decay);
  }
  return finish(e, e.sub(base, e.mul(u, rate)), param->dtype);
}

Built adam_update(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v, const UOpRef& step_size,
                  const UOpRef& bc2_sqrt, const UOpRef& decay, const AdamRule& rule, std::string_view output) {
  constexpr std::string_view kOp = "adam_update";
  PG_ASSIGN(out, parse_output(kOp, output, true));
  if (absl::Status s = check_operands(kOp, param, {{"param", param, true}, {"grad", grad, true}, {"m", m, true},
                                                    {"v", v, true}, {"step_size", step_size, false},
                                                    {"bc2_sqrt", bc2_sqrt, false}, {"decay", decay, false}});
      !s.ok())
    return s;
  const bool decays = rule.decoupled && rule.weight_decay != 0;
  if (decays != static_cast<bool>(decay))
    return invalid(kOp, decays ? "a decoupled weight decay needs the decay factor (a seventh source)"
                               : "a decay factor needs a decoupled weight decay");
  PG_ASSIGN(in, sources({param, grad, m, v, step_size, bc2_sqrt, decay}, param->shape));
  const UOpRef &p = in.at[0], &g0 = in.at[1], &m0 = in.at[2], &v0 = in.at[3], &size = in.at[4], &bc2 = in.at[5],
               &d = in.at[6];
  Expr e(in.work, param->shape);
  UOpRef g = rule.weight_decay != 0 && !rule.decoupled ? e.add(g0, e.mul(p, rule.weight_decay)) : g0;
  UOpRef m1 = e.add(e.mul(m0, rule.beta1), e.mul(g, 1 - rule.beta1));
  if (out == Output::M) return finish(e, m1, m->dtype);
  UOpRef v1 = e.add(e.mul(v0, rule.beta2), e.mul(e.mul(g, 1 - rule.beta2), g));  // torch's addcmul order
  if (out == Output::V) return finish(e, v1, v->dtype);
  UOpRef denom = e.add(e.div(e.sqrt(v1), bc2), rule.eps);
  UOpRef base = decays ? e.mul(p, d) : p;
  return finish(e, e.sub(base, e.mul(size, e.div(m1, denom))), param->dtype);
}

Built lamb_update(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v, const UOpRef& lr,
                  const UOpRef& inv_bc1, const UOpRef& inv_bc2, const LambRule& rule, std::string_view output) {
  constexpr std::string_view kOp = "lamb_update";
  PG_ASSIGN(out, parse_output(kOp, output, true));
  if (absl::Status s = check_operands(kOp, param, {{"param", param, true}, {"grad", grad, true}, {"m", m, true},
                                                    {"v", v, true}, {"lr", lr, false}, {"inv_bc1", inv_bc1, false},
                                                    {"inv_bc2", inv_bc2, false}});
      !s.ok())
    return s;
  PG_ASSIGN(in, sources({param, grad, m, v, lr, inv_bc1, inv_bc2}, param->shape));
  const UOpRef &p = in.at[0], &g = in.at[1], &m0 = in.at[2], &v0 = in.at[3], &rate = in.at[4], &bc1 = in.at[5],
               &bc2 = in.at[6];
  const DType w = in.work;
  const Shape& shape = param->shape;
  Expr e(w, shape);
  UOpRef m1 = e.add(e.mul(m0, rule.beta1), e.mul(g, 1 - rule.beta1));
  if (out == Output::M) return finish(e, m1, m->dtype);
  UOpRef v1 = e.add(e.mul(v0, rule.beta2), e.mul(e.mul(g, g), 1 - rule.beta2));
  if (out == Output::V) return finish(e, v1, v->dtype);
  UOpRef up = e.div(e.mul(m1, bc1), e.add(e.sqrt(e.mul(v1, bc2)), rule.eps));
  if (rule.weight_decay != 0) up = e.add(up, e.mul(p, rule.weight_decay));
  // The trust ratio's norms reduce the whole tensor; a 0-d norm is spread back over the shape.
  PG_ASSIGN(up_done, e.done(up));
  PG_ASSIGN(r1, spread_norm(p, w, shape));
  PG_ASSIGN(r2, spread_norm(up_done, w, shape));
  UOpRef ratio = e.where(e.gt(r1, 0.0), e.where(e.gt(r2, 0.0), e.div(r1, r2), 1.0), 1.0);
  return finish(e, e.sub(p, e.mul(e.mul(rate, ratio), up_done)), param->dtype);
}

Built adam_step(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v, const UOpRef& lr,
                const UOpRef& step, const AdamRule& rule, std::string_view output) {
  PG_ASSIGN(k, PerStep::of("adam_step", param, lr, step));
  PG_ASSIGN(bc1, k.bias_correction(rule.beta1));
  PG_ASSIGN(bc2, k.bias_correction(rule.beta2));
  PG_ASSIGN(step_size, PerStep::rounded(alu(Ops::FDIV, {k.lr(), bc1})));
  PG_ASSIGN(bc2_sqrt, PerStep::rounded(alu(Ops::SQRT, {bc2})));
  UOpRef decay;
  if (rule.decoupled && rule.weight_decay != 0) {
    PG_ASSIGN(wd, constant(rule.weight_decay, DType::Float64, Shape{}));
    PG_ASSIGN(one, constant(1.0, DType::Float64, Shape{}));
    PG_ASSIGN(lr_wd, alu(Ops::MUL, {k.lr(), wd}));
    PG_ASSIGN(d, PerStep::rounded(alu(Ops::SUB, {one, lr_wd})));
    decay = d;
  }
  return adam_update(param, grad, m, v, step_size, bc2_sqrt, decay, rule, output);
}

Built lamb_step(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v, const UOpRef& lr,
                const UOpRef& step, const LambRule& rule, std::string_view output) {
  PG_ASSIGN(k, PerStep::of("lamb_step", param, lr, step));
  PG_ASSIGN(bc1, k.bias_correction(rule.beta1));
  PG_ASSIGN(bc2, k.bias_correction(rule.beta2));
  PG_ASSIGN(one, constant(1.0, DType::Float64, Shape{}));
  PG_ASSIGN(inv_bc1, PerStep::rounded(alu(Ops::FDIV, {one, bc1})));
  PG_ASSIGN(inv_bc2, PerStep::rounded(alu(Ops::FDIV, {one, bc2})));
  return lamb_update(param, grad, m, v, lr, inv_bc1, inv_bc2, rule, output);
}

}  // namespace polygrad::frontend
