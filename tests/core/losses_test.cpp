// core/frontend/losses.h against direct loops on random inputs (float64, so the loops are the
// reference to 1e-12), and their argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/frontend/losses.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

using LossesTest = testing::RealizeFixture;

// log_softmax of row r of an (rows, classes) matrix, class c.
double log_softmax_at(const std::vector<double>& x, int64_t classes, int64_t r, int64_t c) {
  double m = -INFINITY, s = 0;
  for (int64_t k = 0; k < classes; ++k) m = std::max(m, x[r * classes + k]);
  for (int64_t k = 0; k < classes; ++k) s += std::exp(x[r * classes + k] - m);
  return x[r * classes + c] - m - std::log(s);
}

TEST_F(LossesTest, CrossEntropyWithIndicesAndSmoothingMatchesDirectLoop) {
  const int64_t batch = 5, classes = 4;
  const double ls = 0.2;
  std::vector<double> x;
  std::vector<int32_t> y;
  UOpRef X = randd({batch, classes}, x, -3, 3);
  UOpRef Y = ints({batch}, y, 0, classes - 1);
  std::vector<double> each(batch);
  double total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    double l = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const double t = (c == y[b] ? 1 - ls : 0) + ls / static_cast<double>(classes);
      l -= t * log_softmax_at(x, classes, b, c);
    }
    each[b] = l;
    total += l;
  }
  auto none = run<double>(fe::cross_entropy(X, Y, 1, ls, "none"), {batch});
  for (int64_t b = 0; b < batch; ++b) EXPECT_NEAR(none[b], each[b], 1e-12) << b;
  EXPECT_NEAR(run<double>(fe::cross_entropy(X, Y, -1, ls, "sum"), {})[0], total, 1e-12);
  EXPECT_NEAR(run<double>(fe::cross_entropy(X, Y, 1, ls, "mean"), {})[0], total / batch, 1e-12);
}

TEST_F(LossesTest, CrossEntropyAlongAnInnerClassAxisTakesIndicesOrProbabilities) {
  // (N, C, L): classes along axis 1, one target per (n, l).
  const int64_t n = 2, classes = 3, len = 4;
  std::vector<double> x, p;
  std::vector<int32_t> y;
  UOpRef X = randd({n, classes, len}, x, -2, 2);
  UOpRef Y = ints({n, len}, y, 0, classes - 1);
  UOpRef P = randd({n, classes, len}, p, 0, 1);
  auto by_index = run<double>(fe::cross_entropy(X, Y, 1, 0, "none"), {n, len});
  auto by_probs = run<double>(fe::cross_entropy(X, P, 1, 0, "none"), {n, len});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < len; ++l) {
      // The (i, :, l) column as a row of `classes` logits.
      std::vector<double> row(classes);
      for (int64_t c = 0; c < classes; ++c) row[c] = x[(i * classes + c) * len + l];
      double want_p = 0;
      for (int64_t c = 0; c < classes; ++c) want_p -= p[(i * classes + c) * len + l] * log_softmax_at(row, classes, 0, c);
      EXPECT_NEAR(by_index[i * len + l], -log_softmax_at(row, classes, 0, y[i * len + l]), 1e-12);
      EXPECT_NEAR(by_probs[i * len + l], want_p, 1e-12);
    }
}

TEST_F(LossesTest, SparseCategoricalCrossentropyLeavesIgnoredTargetsOutOfTheMean) {
  const int64_t batch = 8, classes = 3, ignore = 1;
  const double ls = 0.1;
  std::vector<double> x;
  std::vector<int32_t> y;
  UOpRef X = randd({batch, classes}, x, -3, 3);
  UOpRef Y = ints({batch}, y, 0, classes - 1);
  double total = 0, counted = 0;
  std::vector<double> each(batch, 0);
  for (int64_t b = 0; b < batch; ++b) {
    if (y[b] == ignore) continue;
    double mean_lp = 0;
    for (int64_t c = 0; c < classes; ++c) mean_lp += log_softmax_at(x, classes, b, c) / classes;
    each[b] = -((1 - ls) * log_softmax_at(x, classes, b, y[b]) + ls * mean_lp);
    total += each[b];
    counted += 1;
  }
  auto none = run<double>(fe::sparse_categorical_crossentropy(X, Y, ignore, ls, "none"), {batch});
  for (int64_t b = 0; b < batch; ++b) EXPECT_NEAR(none[b], each[b], 1e-12) << b;
  EXPECT_NEAR(run<double>(fe::sparse_categorical_crossentropy(X, Y, ignore, ls, "sum"), {})[0], total, 1e-12);
  EXPECT_NEAR(run<double>(fe::sparse_categorical_crossentropy(X, Y, ignore, ls, "mean"), {})[0], total / counted,
              1e-12);
  // ignore_index -1 ignores nothing: the same loss as cross_entropy over the last axis.
  EXPECT_NEAR(run<double>(fe::sparse_categorical_crossentropy(X, Y, -1, 0, "mean"), {})[0],
              run<double>(fe::cross_entropy(X, Y, -1, 0, "mean"), {})[0], 1e-12);
}

