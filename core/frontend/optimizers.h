// The optimizers' update rules, written once for every client and for compiled steps: one wire op
// per rule, each node computing one of the values a step writes (`output`): "param" the updated
// parameter, "m" the first moment (SGD's momentum buffer), "v" the second moment. The sources a
// step updates are the old values; the per-step numbers (learning rate, bias corrections) are
// 0-d float tensors, so every step runs the same kernels. The update computes in the widest float
// of its sources (float16 parameters with float32 state: float32) and each output keeps the dtype
// of the value it replaces.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// torch.optim.SGD: g = grad + weight_decay * param; with momentum, m' = momentum * m + g and the
// step is m' (nesterov: g + momentum * m'); param' = param - lr * step. `m` is null without
// momentum.
struct SgdRule {
  double momentum = 0, weight_decay = 0;
  bool nesterov = false;
};
absl::StatusOr<UOpRef> sgd_update(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& m,
                                  const SgdRule& rule, std::string_view output);

// tinygrad's LARS (You et al. 2017): g = grad + weight_decay * param, scaled by the trust ratio
// r = trust_coefficient ||param|| / (||grad|| + weight_decay ||param||) (1 where a norm is 0, or
// trust_coefficient is 0) and lr; classic momentum accumulates the scaled g (m' = momentum m +
// lr r g), otherwise it accumulates g and the step is scaled after (lr r m'); nesterov adds
// momentum m' to the accumulated value. param' = param - step. `m` is null without momentum.
struct LarsRule {
  double momentum = 0, weight_decay = 0, trust_coefficient = 0;
  bool nesterov = false, classic = true;
};
absl::StatusOr<UOpRef> lars_update(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& m,
                                   const LarsRule& rule, std::string_view output);

// Muon (Jordan et al. 2024; tinygrad's): with momentum, m' = momentum * m + grad and the direction
// is m' (nesterov: grad + momentum * m'); the direction as a (rows, rest) matrix is orthogonalized
// by newton_schulz(coefficients, steps, eps) (composites.h); param' = param * (1 - lr *
// weight_decay) - lr * direction, the decay decoupled from the momentum. Needs a parameter of
// rank >= 2. `m` is null without momentum.
struct MuonRule {
  double momentum = 0, weight_decay = 0, eps = 1e-7;
  int64_t steps = 5;
  bool nesterov = false;
};
absl::StatusOr<UOpRef> muon_step(const UOpRef& param, const UOpRef& grad, const UOpRef& lr, const UOpRef& coefficients,
                                 const UOpRef& m, const MuonRule& rule, std::string_view output);

// torch.optim.Adam and AdamW: g = grad (+ weight_decay * param unless decoupled), m' = beta1 m +
// (1 - beta1) g, v' = beta2 v + (1 - beta2) g g, param' = p - step_size * m' / (sqrt(v') /
// bc2_sqrt + eps), p being param * decay when decoupled with a weight decay (decay = 1 - lr wd;
// null otherwise). step_size = lr / (1 - beta1^k), bc2_sqrt = sqrt(1 - beta2^k) at step k.
struct AdamRule {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;
};
absl::StatusOr<UOpRef> adam_update(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v,
                                   const UOpRef& step_size, const UOpRef& bc2_sqrt, const UOpRef& decay,
                                   const AdamRule& rule, std::string_view output);

// tinygrad's LAMB: the Adam direction u = (m' inv_bc1) / (sqrt(v' inv_bc2) + eps) + weight_decay *
// param, scaled by the trust ratio ||param|| / ||u|| (1 where either norm is 0): param' = param -
// lr * ratio * u. inv_bc1 = 1 / (1 - beta1^k), inv_bc2 = 1 / (1 - beta2^k).
struct LambRule {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0;
};
absl::StatusOr<UOpRef> lamb_update(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v,
                                   const UOpRef& lr, const UOpRef& inv_bc1, const UOpRef& inv_bc2, const LambRule& rule,
                                   std::string_view output);

// The same rules at step `step` (a 0-d float tensor holding k, from 1) with the learning rate
// `lr` (0-d float): the per-step numbers above (the bias corrections 1 - beta^k, AdamW's decay
// 1 - lr weight_decay) are computed here, in float64 and then float32, so no client computes
// them and a compiled step feeds only the step number.
absl::StatusOr<UOpRef> adam_step(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v,
                                 const UOpRef& lr, const UOpRef& step, const AdamRule& rule, std::string_view output);
absl::StatusOr<UOpRef> lamb_step(const UOpRef& param, const UOpRef& grad, const UOpRef& m, const UOpRef& v,
                                 const UOpRef& lr, const UOpRef& step, const LambRule& rule, std::string_view output);

}  // namespace polygrad::frontend
