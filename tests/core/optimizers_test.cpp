// core/frontend/optimizers.h: each rule's outputs against a direct loop on random float64 state,
// float16 parameters with float32 state, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "core/frontend/optimizers.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class OptimizersTest : public testing::RealizeFixture {
 protected:
  // A 0-d float64 leaf holding v.
  UOpRef scalar(double v) {
    scalars_.emplace_back();
    return leaf<double>(DType::Float64, {}, scalars_.back(), [v] { return v; });
  }
  std::deque<std::vector<double>> scalars_;
};

TEST_F(OptimizersTest, SgdWithWeightDecayAndNesterovMomentumMatchesTorchsRule) {
  const int64_t n = 7;
  const fe::SgdRule rule{.momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  std::vector<double> p, g, b;
  UOpRef P = randd({n}, p), G = randd({n}, g), B = randd({n}, b), lr = scalar(0.1);
  auto param = run<double>(fe::sgd_update(P, G, lr, B, rule, "param"), {n});
  auto buf = run<double>(fe::sgd_update(P, G, lr, B, rule, "m"), {n});
  auto plain = run<double>(fe::sgd_update(P, G, lr, nullptr, fe::SgdRule{}, "param"), {n});
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i] + 0.01 * p[i], bi = 0.9 * b[i] + gi;
    EXPECT_NEAR(buf[i], bi, 1e-15) << i;
    EXPECT_NEAR(param[i], p[i] - 0.1 * (gi + 0.9 * bi), 1e-15) << i;
    EXPECT_NEAR(plain[i], p[i] - 0.1 * g[i], 1e-15) << i;
  }
}

TEST_F(OptimizersTest, LarsScalesByTheTrustRatioBeforeOrAfterItsMomentum) {
  const int64_t n = 6;
  const double lr = 0.1, mom = 0.9, wd = 0.01, tc = 0.02;
  std::vector<double> p, g, b;
  UOpRef P = randd({n}, p), G = randd({n}, g), B = randd({n}, b), LR = scalar(lr);
  double pp = 0, gg = 0;
  for (int64_t i = 0; i < n; ++i) pp += p[i] * p[i], gg += g[i] * g[i];
  const double r = tc * std::sqrt(pp) / (std::sqrt(gg) + wd * std::sqrt(pp));
  for (bool classic : {true, false}) {
    for (bool nesterov : {false, true}) {
      const fe::LarsRule rule{.momentum = mom, .weight_decay = wd, .trust_coefficient = tc, .nesterov = nesterov,
                              .classic = classic};
      auto pn = run<double>(fe::lars_update(P, G, LR, B, rule, "param"), {n});
      auto bn = run<double>(fe::lars_update(P, G, LR, B, rule, "m"), {n});
      for (int64_t i = 0; i < n; ++i) {
        const double gi = g[i] + wd * p[i], u = classic ? gi * r * lr : gi, bi = mom * b[i] + u;
        const double step = nesterov ? u + mom * bi : bi;
        EXPECT_NEAR(bn[i], bi, 1e-15) << i;
        EXPECT_NEAR(pn[i], p[i] - (classic ? step : step * r * lr), 1e-14) << classic << nesterov << i;
      }
    }
  }
  // Without a trust coefficient and momentum it is plain SGD.
  auto plain = run<double>(fe::lars_update(P, G, LR, nullptr, fe::LarsRule{}, "param"), {n});
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(plain[i], p[i] - lr * g[i], 1e-15) << i;
}

// With one coefficient 1 and one step, Newton-Schulz only normalizes: the direction over its
// Frobenius norm, which makes Muon's rule checkable by a direct loop.
TEST_F(OptimizersTest, MuonOrthogonalizesItsMomentumAndDecaysDecoupled) {
  const Shape shape{2, 3, 2};
  const int64_t n = 12;
  const double lr = 0.02, mom = 0.95, wd = 0.1, eps = 1e-7;
  std::vector<double> p, g, b, one;
  UOpRef P = randd(shape, p), G = randd(shape, g), B = randd(shape, b), LR = scalar(lr);
  UOpRef C = leaf<double>(DType::Float64, {1}, one, [] { return 1.0; });
  const double keep = static_cast<float>(1 - lr * wd);  // rounded to float32, as the clients sent it
  for (bool nesterov : {false, true}) {
    const fe::MuonRule rule{.momentum = mom, .weight_decay = wd, .eps = eps, .steps = 1, .nesterov = nesterov};
    auto pn = run<double>(fe::muon_step(P, G, LR, C, B, rule, "param"), shape);
    auto bn = run<double>(fe::muon_step(P, G, LR, C, B, rule, "m"), shape);
    std::vector<double> dir(n);
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double bi = mom * b[i] + g[i];
      EXPECT_NEAR(bn[i], bi, 1e-15) << i;
      dir[i] = nesterov ? g[i] + mom * bi : bi;
      norm += dir[i] * dir[i];
    }
    norm = std::sqrt(norm) + eps;
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(pn[i], p[i] * keep - lr * dir[i] / norm, 1e-14) << nesterov << i;
  }
  // A vector is refused by name: biases and norms need another optimizer.
  std::vector<double> v;
  UOpRef V = randd({4}, v);
  auto refused = fe::muon_step(V, V, LR, C, nullptr, fe::MuonRule{}, "param");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("muon_step: Muon orthogonalizes matrices: the parameter has shape [4]"),
            std::string::npos)
      << refused.status();
}