TEST_F(LossesTest, BinaryCrossentropiesMatchTheirFormulas) {
  const int64_t n = 12;
  std::vector<double> p, z, y, w;
  UOpRef P = randd({n}, p, 0.02, 0.98), Z = randd({n}, z, -30, 30), Y = randd({n}, y, 0, 1),
         W = randd({n}, w, 0.5, 2);
  auto bce = run<double>(fe::binary_crossentropy(P, Y, "none"), {n});
  auto logits = run<double>(fe::binary_crossentropy_logits(Z, Y, W, "none"), {n});
  auto unweighted = run<double>(fe::binary_crossentropy_logits(Z, Y, nullptr, "none"), {n});
  // log(sigmoid(v)) without overflow, for the reference.
  auto logsig = [](double v) { return std::min(v, 0.0) - std::log1p(std::exp(-std::abs(v))); };
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(bce[i], -y[i] * std::log(p[i]) - (1 - y[i]) * std::log(1 - p[i]), 1e-12) << i;
    EXPECT_NEAR(logits[i], -(w[i] * y[i] * logsig(z[i]) + (1 - y[i]) * logsig(-z[i])), 1e-12) << i;
    const double u = -(y[i] * logsig(z[i]) + (1 - y[i]) * logsig(-z[i]));
    EXPECT_NEAR(unweighted[i], u, 1e-12) << i;
    sum += u;
  }
  EXPECT_NEAR(run<double>(fe::binary_crossentropy_logits(Z, Y, nullptr, "mean"), {})[0], sum / n, 1e-12);
}

TEST_F(LossesTest, Float16LossesComputeInFloat32AndKeepTheirDtype) {
  std::vector<double> x;
  std::vector<int32_t> y;
  UOpRef X = randd({3, 4}, x, -2, 2);
  UOpRef Y = ints({3}, y, 0, 3);
  auto half = fe::cast(X, DType::Float16);
  ASSERT_TRUE(half.ok());
  auto loss = fe::cross_entropy(*half, Y, 1, 0, "mean");
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ((*loss)->dtype, DType::Float16);
  auto ints_x = fe::cast(X, DType::Int32);
  ASSERT_TRUE(ints_x.ok());
  auto from_ints = fe::cross_entropy(*ints_x, Y, 1, 0, "none");
  ASSERT_TRUE(from_ints.ok()) << from_ints.status();
  EXPECT_EQ((*from_ints)->dtype, DType::Float32);
}

TEST_F(LossesTest, BadArgumentsNameTheLossAndTheProblem) {
  std::vector<double> x, p;
  std::vector<int32_t> y;
  UOpRef X = randd({3, 4}, x), P = randd({3, 4}, p, 0.1, 0.9), Q = randd({4}, p, 0.1, 0.9);
  UOpRef Y = ints({3}, y, 0, 3), Y4 = ints({4}, y, 0, 3);
  EXPECT_NE(message(fe::cross_entropy(X, Y, 1, 0, "avg")).find("cross_entropy: reduction must be"), std::string::npos);
  EXPECT_NE(message(fe::cross_entropy(X, Y, 1, 1.5, "mean")).find("label_smoothing must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(message(fe::cross_entropy(X, Y, 1, NAN, "mean")).find("label_smoothing"), std::string::npos);
  EXPECT_NE(message(fe::cross_entropy(X, Y, 2, 0, "mean")).find("out of range"), std::string::npos);
  EXPECT_NE(message(fe::cross_entropy(X, Y4, 1, 0, "mean")).find("fit neither class indices"), std::string::npos);
  EXPECT_NE(message(fe::sparse_categorical_crossentropy(X, Y4, -1, 0, "mean")).find("do not fit logits"),
            std::string::npos);
  EXPECT_NE(message(fe::sparse_categorical_crossentropy(X, P, -1, 0, "mean")).find("do not fit"), std::string::npos);
  EXPECT_NE(message(fe::binary_crossentropy(P, Q, "mean")).find("differ in dtype or shape"), std::string::npos);
  EXPECT_NE(message(fe::binary_crossentropy(P, Y, "none")).find("needs float operands"), std::string::npos);
  EXPECT_NE(message(fe::binary_crossentropy_logits(P, P, Q, "sum")).find("differ in dtype or shape"),
            std::string::npos);
  // A long reduction name comes back cut short.
  EXPECT_LT(message(fe::binary_crossentropy(P, P, std::string(1000, 'x'))).size(), 200u);
}

}  // namespace
}  // namespace polygrad
