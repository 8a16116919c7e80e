// core/frontend/scatter.h: scatter_reduce, nll_loss, interpolate, unfold, nonzero and multinomial
// against direct loops on random inputs, and their argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/frontend/scatter.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

using ScatterTest = testing::RealizeFixture;

// scatter_reduce along axis 1 of (R, N) x with (R, M) index and (R, K >= M) src.
std::vector<double> scatter_ref(const std::vector<double>& x, const std::vector<int32_t>& idx,
                                const std::vector<double>& src,
                                int64_t rows, int64_t n, int64_t m, int64_t k, fe::ScatterReduce mode, bool self) {
  std::vector<double> out = x;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> hits;
      for (int64_t j = 0; j < m; ++j)
        if (idx[r * m + j] == i) hits.push_back(src[r * k + j]);
      if (hits.empty()) continue;
      const bool with_self = self && mode != fe::ScatterReduce::None;
      if (with_self) hits.push_back(x[r * n + i]);
      double v = 0;
      switch (mode) {
        case fe::ScatterReduce::None:  // the last update in index order wins, as torch on the CPU
          v = hits.back();
          break;
        case fe::ScatterReduce::Sum:
          for (double h : hits) v += h;
          break;
        case fe::ScatterReduce::Mean:
          for (double h : hits) v += h;
          v /= static_cast<double>(hits.size());
          break;
        case fe::ScatterReduce::Prod:
          v = 1;
          for (double h : hits) v *= h;
          break;
        case fe::ScatterReduce::Amax: v = *std::max_element(hits.begin(), hits.end()); break;
        case fe::ScatterReduce::Amin: v = *std::min_element(hits.begin(), hits.end()); break;
      }
      out[r * n + i] = v;
    }
  return out;
}

TEST_F(ScatterTest, ScatterReduceMatchesDirectLoopsInEveryMode) {
  const int64_t rows = 3, n = 5, m = 6, k = 7;
  for (auto mode : {fe::ScatterReduce::None, fe::ScatterReduce::Sum, fe::ScatterReduce::Mean, fe::ScatterReduce::Prod,
                    fe::ScatterReduce::Amax, fe::ScatterReduce::Amin}) {
    for (bool self : {true, false}) {
      std::vector<double> x, src;
      std::vector<int32_t> idx;
      UOpRef X = randd({rows, n}, x), S = randd({rows, k}, src);
      UOpRef I = ints({rows, m}, idx, 0, n - 1);
      auto got = run<double>(fe::scatter_reduce(X, -1, I, S, mode, self), {rows, n});
      auto want = scatter_ref(x, idx, src, rows, n, m, k, mode, self);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-12) << "mode " << static_cast<int>(mode) << " self " << self << " at " << i;
    }
  }
}

TEST_F(ScatterTest, IndexSmallerOffTheAxisUpdatesThatCornerOnly) {
  // x (4, 5) along axis 1 with a (2, 3) index: rows 2 and 3 keep x, as torch.
  const int64_t rows = 4, n = 5, m = 3, k = 3;
  for (auto mode : {fe::ScatterReduce::None, fe::ScatterReduce::Sum, fe::ScatterReduce::Amin}) {
    std::vector<double> x, src;
    std::vector<int32_t> idx;
    UOpRef X = randd({rows, n}, x), S = randd({2, k}, src);
    UOpRef I = ints({2, m}, idx, 0, n - 1);
    auto got = run<double>(fe::scatter_reduce(X, 1, I, S, mode, true), {rows, n});
    std::vector<double> top(x.begin(), x.begin() + 2 * n);
    auto want = scatter_ref(top, idx, src, 2, n, m, k, mode, true);
    want.insert(want.end(), x.begin() + 2 * n, x.end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "mode " << static_cast<int>(mode) << " at " << i;
  }
}

TEST_F(ScatterTest, IntegerMeanRoundsTowardMinusInfinity) {
  std::vector<int32_t> x, idx, src;
  UOpRef X = leaf<int32_t>(DType::Int32, {1, 2}, x, [] { return 0; });
  int i = 0;
  UOpRef I = leaf<int32_t>(DType::Int32, {1, 2}, idx, [] { return 0; });
  UOpRef S = leaf<int32_t>(DType::Int32, {1, 2}, src, [&] { return i++ == 0 ? -3 : 0; });
  // (-3 + 0) / 2 without self: -1.5 rounds to -2 (torch), where C's division gives -1.
  auto got = run<int32_t>(fe::scatter_reduce(X, 1, I, S, fe::ScatterReduce::Mean, false), {1, 2});
  EXPECT_EQ(got, (std::vector<int32_t>{-2, 0}));
}

TEST_F(ScatterTest, NarrowIndexDtypesNeverWrapOntoLaterPositions) {
  std::vector<double> x, s;
  std::vector<uint8_t> idx;
  UOpRef X = leaf<double>(DType::Float64, {1, 300}, x, [] { return 0.0; });
  UOpRef S = leaf<double>(DType::Float64, {1, 1}, s, [] { return 1.0; });
  UOpRef I = leaf<uint8_t>(DType::UInt8, {1, 1}, idx, [] { return uint8_t{4}; });
  auto got = run<double>(fe::scatter_reduce(X, 1, I, S, fe::ScatterReduce::Sum, true), {1, 300});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i == 4 ? 1.0 : 0.0) << i;  // 260 = 4 + 256
}

