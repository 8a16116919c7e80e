// min, minimum and argmin (core/frontend/composites.h, indexing.h) at the edges of every integer
// dtype, where a negated max would wrap (-(-2^31) is -2^31 in int32), and with torch's float
// gradient (ties split).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/frontend/composites.h"
#include "core/frontend/gradient.h"
#include "core/frontend/indexing.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class MinimumTest : public testing::RealizeFixture {
 protected:
  // Rows of `cols` values of T drawn from the dtype's extremes and a few between, so each row's
  // minimum is often the dtype's lowest value; checks min, argmin and minimum against std.
  template <typename T>
  void check(DType dt) {
    constexpr int64_t rows = 6, cols = 5;
    const T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    const T pool[] = {lo, hi, T(0), T(1), static_cast<T>(lo + 1), static_cast<T>(hi - 1), T(7)};
    std::uniform_int_distribution<int> pick(0, 6);
    std::vector<T> a, b;
    UOpRef A = leaf<T>(dt, {rows, cols}, a, [&] { return pool[pick(rng_)]; });
    UOpRef B = leaf<T>(dt, {rows, cols}, b, [&] { return pool[pick(rng_)]; });
    std::vector<T> m = run<T>(fe::min(A, {1}, false), {rows});
    std::vector<int32_t> am = run<int32_t>(fe::argmin(A, 1, false), {rows});
    std::vector<T> e = run<T>(fe::minimum(A, B), {rows, cols});
    for (int64_t r = 0; r < rows; ++r) {
      auto row = a.begin() + r * cols;
      EXPECT_EQ(m[r], *std::min_element(row, row + cols)) << dtype_name(dt) << " row " << r;
      EXPECT_EQ(am[r], std::min_element(row, row + cols) - row) << dtype_name(dt) << " row " << r;
    }
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(e[i], std::min(a[i], b[i])) << dtype_name(dt) << " " << i;
  }
};

TEST_F(MinimumTest, IntegerMinimaAtTheDtypesEdgesDoNotWrap) {
  check<int8_t>(DType::Int8);
  check<int32_t>(DType::Int32);
  check<int64_t>(DType::Int64);
  check<uint8_t>(DType::UInt8);
  check<uint32_t>(DType::UInt32);
  check<uint64_t>(DType::UInt64);
}

TEST_F(MinimumTest, BoolMinimumIsAnd) {
  std::vector<uint8_t> a, b;
  std::bernoulli_distribution coin(0.5);
  UOpRef A = leaf<uint8_t>(DType::Bool, {16}, a, [&] { return uint8_t{coin(rng_)}; });
  UOpRef B = leaf<uint8_t>(DType::Bool, {16}, b, [&] { return uint8_t{coin(rng_)}; });
  std::vector<uint8_t> e = run<uint8_t>(fe::minimum(A, B), {16});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(e[i], a[i] & b[i]) << i;
  std::vector<int32_t> am = run<int32_t>(fe::argmin(A, 0, false), {});
  EXPECT_EQ(am[0], std::min_element(a.begin(), a.end()) - a.begin());
}

// The gradient of min reaches the minima, split equally among ties (torch's amin, tinygrad's min).
TEST_F(MinimumTest, FloatMinGradientSplitsTies) {
  std::vector<double> v;
  UOpRef x = randd({2, 4}, v, 0, 1);
  double* d = static_cast<double*>(bound_.at(x.get())->data());
  const double row[8] = {3, 1, 1, 2, -5, 0, 4, -5};
  std::copy(row, row + 8, d);
  auto g = fe::gradient(*fe::reduce(Ops::ADD, *fe::min(x, {1}, false), {0}), {x});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> got = run<double>((*g)[0], {2, 4});
  const double want[8] = {0, 0.5, 0.5, 0, 0.5, 0, 0, 0.5};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], want[i]) << i;
}

}  // namespace
}  // namespace polygrad
