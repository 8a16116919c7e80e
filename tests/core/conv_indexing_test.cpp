// Convolution, pooling and index ops against direct float64 loops on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/engine/engine.h"
#include "core/frontend/conv.h"
#include "core/frontend/gradient.h"
#include "core/frontend/indexing.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

using ConvIndexingTest = testing::RealizeFixture;

// Direct convolution, zero padding.
std::vector<double> conv_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t n, int64_t cin_all,
                             int64_t h, int64_t wd, int64_t cout, int64_t kh, int64_t kw, int64_t s, int64_t p,
                             int64_t d, int64_t g, int64_t& oh, int64_t& ow) {
  oh = (h + 2 * p - d * (kh - 1) - 1) / s + 1;
  ow = (wd + 2 * p - d * (kw - 1) - 1) / s + 1;
  int64_t cin = cin_all / g, rc = cout / g;
  std::vector<double> out(n * cout * oh * ow, 0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double acc = 0;
          int64_t grp = o / rc;
          for (int64_t c = 0; c < cin; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t yy = y * s + i * d - p, zz = z * s + j * d - p;
                if (yy < 0 || yy >= h || zz < 0 || zz >= wd) continue;
                acc += x[((b * cin_all + grp * cin + c) * h + yy) * wd + zz] * w[((o * cin + c) * kh + i) * kw + j];
              }
          out[((b * cout + o) * oh + y) * ow + z] = acc;
        }
  return out;
}

struct ConvCase {
  int64_t n, cin, h, w, cout, k, stride, pad, dil, groups;
};

class ConvCases : public ConvIndexingTest, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(ConvCases, MatchesDirectConvolution) {
  ConvCase c = GetParam();
  std::vector<double> x, w;
  UOpRef X = randd({c.n, c.cin, c.h, c.w}, x), W = randd({c.cout, c.cin / c.groups, c.k, c.k}, w);
  int64_t oh, ow;
  auto want = conv_ref(x, w, c.n, c.cin, c.h, c.w, c.cout, c.k, c.k, c.stride, c.pad, c.dil, c.groups, oh, ow);
  fe::ConvParams p{{c.stride, c.stride}, {c.pad, c.pad}, {c.dil, c.dil}, c.groups};
  auto got = run<double>(fe::conv(X, W, p), {c.n, c.cout, oh, ow});
  // Padding gets a kernel of its own, so the convolution's loads carry no bounds checks.
  EXPECT_EQ(last_kernels_, c.pad > 0 ? 2u : 1u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvCases,
                         ::testing::Values(ConvCase{2, 3, 8, 8, 4, 3, 1, 0, 1, 1}, ConvCase{1, 4, 9, 7, 6, 3, 2, 1, 1, 2},
                                           ConvCase{2, 2, 10, 10, 2, 3, 1, 2, 2, 1}, ConvCase{1, 6, 5, 5, 6, 1, 1, 0, 1, 6},
                                           ConvCase{1, 2, 7, 9, 3, 2, 3, 1, 1, 1}, ConvCase{1, 1, 16, 16, 16, 3, 1, 1, 1, 1}));

TEST_F(ConvIndexingTest, ConvWeightGradientMatchesFiniteDifferences) {
  std::vector<double> x, w;
  UOpRef X = randd({1, 2, 5, 5}, x), W = randd({3, 2, 3, 3}, w);
  fe::ConvParams p{{2, 2}, {1, 1}, {1, 1}, 1};
  UOpRef y = *fe::conv(X, W, p);
  UOpRef loss = *fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {y, y}), {0, 1, 2, 3});
  auto g = fe::gradient(loss, {W});
  ASSERT_TRUE(g.ok()) << g.status();
  auto analytic = run<double>((*g)[0], W->shape);
  double* wd = static_cast<double*>(bound_[W.get()]->data());
  for (size_t i = 0; i < w.size(); i += 5) {
    double keep = wd[i];
    wd[i] = keep + 1e-6;
    double up = run<double>(loss, {1, 1, 1, 1})[0];
    wd[i] = keep - 1e-6;
    double down = run<double>(loss, {1, 1, 1, 1})[0];
    wd[i] = keep;
    EXPECT_NEAR(analytic[i], (up - down) / 2e-6, 1e-5) << i;
  }
}