TEST_F(ScatterTest, NllLossMatchesDirectLoopWithWeightAndIgnoredClass) {
  const int64_t batch = 6, classes = 4, ignore = 2;
  std::vector<double> logp, w;
  std::vector<int32_t> y;
  UOpRef L = randd({batch, classes}, logp, -3, 0), W = randd({classes}, w, 0.5, 2);
  UOpRef Y = ints({batch}, y, 0, classes - 1);
  double total = 0, weights = 0;
  std::vector<double> each(batch, 0);
  for (int64_t b = 0; b < batch; ++b) {
    if (y[b] == ignore) continue;
    each[b] = -w[y[b]] * logp[b * classes + y[b]];
    total += each[b];
    weights += w[y[b]];
  }
  auto none = run<double>(fe::nll_loss(L, Y, W, ignore, "none"), {batch});
  for (int64_t b = 0; b < batch; ++b) EXPECT_NEAR(none[b], each[b], 1e-12);
  EXPECT_NEAR(run<double>(fe::nll_loss(L, Y, W, ignore, "sum"), {})[0], total, 1e-12);
  EXPECT_NEAR(run<double>(fe::nll_loss(L, Y, W, ignore, "mean"), {})[0], total / weights, 1e-12);
}

TEST_F(ScatterTest, NllLossTargetsInANarrowDtypeNeverWrapOntoLaterClasses) {
  std::vector<double> logp;
  std::vector<uint8_t> y;
  UOpRef L = randd({1, 300}, logp, -3, -1);
  UOpRef Y = leaf<uint8_t>(DType::UInt8, {1}, y, [] { return uint8_t{4}; });
  // A one-hot over 300 classes counted in uint8 would also pick class 260 = 4 + 256.
  EXPECT_NEAR(run<double>(fe::nll_loss(L, Y, nullptr, -100, "sum"), {})[0], -logp[4], 1e-12);
}

TEST_F(ScatterTest, InterpolateLinearAndNearestMatchTorchsIndexRules) {
  const int64_t n = 4, m = 7;
  std::vector<double> x;
  UOpRef X = randd({2, n}, x);
  for (bool align : {false, true}) {
    auto got = run<double>(fe::interpolate(X, {m}, "linear", align), {2, m});
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t j = 0; j < m; ++j) {
        double src = align ? j * double(n - 1) / double(m - 1) : std::max((j + 0.5) * double(n) / double(m) - 0.5, 0.0);
        const auto lo = std::min<int64_t>(static_cast<int64_t>(src), n - 1), hi = std::min<int64_t>(lo + 1, n - 1);
        const double f = src - static_cast<double>(lo);
        EXPECT_NEAR(got[r * m + j], x[r * n + lo] * (1 - f) + x[r * n + hi] * f, 1e-12) << align << " " << j;
      }
  }
  for (const char* mode : {"nearest", "nearest-exact"}) {
    const double off = std::string(mode) == "nearest" ? 0.0 : 0.5;
    auto got = run<double>(fe::interpolate(X, {m}, mode, false), {2, m});
    for (int64_t j = 0; j < m; ++j) {
      const auto i = std::min<int64_t>(static_cast<int64_t>(std::floor((j + off) * double(n) / double(m))), n - 1);
      EXPECT_EQ(got[j], x[i]) << mode << " " << j;
    }
  }
}

TEST_F(ScatterTest, UnfoldAndNonzero) {
  std::vector<double> x;
  UOpRef X = randd({2, 7}, x);
  auto w = run<double>(fe::unfold(X, 1, 3, 2), {2, 3, 3});
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(w[(r * 3 + c) * 3 + k], x[r * 7 + c * 2 + k]);
  std::vector<int32_t> v;
  int i = 0;
  UOpRef Z = leaf<int32_t>(DType::Int32, {2, 3}, v, [&] { return (i++ % 3 == 1) ? 0 : i; });  // zeros at 1 and 4
  auto pos = run<int32_t>(fe::nonzero(Z, 4), {4, 2});
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 0, 0, 2, 1, 0, 1, 2}));
  // A fixed row count past the nonzero count (tinygrad's size=): the rest are the fill value.
  auto filled = run<int32_t>(fe::nonzero(Z, 6, -1), {6, 2});
  EXPECT_EQ(filled, (std::vector<int32_t>{0, 0, 0, 2, 1, 0, 1, 2, -1, -1, -1, -1}));
  EXPECT_NE(message(fe::nonzero(Z, 2, int64_t{1} << 40)).find("does not fit int32"), std::string::npos);
  // masked_select: Z's elements where Z is nonzero, then the fill for the rows past them.
  UOpRef zero = *fe::constant(int64_t{0}, DType::Int32, Z->shape);
  UOpRef mask = *fe::alu(Ops::CMPNE, {Z, zero});
  UOpRef fill = *fe::constant(int64_t{-7}, DType::Int32, Shape{});
  auto picked = run<int32_t>(fe::masked_select(mask, Z, fill, 6), {6});
  EXPECT_EQ(picked, (std::vector<int32_t>{v[0], v[2], v[3], v[5], -7, -7}));
  EXPECT_NE(message(fe::masked_select(Z, Z, fill, 2)).find("the mask must be bool"), std::string::npos);
}

