// Composite ops against direct float64 computations on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/frontend/math.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class CompositesTest : public testing::RealizeFixture {
 protected:
  // Composites are compared on float64 inputs in [-2, 2) unless a test says otherwise.
  UOpRef leaf(Shape shape, std::vector<double>& v, double lo = -2, double hi = 2) { return randd(shape, v, lo, hi); }
  std::vector<double> run(const absl::StatusOr<UOpRef>& y, Shape want) { return RealizeFixture::run<double>(y, want); }
};

TEST_F(CompositesTest, MatmulVectorAndBatchBroadcast) {
  std::vector<double> a, b, v;
  UOpRef A = leaf({2, 1, 3, 4}, a), B = leaf({5, 4, 6}, b), V = leaf({4}, v);
  auto ab = run(fe::matmul(A, B), {2, 5, 3, 6});
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 5; ++q)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 6; ++j) {
          double want = 0;
          for (int k = 0; k < 4; ++k) want += a[(p * 3 + i) * 4 + k] * b[(q * 4 + k) * 6 + j];
          EXPECT_NEAR(ab[((p * 5 + q) * 3 + i) * 6 + j], want, 1e-12);
        }
  auto av = run(fe::matmul(A, V), {2, 1, 3});
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i) {
      double want = 0;
      for (int k = 0; k < 4; ++k) want += a[(p * 3 + i) * 4 + k] * v[k];
      EXPECT_NEAR(av[p * 3 + i], want, 1e-12);
    }
  auto vv = run(fe::matmul(V, V), {});
  double dot = 0;
  for (double x : v) dot += x * x;
  EXPECT_NEAR(vv[0], dot, 1e-12);
  EXPECT_FALSE(fe::matmul(A, A).ok());  // inner dims 4 vs 3
}

TEST_F(CompositesTest, LinearIsMatmulOrScaleThenBroadcastBias) {
  std::vector<double> x, w, v, b, c;
  UOpRef X = leaf({2, 3, 4}, x), W = leaf({4, 5}, w), V = leaf({4}, v), B = leaf({5}, b), C = leaf({3, 1}, c);
  auto y = run(fe::linear(X, W, B), {2, 3, 5});
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 5; ++j) {
      double want = 0;
      for (int k = 0; k < 4; ++k) want += x[r * 4 + k] * w[k * 5 + j];
      EXPECT_NEAR(y[r * 5 + j], want + b[j], 1e-12);
    }
  auto no_bias = run(fe::linear(X, W, nullptr), {2, 3, 5});
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(no_bias[i], y[i] - b[i % 5], 1e-12);
  // A 1-D weight scales x elementwise (tinygrad's rule); the bias broadcasts over the result.
  auto scaled = run(fe::linear(X, V, C), {2, 3, 4});
  for (int i = 0; i < 24; ++i) EXPECT_EQ(scaled[i], x[i] * v[i % 4] + c[(i / 4) % 3]);
  auto bad_bias = fe::linear(X, W, C);  // (2, 3, 5) with (3, 1) is fine; (4) is not
  EXPECT_TRUE(bad_bias.ok());
  std::vector<double> d;
  auto wrong = fe::linear(X, W, leaf({4}, d));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("linear's bias"), std::string::npos) << wrong.status().message();
  auto f32 = *fe::cast(B, DType::Float32);
  auto mixed = fe::linear(X, W, f32);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("differ in dtype: float64 vs float32"), std::string::npos)
      << mixed.status().message();
}

TEST_F(CompositesTest, VarianceOverNoAxesIsZeroOrNan) {
  std::vector<double> x;
  UOpRef X = leaf({2, 3}, x);
  auto biased = run(fe::var_of_each(X, 0.0), {2, 3});
  auto sample = run(fe::var_of_each(X, 1.0), {2, 3});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(biased[i], 0.0);
    EXPECT_TRUE(std::isnan(sample[i]));
  }
}