TEST_F(OptimizersTest, AdamAndAdamWMatchTorchsRule) {
  const int64_t n = 9, k = 3;
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.05;
  const double step = lr / (1 - std::pow(b1, k)), bc2 = std::sqrt(1 - std::pow(b2, k));
  std::vector<double> p, g, m, v;
  UOpRef P = randd({n}, p), G = randd({n}, g), M = randd({n}, m), V = randd({n}, v, 0, 1);
  UOpRef S = scalar(step), C = scalar(bc2), D = scalar(1 - lr * wd);
  for (bool decoupled : {false, true}) {
    const fe::AdamRule rule{.beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .decoupled = decoupled};
    const UOpRef decay = decoupled ? D : nullptr;
    auto pn = run<double>(fe::adam_update(P, G, M, V, S, C, decay, rule, "param"), {n});
    auto mn = run<double>(fe::adam_update(P, G, M, V, S, C, decay, rule, "m"), {n});
    auto vn = run<double>(fe::adam_update(P, G, M, V, S, C, decay, rule, "v"), {n});
    for (int64_t i = 0; i < n; ++i) {
      const double gi = decoupled ? g[i] : g[i] + wd * p[i];
      const double mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
      const double base = decoupled ? p[i] * (1 - lr * wd) : p[i];
      EXPECT_NEAR(mn[i], mi, 1e-15) << i;
      EXPECT_NEAR(vn[i], vi, 1e-15) << i;
      EXPECT_NEAR(pn[i], base - step * mi / (std::sqrt(vi) / bc2 + eps), 1e-12) << i;
    }
  }
}

TEST_F(OptimizersTest, LambScalesByTheTrustRatio) {
  const int64_t n = 6;
  const double lr = 0.02, b1 = 0.9, b2 = 0.99, eps = 1e-6, wd = 0.1, ib1 = 1 / (1 - b1), ib2 = 1 / (1 - b2);
  std::vector<double> p, g, m, v;
  UOpRef P = randd({n}, p), G = randd({n}, g), M = randd({n}, m), V = randd({n}, v, 0, 1);
  const fe::LambRule rule{.beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd};
  auto pn = run<double>(fe::lamb_update(P, G, M, V, scalar(lr), scalar(ib1), scalar(ib2), rule, "param"), {n});
  std::vector<double> up(n);
  double r1 = 0, r2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double mi = b1 * m[i] + (1 - b1) * g[i], vi = b2 * v[i] + (1 - b2) * g[i] * g[i];
    up[i] = mi * ib1 / (std::sqrt(vi * ib2) + eps) + wd * p[i];
    r1 += p[i] * p[i];
    r2 += up[i] * up[i];
  }
  const double ratio = std::sqrt(r1) / std::sqrt(r2);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(pn[i], p[i] - lr * ratio * up[i], 1e-12) << i;
}