TEST_F(ScatterTest, MultinomialDrawsOnlyWeightedClasses) {
  std::vector<double> w;
  int i = 0;
  // Row 0 weighs classes 0, 2 and 4, row 1 classes 1 and 3.
  UOpRef W = leaf<double>(DType::Float64, {2, 5}, w, [&] { return (i++ % 2 == 0) ? 1.0 : 0.0; });
  auto without = run<int32_t>(fe::multinomial(W, 2, false, {7, 0}), {2, 2});
  EXPECT_NE(without[0], without[1]);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(without[k] % 2, 0);
  for (int k = 2; k < 4; ++k) EXPECT_EQ(without[k] % 2, 1);
  auto with = run<int32_t>(fe::multinomial(W, 50, true, {7, 1}), {2, 50});
  for (int k = 0; k < 100; ++k) EXPECT_EQ(with[k] % 2, k < 50 ? 0 : 1) << k;
}

// ---- errors ---------------------------------------------------------------------------------

TEST_F(ScatterTest, RejectsBadArguments) {
  std::vector<double> x, s;
  std::vector<int32_t> idx, y;
  UOpRef X = randd({3, 4}, x), S = randd({3, 2}, s);
  UOpRef I = ints({3, 2}, idx, 0, 3);
  EXPECT_NE(message(fe::scatter_reduce(X, 2, I, S, fe::ScatterReduce::Sum, true)).find("axis 2 is out of range"),
            std::string::npos);
  EXPECT_NE(message(fe::scatter_reduce(X, 1, S, S, fe::ScatterReduce::Sum, true)).find("index must be an integer"),
            std::string::npos);
  UOpRef too_wide = ints({3, 5}, idx, 0, 3);
  EXPECT_NE(message(fe::scatter_reduce(X, 0, too_wide, too_wide, fe::ScatterReduce::Sum, true)).find("exceeds the input"),
            std::string::npos);
  UOpRef wide = ints({3, 3}, idx, 0, 3);
  EXPECT_NE(message(fe::scatter_reduce(X, 1, wide, S, fe::ScatterReduce::Sum, true)).find("smaller than index"),
            std::string::npos);
  EXPECT_NE(message(fe::parse_scatter_reduce("max")).find("reduce must be"), std::string::npos);
  UOpRef Y = ints({4}, y, 0, 3);
  EXPECT_NE(message(fe::nll_loss(X, Y, nullptr, -100, "mean")).find("do not fit"), std::string::npos);
  UOpRef Y3 = ints({3}, y, 0, 3);
  EXPECT_NE(message(fe::nll_loss(X, Y3, S, -100, "mean")).find("one entry per class"), std::string::npos);
  EXPECT_NE(message(fe::nll_loss(X, Y3, nullptr, -100, "avg")).find("reduction must be"), std::string::npos);
  EXPECT_NE(message(fe::nll_loss(I, Y3, nullptr, -100, "mean")).find("must be float"), std::string::npos);
  EXPECT_NE(message(fe::interpolate(X, {2, 2, 2}, "linear", false)).find("needs 1 to 2 output sizes"),
            std::string::npos);
  EXPECT_NE(message(fe::interpolate(X, {0}, "linear", false)).find("not positive"), std::string::npos);
  EXPECT_NE(message(fe::interpolate(X, {3}, "cubic", false)).find("mode must be"), std::string::npos);
  EXPECT_NE(message(fe::unfold(X, 1, 5, 1)).find("size 5 must be from 0 to 4"), std::string::npos);
  EXPECT_NE(message(fe::unfold(X, 1, 2, 0)).find("step must be >= 1"), std::string::npos);
  EXPECT_NE(message(fe::unfold(X, -3, 2, 1)).find("out of range"), std::string::npos);
  EXPECT_NE(message(fe::nonzero(X, -1)).find("count must be >= 0"), std::string::npos);
  EXPECT_NE(message(fe::multinomial(X, 5, false, {})).find("5 samples without replacement from 4 classes"),
            std::string::npos);
  UOpRef X3 = randd({2, 2, 2}, x);
  EXPECT_NE(message(fe::multinomial(X3, 1, true, {})).find("1-D or 2-D"), std::string::npos);
}

}  // namespace
}  // namespace polygrad