TEST_F(ConvIndexingTest, MaxAndAvgPoolWithPadding) {
  std::vector<double> x;
  UOpRef X = randd({2, 3, 7, 6}, x);
  fe::ConvParams p{{2, 2}, {1, 1}, {1, 1}, 1};
  int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (6 + 2 - 3) / 2 + 1;
  auto mx = run<double>(fe::max_pool(X, {3, 3}, p), {2, 3, oh, ow});
  auto av = run<double>(fe::avg_pool(X, {3, 3}, p), {2, 3, oh, ow});
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t z = 0; z < ow; ++z) {
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j) {
            int64_t yy = y * 2 + i - 1, zz = z * 2 + j - 1;
            if (yy < 0 || yy >= 7 || zz < 0 || zz >= 6) continue;
            m = std::max(m, x[(b * 7 + yy) * 6 + zz]);
            s += x[(b * 7 + yy) * 6 + zz];
          }
        EXPECT_EQ(mx[(b * oh + y) * ow + z], m);
        EXPECT_NEAR(av[(b * oh + y) * ow + z], s / 9, 1e-12);
      }
}

TEST_F(ConvIndexingTest, IntegerMaxPoolPaddingNeverWins) {
  for (DType dt : {DType::Int8, DType::Int32, DType::Int64}) {
    BufferPtr buf = *engine_->allocate(DType::Int64, {1, 4, 4});
    UOpRef x64 = *fe::buffer(buf->id(), DType::Int64, {1, 4, 4});
    for (int64_t k = 0; k < 16; ++k) static_cast<int64_t*>(buf->data())[k] = -100 + k;
    bound_[x64.get()] = buf;
    leaves_.push_back(x64);
    UOpRef x = *fe::cast(x64, dt);
    fe::ConvParams p{{2, 2}, {1, 1}, {1, 1}, 1};
    auto got = run<int64_t>(fe::cast(*fe::max_pool(x, {2, 2}, p), DType::Int64), {1, 3, 3});
    // Windows over the padded 6x6 grid: the top-left one holds only element (0,0).
    EXPECT_EQ(got[0], -100) << dtype_name(dt);
    EXPECT_EQ(got[4], -100 + 10) << dtype_name(dt);  // original rows and columns 1..2
    EXPECT_EQ(got[8], -100 + 15) << dtype_name(dt);
  }
}