// ADAM_STEP and LAMB_STEP compute the per-step numbers from lr and the step number: the same
// result as the old ops fed those numbers computed on the host in double and sent as float32.
TEST_F(OptimizersTest, TheStepOpsComputeTheBiasCorrectionsTheClientsComputed) {
  const int64_t n = 5;
  const float lr = 0.003f;
  std::vector<double> p, g, m, v;
  UOpRef P = randd({n}, p), G = randd({n}, g), M = randd({n}, m), V = randd({n}, v, 0, 1);
  std::deque<std::vector<float>> f32;
  auto f32_scalar = [&](double x) {
    f32.emplace_back();
    return leaf<float>(DType::Float32, {}, f32.back(), [x] { return static_cast<float>(x); });
  };
  for (int k : {1, 2, 10, 1000, 100000}) {
    const UOpRef LR = f32_scalar(lr), K = f32_scalar(k);
    for (bool decoupled : {false, true}) {
      const fe::AdamRule rule{.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.02, .decoupled = decoupled};
      const UOpRef decay = decoupled ? f32_scalar(1 - double{lr} * 0.02) : nullptr;
      const UOpRef S = f32_scalar(double{lr} / (1 - std::pow(0.9, k))), C = f32_scalar(std::sqrt(1 - std::pow(0.999, k)));
      for (const char* out : {"param", "m", "v"}) {
        auto want = run<double>(fe::adam_update(P, G, M, V, S, C, decay, rule, out), {n});
        auto got = run<double>(fe::adam_step(P, G, M, V, LR, K, rule, out), {n});
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "adam k=" << k << " " << out << " " << i;
      }
    }
    const fe::LambRule rule{.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
    const UOpRef B1 = f32_scalar(1 / (1 - std::pow(0.9, k))), B2 = f32_scalar(1 / (1 - std::pow(0.99, k)));
    auto want = run<double>(fe::lamb_update(P, G, M, V, LR, B1, B2, rule, "param"), {n});
    auto got = run<double>(fe::lamb_step(P, G, M, V, LR, K, rule, "param"), {n});
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "lamb k=" << k << " " << i;
  }
  EXPECT_FALSE(fe::adam_step(P, G, M, V, f32_scalar(lr), P, fe::AdamRule{}, "param").ok());  // step not 0-d
}

TEST_F(OptimizersTest, Float16ParametersUpdateInTheirFloat32State) {
  std::vector<double> p, g, m, v;
  UOpRef P = *fe::cast(randd({4}, p), DType::Float16), G = *fe::cast(randd({4}, g), DType::Float16);
  UOpRef M = *fe::cast(randd({4}, m), DType::Float32), V = *fe::cast(randd({4}, v, 0, 1), DType::Float32);
  UOpRef S = *fe::cast(scalar(0.01), DType::Float32), C = *fe::cast(scalar(0.5), DType::Float32);
  auto pn = fe::adam_update(P, G, M, V, S, C, nullptr, fe::AdamRule{}, "param");
  auto mn = fe::adam_update(P, G, M, V, S, C, nullptr, fe::AdamRule{}, "m");
  ASSERT_TRUE(pn.ok() && mn.ok()) << pn.status() << mn.status();
  EXPECT_EQ((*pn)->dtype, DType::Float16);
  EXPECT_EQ((*mn)->dtype, DType::Float32);
}

TEST_F(OptimizersTest, BadArgumentsNameTheRuleAndTheProblem) {
  std::vector<double> p, w;
  UOpRef P = randd({3}, p), W = randd({4}, w), lr = scalar(0.1), vec_lr = randd({3}, w);
  const fe::SgdRule momentum{.momentum = 0.9};
  EXPECT_NE(message(fe::sgd_update(P, W, lr, nullptr, {}, "param")).find("grad has shape [4]"), std::string::npos);
  EXPECT_NE(message(fe::sgd_update(P, P, vec_lr, nullptr, {}, "param")).find("a 0-d tensor"), std::string::npos);
  EXPECT_NE(message(fe::sgd_update(P, P, lr, nullptr, momentum, "param")).find("needs a momentum buffer"),
            std::string::npos);
  EXPECT_NE(message(fe::sgd_update(P, P, lr, nullptr, {.nesterov = true}, "param")).find("nesterov"),
            std::string::npos);
  EXPECT_NE(message(fe::sgd_update(P, P, lr, P, momentum, "v")).find("must be 'param', 'm', got 'v'"),
            std::string::npos);
  EXPECT_NE(message(fe::adam_update(P, P, P, P, lr, lr, nullptr, {.weight_decay = 0.1, .decoupled = true}, "param"))
                .find("decay factor"),
            std::string::npos);
  UOpRef I = *fe::cast(P, DType::Int32);
  EXPECT_NE(message(fe::lamb_update(P, I, P, P, lr, lr, lr, {}, "param")).find("grad must be float"),
            std::string::npos);
  EXPECT_LT(message(fe::adam_update(P, P, P, P, lr, lr, nullptr, {}, std::string(500, 'q'))).size(), 200u);
}

}  // namespace
}  // namespace polygrad