TEST_F(CompositesTest, SoftmaxLogSoftmaxLogsumexp) {
  std::vector<double> x;
  UOpRef X = leaf({4, 7}, x, -5, 5);
  auto sm = run(fe::softmax(X, 0), {4, 7});
  auto ls = run(fe::log_softmax(X, -1), {4, 7});
  auto lse = run(fe::logsumexp(X, 1, false), {4});
  for (int j = 0; j < 7; ++j) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += std::exp(x[i * 7 + j]);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(sm[i * 7 + j], std::exp(x[i * 7 + j]) / s, 1e-12);
  }
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 7; ++j) s += std::exp(x[i * 7 + j]);
    EXPECT_NEAR(lse[i], std::log(s), 1e-12);
    for (int j = 0; j < 7; ++j) EXPECT_NEAR(ls[i * 7 + j], x[i * 7 + j] - std::log(s), 1e-12);
  }
}

TEST_F(CompositesTest, MeanVarLayernorm) {
  std::vector<double> x;
  UOpRef X = leaf({3, 2, 5}, x);
  auto m = run(fe::mean(X, {1, 2}, false), {3});
  auto v = run(fe::var(X, {-1}, true, 1.0), {3, 2, 1});
  auto ln = run(fe::layernorm(X, 2, 1e-5), {3, 2, 5});
  for (int i = 0; i < 3; ++i) {
    double s = 0, ss = 0;
    for (int j = 0; j < 10; ++j) s += x[i * 10 + j];
    double mu = s / 10;
    for (int j = 0; j < 10; ++j) ss += (x[i * 10 + j] - mu) * (x[i * 10 + j] - mu);
    EXPECT_NEAR(m[i], mu, 1e-12);
    for (int j = 0; j < 10; ++j) EXPECT_NEAR(ln[i * 10 + j], (x[i * 10 + j] - mu) / std::sqrt(ss / 10 + 1e-5), 1e-9);
  }
  for (int r = 0; r < 6; ++r) {
    double s = 0, ss = 0;
    for (int j = 0; j < 5; ++j) s += x[r * 5 + j];
    for (int j = 0; j < 5; ++j) ss += (x[r * 5 + j] - s / 5) * (x[r * 5 + j] - s / 5);
    EXPECT_NEAR(v[r], ss / 4, 1e-12);
  }
}

TEST_F(CompositesTest, TrailingAffineScalesAndShiftsTheNormalizedAxes) {
  std::vector<double> y, w, b;
  UOpRef Y = leaf({3, 2, 4}, y), W = leaf({2, 4}, w), B = leaf({2, 4}, b);
  auto both = run(fe::trailing_affine(Y, W, B, 2), {3, 2, 4});
  auto scale_only = run(fe::trailing_affine(Y, W, nullptr, 2), {3, 2, 4});
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(both[i], y[i] * w[i % 8] + b[i % 8]);
    EXPECT_EQ(scale_only[i], y[i] * w[i % 8]);
  }
  // The weight must have the normalized axes' shape (here the last one: 4), not a broadcastable one.
  auto wrong = fe::trailing_affine(Y, W, nullptr, 1);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("weight must be float64 of shape (4), got float64 (2, 4)"), std::string::npos)
      << wrong.status().message();
  EXPECT_FALSE(fe::trailing_affine(Y, W, B, 4).ok());
}

TEST_F(CompositesTest, BatchnormWithInvstdAlongTheStatisticsAxes) {
  std::vector<double> x, m, is, w, b, full;
  UOpRef X = leaf({2, 3, 4}, x), M = leaf({3}, m), IS = leaf({3}, is, 0.5, 2), W = leaf({3}, w), B = leaf({3}, b);
  UOpRef Full = leaf({4}, full, 0.5, 2);  // broadcasts to x along its last axis
  auto y = run(fe::batchnorm_invstd(X, M, IS, W, B, {1}), {2, 3, 4});
  auto plain = run(fe::batchnorm_invstd(X, M, Full, nullptr, nullptr, {1}), {2, 3, 4});
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 4; ++k) {
        const int i = (n * 3 + c) * 4 + k;
        EXPECT_NEAR(y[i], (x[i] - m[c]) * is[c] * w[c] + b[c], 1e-12);
        EXPECT_NEAR(plain[i], (x[i] - m[c]) * full[k], 1e-12);
      }
  std::vector<double> m2;
  UOpRef M2 = leaf({3, 4}, m2);  // statistics along two axes
  auto two = run(fe::batchnorm_invstd(X, M2, Full, nullptr, nullptr, {1, 2}), {2, 3, 4});
  for (int i = 0; i < 24; ++i) EXPECT_NEAR(two[i], (x[i] - m2[i % 12]) * full[i % 4], 1e-12);
  // invstd (3,) is neither the statistics' (3, 4) nor broadcastable to (2, 3, 4)
  EXPECT_FALSE(fe::batchnorm_invstd(X, M2, IS, nullptr, nullptr, {1, 2}).ok());
  EXPECT_FALSE(fe::batchnorm_invstd(X, M, IS, W, B, {2}).ok());     // mean (3) is not axis 2's (4)
  EXPECT_FALSE(fe::batchnorm_invstd(X, M, IS, W, B, {1, 1}).ok());  // axes must increase
}