TEST_F(ConvIndexingTest, OneAndThreeSpatialAxes) {
  // A 3-D convolution whose depth and width kernels are 1 is the 2-D one on each depth slice; a
  // 1-D one is the 2-D one over a height of 1.
  std::vector<double> x, w;
  UOpRef X = randd({1, 2, 3, 6, 1}, x), W = randd({3, 2, 1, 3, 1}, w);
  fe::ConvParams p3{{1, 2, 1}, {0, 1, 0}, {1, 1, 1}, 1};
  auto got3 = run<double>(fe::conv(X, W, p3), {1, 3, 3, 3, 1});
  UOpRef X1 = *fe::reshape(X, {1, 2, 18}), W1 = *fe::reshape(W, {3, 2, 3});
  fe::ConvParams p1{{2}, {1, 2}, {1}, 1};
  auto got1 = run<double>(fe::conv(X1, W1, p1), {1, 3, 10});
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t d = 0; d < 3; ++d)
      for (int64_t y = 0; y < 3; ++y) {
        double acc = 0;
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t k = 0; k < 3; ++k) {
            int64_t yy = y * 2 + k - 1;
            if (yy >= 0 && yy < 6) acc += x[(c * 3 + d) * 6 + yy] * w[(o * 2 + c) * 3 + k];
          }
        EXPECT_NEAR(got3[(o * 3 + d) * 3 + y], acc, 1e-12);
      }
    for (int64_t y = 0; y < 10; ++y) {  // padding (1, 2): (18 + 3 - 3) / 2 + 1 outputs
      double acc = 0;
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t k = 0; k < 3; ++k) {
          int64_t yy = y * 2 + k - 1;
          if (yy >= 0 && yy < 18) acc += x[c * 18 + yy] * w[(o * 2 + c) * 3 + k];
        }
      EXPECT_NEAR(got1[o * 10 + y], acc, 1e-12);
    }
  }
  // Four spatial axes are refused, naming the shapes.
  auto bad = fe::conv(*fe::reshape(X, {1, 2, 3, 6, 1, 1}), *fe::reshape(W, {3, 2, 1, 3, 1, 1}), p3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ConvIndexingTest, MaxPoolIndicesTiesNanAndPadding) {
  // One row: windows of 3, stride 2, padding 1 over [5, 5, 1, nan, 7, nan, 2]. Torch: a tie
  // keeps the first, a NaN beats numbers and the last NaN of a window wins, padding never wins.
  BufferPtr buf = *engine_->allocate(DType::Float64, {1, 7});
  const double nan = std::nan("");
  double vals[] = {5, 5, 1, nan, 7, nan, 2};
  std::copy(std::begin(vals), std::end(vals), static_cast<double*>(buf->data()));
  UOpRef x = *fe::buffer(buf->id(), DType::Float64, {1, 7});
  bound_[x.get()] = buf;
  leaves_.push_back(x);
  fe::ConvParams p{{2}, {1}, {1}, 1};
  auto idx = run<int32_t>(fe::max_pool_indices(x, {3}, p), {1, 4});
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 3, 5, 5}));
  // Every element the lowest int: the first one inside the input wins, not the padding.
  BufferPtr ib = *engine_->allocate(DType::Int32, {2, 2});
  std::fill_n(static_cast<int32_t*>(ib->data()), 4, std::numeric_limits<int32_t>::min());
  UOpRef xi = *fe::buffer(ib->id(), DType::Int32, {2, 2});
  bound_[xi.get()] = ib;
  leaves_.push_back(xi);
  fe::ConvParams q{{1, 1}, {1, 1}, {1, 1}, 1};
  auto ii = run<int32_t>(fe::max_pool_indices(xi, {2, 2}, q), {3, 3});
  EXPECT_EQ(ii, (std::vector<int32_t>{0, 0, 1, 0, 0, 1, 2, 2, 3}));
}

TEST_F(ConvIndexingTest, CumsumTrilTriu) {
  std::vector<double> x;
  UOpRef X = randd({3, 5}, x);
  auto c0 = run<double>(fe::cumsum(X, 0), {3, 5});
  auto c1 = run<double>(fe::cumsum(X, -1), {3, 5});
  auto lo = run<double>(fe::tril(X, 0), {3, 5});
  auto up = run<double>(fe::triu(X, 1), {3, 5});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s0 = 0, s1 = 0;
      for (int k = 0; k <= i; ++k) s0 += x[k * 5 + j];
      for (int k = 0; k <= j; ++k) s1 += x[i * 5 + k];
      EXPECT_NEAR(c0[i * 5 + j], s0, 1e-12);
      EXPECT_NEAR(c1[i * 5 + j], s1, 1e-12);
      EXPECT_EQ(lo[i * 5 + j], j <= i ? x[i * 5 + j] : 0.0);
      EXPECT_EQ(up[i * 5 + j], j - i >= 1 ? x[i * 5 + j] : 0.0);
    }
}

