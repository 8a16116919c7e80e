// core/frontend/basic_math.h against the C library, value for value and bit for bit (so -0.0,
// nan and the large values that have no fraction count), in float32 and float64; integer
// tensors are their own roundings; and no gradient passes a rounding or sign.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/frontend/basic_math.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class BasicMathTest : public testing::RealizeFixture {
 protected:
  template <typename T>
  void check_roundings(DType dt);
};

// Edge values first, then random ones across magnitudes and halves (x.5 ties).
template <typename T>
std::vector<T> inputs(std::mt19937& rng) {
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> v{T(0), T(-0.0), T(0.5), T(-0.5), T(1.5), T(-1.5), T(2.5), T(-2.5), T(0.49999997), T(-3.7),
                   inf, -inf, std::numeric_limits<T>::quiet_NaN(), T(1e30), T(-1e30), T(8388607.5), T(-8388609),
                   std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest(), std::numeric_limits<T>::denorm_min()};
  std::uniform_real_distribution<double> mag(-12, 60), frac(0, 1);
  std::uniform_int_distribution<int> ties(0, 3);
  for (int i = 0; i < 400; ++i) {
    double x = std::ldexp(frac(rng), static_cast<int>(mag(rng)));
    if (ties(rng) == 0) x = std::floor(x) + 0.5;
    v.push_back(static_cast<T>(i % 2 ? -x : x));
  }
  return v;
}

template <typename T>
bool same_bits(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void BasicMathTest::check_roundings(DType dt) {
  std::mt19937 rng(5);
  std::vector<T> v = inputs<T>(rng), got;
  const int64_t n = static_cast<int64_t>(v.size());
  size_t k = 0;
  UOpRef x = leaf<T>(dt, {n}, got, [&] { return v[k++]; });
  std::fesetround(FE_TONEAREST);
  struct Case {
    const char* name;
    absl::StatusOr<UOpRef> (*f)(const UOpRef&);
    T (*ref)(T);
  };
  const Case cases[] = {
      {"trunc", fe::trunc, [](T a) { return std::trunc(a); }},
      {"floor", fe::floor, [](T a) { return std::floor(a); }},
      {"ceil", fe::ceil, [](T a) { return std::ceil(a); }},
      {"round", fe::round_half_even, [](T a) { return std::nearbyint(a); }},  // ties to even
      {"abs", fe::abs, [](T a) { return std::fabs(a); }},
      {"square", fe::square, [](T a) { return a * a; }},
      // nan for nan (numpy's and tinygrad's; torch 1.13 gives 0), +0.0 for both zeros
      {"sign", fe::sign, [](T a) { return std::isnan(a) ? a : a > 0 ? T(1) : a < 0 ? T(-1) : T(0); }},
  };
  for (const Case& c : cases) {
    std::vector<T> r = run<T>(c.f(x), {n});
    ASSERT_EQ(r.size(), v.size()) << c.name;
    int bad = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (!same_bits(r[i], c.ref(v[i])) && ++bad <= 5)
        ADD_FAILURE() << c.name << "(" << v[i] << ") = " << r[i] << ", want " << c.ref(v[i]) << " (" << dtype_name(dt) << ")";
  }
  std::vector<uint8_t> nan = run<uint8_t>(fe::isnan(x), {n});
  std::vector<uint8_t> pinf = run<uint8_t>(fe::isinf(x, true, false), {n});
  std::vector<uint8_t> both = run<uint8_t>(fe::isinf(x, true, true), {n});
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(nan[i] != 0, std::isnan(v[i])) << v[i];
    EXPECT_EQ(pinf[i] != 0, std::isinf(v[i]) && v[i] > 0) << v[i];
    EXPECT_EQ(both[i] != 0, std::isinf(v[i]) != 0) << v[i];
  }
}

TEST_F(BasicMathTest, RoundingsSignAbsAndTestsMatchTheCLibraryInFloat32) { check_roundings<float>(DType::Float32); }
TEST_F(BasicMathTest, RoundingsSignAbsAndTestsMatchTheCLibraryInFloat64) { check_roundings<double>(DType::Float64); }

TEST_F(BasicMathTest, IntegerTensorsAreTheirOwnRoundingsAndHaveIntegerSignAndAbs) {
  std::vector<int32_t> v;
  UOpRef x = ints({64}, v, -1000, 1000);
  for (auto f : {fe::trunc, fe::floor, fe::ceil, fe::round_half_even}) EXPECT_EQ(*f(x), x);
  std::vector<int32_t> a = run<int32_t>(fe::abs(x), {64}), s = run<int32_t>(fe::sign(x), {64});
  std::vector<uint8_t> none = run<uint8_t>(fe::isnan(x), {64});
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(a[i], std::abs(v[i]));
    EXPECT_EQ(s[i], (v[i] > 0) - (v[i] < 0));
    EXPECT_EQ(none[i], 0);
  }
}

// torch's gradients: 0 through every rounding and sign, sign(x) through abs (0 at 0).
TEST_F(BasicMathTest, RoundingsAndSignPassNoGradientAndAbsPassesTheSign) {
  std::vector<double> v;
  UOpRef x = randd({32}, v, -3, 3);
  v[0] = 0;
  std::memset(bound_.at(x.get())->data(), 0, sizeof(double));
  for (auto f : {fe::trunc, fe::floor, fe::ceil, fe::round_half_even, fe::sign}) {
    UOpRef y = *f(x);
    auto g = fe::gradient(*fe::reduce(Ops::ADD, y, {0}), {x});
    ASSERT_TRUE(g.ok()) << g.status();
    for (double d : run<double>((*g)[0], {32})) EXPECT_EQ(d, 0.0);
  }
  auto g = fe::gradient(*fe::reduce(Ops::ADD, *fe::abs(x), {0}), {x});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> d = run<double>((*g)[0], {32});
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(d[i], (v[i] > 0) - (v[i] < 0)) << v[i];
}

}  // namespace
}  // namespace polygrad