TEST_F(CompositesTest, Activations) {
  std::vector<double> x;
  UOpRef X = leaf({64}, x, -4, 4);
  auto sg = run(fe::sigmoid(X), {64}), th = run(fe::tanh(X), {64}), ge = run(fe::gelu(X), {64});
  auto si = run(fe::silu(X), {64}), re = run(fe::relu(X), {64}), ex = run(fe::exp(X), {64});
  for (int i = 0; i < 64; ++i) {
    double v = x[i];
    EXPECT_NEAR(sg[i], 1 / (1 + std::exp(-v)), 1e-12);
    EXPECT_NEAR(th[i], std::tanh(v), 1e-12);
    EXPECT_NEAR(ge[i], 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-12);
    EXPECT_NEAR(si[i], v / (1 + std::exp(-v)), 1e-12);
    EXPECT_EQ(re[i], std::max(v, 0.0));
    EXPECT_NEAR(ex[i], std::exp(v), 1e-12 * std::exp(v));
  }
}

TEST_F(CompositesTest, ErrorsNameTheProblem) {
  std::vector<double> x;
  UOpRef X = leaf({2, 3}, x);
  auto bad = fe::softmax(X, 5);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("axis 5"), std::string::npos);
  auto i = *fe::constant(int64_t{1}, DType::Int32, {2});
  EXPECT_NE(fe::exp(i).status().message().find("float"), std::string::npos);
  EXPECT_FALSE(fe::broadcast_shape({2, 3}, {4, 3}).ok());
  EXPECT_EQ(*fe::broadcast_shape({5, 1, 3}, {4, 1}), (Shape{5, 4, 3}));
}

// The frontend spells exp(x) as exp2(x * log2(e)) and log(x) as log2(x) * ln(2); the renderer
// turns both back into one call of expf/logf (vectorised through libmvec where clang has it).
// float32 results must stay within 4 ulp of the C library's scalar functions over arguments
// spanning the range (glibc allows its vector variants 4 ulp; the scalar ones are within 1).
TEST_F(CompositesTest, NaturalExpAndLogRenderAsOneCallAndStayAccurate) {
  std::vector<float> v, p;
  std::uniform_real_distribution<float> d(-80, 80);
  UOpRef x = RealizeFixture::leaf<float>(DType::Float32, {4096}, v, [&] { return d(rng_); });
  UOpRef y = RealizeFixture::leaf<float>(DType::Float32, {4096}, p, [&] { return std::exp(d(rng_)); });
  auto e = RealizeFixture::run<float>(fe::exp(x), {4096});
  auto l = RealizeFixture::run<float>(fe::log(y), {4096});
  auto ulps = [](float want, float got) {
    return std::abs(double{want} - got) / (std::nextafter(std::abs(want), INFINITY) - std::abs(want));
  };
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_LE(ulps(std::exp(v[i]), e[i]), 4.0) << v[i];
    ASSERT_LE(ulps(std::log(p[i]), l[i]), 4.0) << p[i];
  }
  auto ks = kernels_for({*fe::log(*fe::exp(*fe::buffer(1, DType::Float32, {8})))},
                        [](const UOp* n) { return n->op == Ops::BUFFER; });
  ASSERT_TRUE(ks.ok()) << ks.status();
  std::string src = *render_c(ks->back());
  EXPECT_NE(src.find("expf("), std::string::npos) << src;
  EXPECT_NE(src.find("logf("), std::string::npos) << src;
  EXPECT_EQ(src.find("exp2f("), std::string::npos) << src;
}

}  // namespace
}  // namespace polygrad