TEST_F(ConvIndexingTest, OneHotArgmaxArgminGather) {
  std::vector<int32_t> idx;
  std::uniform_int_distribution<int32_t> pick(0, 4);
  UOpRef I = leaf<int32_t>(DType::Int32, {3, 4}, idx, [&] { return pick(rng_); });
  auto oh = run<int32_t>(fe::one_hot(I, 5), {3, 4, 5});
  for (int i = 0; i < 12; ++i)
    for (int k = 0; k < 5; ++k) EXPECT_EQ(oh[i * 5 + k], idx[i] == k ? 1 : 0);

  // Ties: the first maximum wins, as in numpy.
  std::vector<float> v{1, 3, 3, 0, 2, -1, -1, 5};
  UOpRef V = leaf<float>(DType::Float32, {2, 4}, v, [&, i = 0]() mutable { return v[i++]; });
  auto am = run<int32_t>(fe::argmax(V, 1, false), {2});
  auto an = run<int32_t>(fe::argmin(V, -1, true), {2, 1});
  EXPECT_EQ(am, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(an, (std::vector<int32_t>{3, 1}));

  std::vector<double> x;
  UOpRef X = randd({3, 5}, x);
  std::vector<int32_t> gi;
  UOpRef G = leaf<int32_t>(DType::Int32, {3, 4}, gi, [&] { return pick(rng_); });
  auto g = run<double>(fe::gather(X, 1, G), {3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(g[i * 4 + j], x[i * 5 + gi[i * 4 + j]]);
}

TEST_F(ConvIndexingTest, GatherLoadsOnlyTheSelectedRows) {
  // Five lookups in a table of 4096 rows of 8: the kernel iterates about 5 x 8 times, not
  // 4096 x 5 x 8 (a comparison of every row with the index), which an inline realize's work
  // limit checks. Out-of-range rows give 0; the gradient adds each row's upstream gradient into
  // the rows it selected (twice for a row selected twice).
  std::vector<double> t;
  UOpRef T = randd({4096, 8}, t);
  std::vector<int32_t> rows;
  const std::vector<int32_t> picks{7, -1, 4095, 4096, 7};
  UOpRef I = leaf<int32_t>(DType::Int32, {5, 1}, rows, [&, i = 0]() mutable { return picks[i++]; });
  UOpRef Ie = *fe::expand(I, {5, 8});
  auto y = fe::gather(T, 0, Ie);
  ASSERT_TRUE(y.ok()) << y.status();
  auto got = run<double>(y, {5, 8});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(got[i * 8 + j], rows[i] >= 0 && rows[i] < 4096 ? t[rows[i] * 8 + j] : 0.0) << i << "," << j;
  RealizeOptions inline_only;
  inline_only.inline_work_limit = 5 * 8 * 4;
  auto again = engine_->realize({*y}, bound_, inline_only);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->deferred) << "the gather's kernel loops over the whole table";

  std::vector<double> w;
  UOpRef W = randd({5, 8}, w);
  UOpRef loss = *fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {*y, W}), {0, 1});
  auto grads = fe::gradient(loss, {T});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto dt = run<double>((*grads)[0], {4096, 8});
  std::vector<double> want(4096 * 8, 0.0);
  for (int i = 0; i < 5; ++i)
    if (rows[i] >= 0 && rows[i] < 4096)
      for (int j = 0; j < 8; ++j) want[rows[i] * 8 + j] += w[i * 8 + j];
  EXPECT_EQ(dt, want);
}

}  // namespace
}  // namespace polygrad

namespace polygrad {
namespace {

TEST(Arange, AsAnOutputOfEveryDtype) {
  auto engine = std::move(*Engine::create({.threads = 1}));
  for (DType dt : {DType::Int32, DType::Int64, DType::Float32, DType::UInt8}) {
    auto a = frontend::arange(5, dt);
    ASSERT_TRUE(a.ok()) << a.status();
    auto r = engine->realize({*a}, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs[0]->numel(), 5);
    for (int i = 0; i < 5; ++i) {
      double v = dt == DType::Int32   ? static_cast<const int32_t*>(r->outputs[0]->data())[i]
                 : dt == DType::Int64 ? static_cast<const int64_t*>(r->outputs[0]->data())[i]
                 : dt == DType::UInt8 ? static_cast<const uint8_t*>(r->outputs[0]->data())[i]
                                      : static_cast<const float*>(r->outputs[0]->data())[i];
      EXPECT_EQ(v, i);
    }
  }
}

}  // namespace
}  // namespace polygrad
