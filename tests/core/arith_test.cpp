// Comparisons, floored/truncated division, integer powers and any/all (core/frontend/arith.h)
// against references written here from their definitions (Python's // and %, C's fmod, torch's
// wrapping integer pow), over each integer dtype's extremes, zero divisors and nan.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/frontend/arith.h"
#include "core/frontend/composites.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

// Python's a // b and a % b for integers; 0 for a zero divisor (the daemon's rule).
template <typename T>
T floor_div_ref(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  if constexpr (std::is_signed_v<T>)
    if (a % b != 0 && ((a % b < 0) != (b < 0))) --q;
  return q;
}
template <typename T>
T remainder_ref(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  if constexpr (std::is_signed_v<T>)
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
// base ** e wrapping in T (through the unsigned type, whose overflow is defined); negative
// exponents give 1 / base truncated.
template <typename T>
T pow_ref(T base, T e) {
  if constexpr (std::is_signed_v<T>)
    if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  // In uint64_t: a narrower unsigned type would be promoted to int, whose product can overflow.
  using U = std::make_unsigned_t<T>;
  uint64_t r = 1, s = static_cast<U>(base);
  for (U n = static_cast<U>(e); n; n >>= 1, s = static_cast<U>(s * s))
    if (n & 1) r = static_cast<U>(r * s);
  return static_cast<T>(static_cast<U>(r));
}

class ArithTest : public testing::RealizeFixture {
 protected:
  template <typename T>
  void check_integers(DType dt) {
    constexpr int64_t n = 64;
    const T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    // No -1: lowest // -1 overflows (torch wraps it; C leaves it undefined).
    const T pool[] = {lo, hi, T(0), T(1), T(2), T(3), T(7), static_cast<T>(lo + 1), static_cast<T>(hi - 5),
                      static_cast<T>(std::is_signed_v<T> ? -3 : 4), static_cast<T>(std::is_signed_v<T> ? -8 : 9)};
    std::uniform_int_distribution<int> pick(0, std::size(pool) - 1);
    std::vector<T> a, b, e;
    UOpRef A = leaf<T>(dt, {n}, a, [&] { return pool[pick(rng_)]; });
    UOpRef B = leaf<T>(dt, {n}, b, [&] { return pool[pick(rng_)]; });
    std::uniform_int_distribution<int> small(std::is_signed_v<T> ? -4 : 0, 70);
    UOpRef E = leaf<T>(dt, {n}, e, [&] { return static_cast<T>(small(rng_)); });
    std::vector<T> fd = run<T>(fe::floor_divide(A, B), {n});
    std::vector<T> rm = run<T>(fe::remainder(A, B), {n});
    std::vector<T> fm = run<T>(fe::fmod(A, B), {n});
    std::vector<T> pw = run<T>(fe::int_pow(A, E), {n});
    std::vector<uint8_t> le = run<uint8_t>(fe::less_equal(A, B), {n});
    std::vector<uint8_t> eq = run<uint8_t>(fe::equal(A, B), {n});
    for (int64_t i = 0; i < n; ++i) {
      const std::string at = absl::StrCat(dtype_name(dt), " ", +a[i], " ", +b[i]);
      EXPECT_EQ(fd[i], floor_div_ref(a[i], b[i])) << "// " << at;
      EXPECT_EQ(rm[i], remainder_ref(a[i], b[i])) << "% " << at;
      EXPECT_EQ(fm[i], b[i] == 0 ? T(0) : static_cast<T>(a[i] % b[i])) << "fmod " << at;
      EXPECT_EQ(pw[i], pow_ref(a[i], e[i])) << "pow " << +a[i] << " " << +e[i];
      EXPECT_EQ(le[i], a[i] <= b[i]) << "<= " << at;
      EXPECT_EQ(eq[i], a[i] == b[i]) << "== " << at;
    }
  }

  // x << n and x >> n for every n in [0, bits), against C++20's shifts (arithmetic for signed).
  template <typename T>
  void check_shifts(DType dt) {
    constexpr int bits = 8 * sizeof(T);
    const T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    const T pool[] = {lo, hi, T(0), T(1), static_cast<T>(-1), T(5), static_cast<T>(lo + 3), static_cast<T>(hi / 3)};
    std::uniform_int_distribution<int> pick(0, std::size(pool) - 1);
    std::vector<T> x, n;
    UOpRef X = leaf<T>(dt, {4 * bits}, x, [&] { return pool[pick(rng_)]; });
    int k = 0;
    UOpRef N = leaf<T>(dt, {4 * bits}, n, [&] { return static_cast<T>(k++ % bits); });
    std::vector<T> l = run<T>(fe::shift_left(X, N), {4 * bits});
    std::vector<T> r = run<T>(fe::shift_right(X, N), {4 * bits});
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < x.size(); ++i) {
      const auto shifted = static_cast<U>(uint64_t{static_cast<U>(x[i])} << n[i]);
      EXPECT_EQ(l[i], static_cast<T>(shifted)) << dtype_name(dt) << " " << +x[i] << " << " << +n[i];
      EXPECT_EQ(r[i], static_cast<T>(x[i] >> n[i])) << dtype_name(dt) << " " << +x[i] << " >> " << +n[i];
    }
  }
};

TEST_F(ArithTest, ShiftsByEveryAmountMatchCpp) {
  check_shifts<int8_t>(DType::Int8);
  check_shifts<int32_t>(DType::Int32);
  check_shifts<int64_t>(DType::Int64);
  check_shifts<uint8_t>(DType::UInt8);
  check_shifts<uint16_t>(DType::UInt16);
  check_shifts<uint64_t>(DType::UInt64);
  UOpRef x = *fe::constant(int64_t{1}, DType::Int32, {2});
  EXPECT_EQ(fe::shift_left(x, *fe::constant(int64_t{32}, DType::Int32, {2})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ArithTest, IntegerDivisionRemaindersPowersAndComparisons) {
  check_integers<int8_t>(DType::Int8);
  check_integers<int16_t>(DType::Int16);
  check_integers<int32_t>(DType::Int32);
  check_integers<int64_t>(DType::Int64);
  check_integers<uint8_t>(DType::UInt8);
  check_integers<uint32_t>(DType::UInt32);
  check_integers<uint64_t>(DType::UInt64);
}

TEST_F(ArithTest, ConstantIntegerExponentsAndTheRefusedNegativeOne) {
  std::vector<int64_t> a;
  std::uniform_int_distribution<int64_t> d(-20, 20);
  UOpRef A = leaf<int64_t>(DType::Int64, {32}, a, [&] { return d(rng_); });
  for (int64_t k : {0, 1, 2, 7, 29, 63}) {
    std::vector<int64_t> got = run<int64_t>(fe::int_pow(A, *fe::constant(k, DType::Int64, {32})), {32});
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], pow_ref<int64_t>(a[i], k)) << a[i] << " ** " << k;
  }
  auto refused = fe::int_pow(A, *fe::constant(int64_t{-2}, DType::Int64, {32}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::floor_divide(*fe::constant(int64_t{1}, DType::Bool, {2}), *fe::constant(int64_t{1}, DType::Bool, {2}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ArithTest, FloatRemaindersFollowCAndPython) {
  std::vector<double> a, b;
  UOpRef A = randd({200}, a, -100, 100);
  std::uniform_real_distribution<double> mag(0.5, 9), sgn(-1, 1);
  UOpRef B = leaf<double>(DType::Float64, {200}, b, [&] { return std::copysign(mag(rng_), sgn(rng_)); });
  std::vector<double> fm = run<double>(fe::fmod(A, B), {200});
  std::vector<double> rm = run<double>(fe::remainder(A, B), {200});
  std::vector<double> fd = run<double>(fe::floor_divide(A, B), {200});
  for (size_t i = 0; i < a.size(); ++i) {
    const double r = std::fmod(a[i], b[i]);
    EXPECT_NEAR(fm[i], r, 1e-12) << a[i] << " fmod " << b[i];
    EXPECT_NEAR(rm[i], r != 0 && ((r < 0) != (b[i] < 0)) ? r + b[i] : r, 1e-12) << a[i] << " % " << b[i];
    EXPECT_EQ(fd[i], std::floor(a[i] / b[i])) << a[i] << " // " << b[i];
  }
}

TEST_F(ArithTest, ComparisonsWithNanAreFalse) {
  std::vector<double> a, b;
  const double nan = std::nan(""), vals[] = {nan, 1.0, 2.0, -0.0, 0.0, INFINITY};
  int k = 0;
  UOpRef A = leaf<double>(DType::Float64, {36}, a, [&] { return vals[k++ / 6]; });
  k = 0;
  UOpRef B = leaf<double>(DType::Float64, {36}, b, [&] { return vals[k++ % 6]; });
  std::vector<uint8_t> le = run<uint8_t>(fe::less_equal(A, B), {36});
  std::vector<uint8_t> eq = run<uint8_t>(fe::equal(A, B), {36});
  for (int i = 0; i < 36; ++i) {
    EXPECT_EQ(le[i], a[i] <= b[i]) << a[i] << " <= " << b[i];
    EXPECT_EQ(eq[i], a[i] == b[i]) << a[i] << " == " << b[i];
  }
}

TEST_F(ArithTest, AnyAndAllOverAxesAndOverNothing) {
  std::vector<double> v;
  UOpRef x = randd({3, 4}, v, 0, 1);
  double* d = static_cast<double*>(bound_.at(x.get())->data());
  const double rows[12] = {0, 0, 0, 0, 0, std::nan(""), 0, 0, 1, 2, -3, 4};
  std::copy(rows, rows + 12, d);
  EXPECT_EQ(run<uint8_t>(fe::any(x, {1}, false), {3}), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(run<uint8_t>(fe::all(x, {1}, true), {3, 1}), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(run<uint8_t>(fe::any(x, {}, false), {}), (std::vector<uint8_t>{1}));
  UOpRef empty = *fe::constant(1.0, DType::Float32, {0, 2});
  EXPECT_EQ(run<uint8_t>(fe::all(empty, {0}, false), {2}), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(run<uint8_t>(fe::any(empty, {0}, false), {2}), (std::vector<uint8_t>{0, 0}));
}

// pow's gradient is torch's at the edges: b a^(b-1) (0 where b = 0) and a^b ln a (0 where a = 0
// and b >= 0), where pow's own construction gives 0 for nan (negative bases with fractions) and
// nan for finite values (0 to a positive power).
TEST_F(ArithTest, PowGradientsAreTorchsAtTheEdges) {
  const double as[] = {0.0, -INFINITY, 1.0, INFINITY, -2.0, 2.5, 0.5};
  const double bs[] = {-1.0, 0.0, 0.3, 1.0, 2.0, -0.3, 2.5};
  constexpr int64_t n = 49;
  std::vector<double> a, b;
  int k = 0;
  UOpRef A = leaf<double>(DType::Float64, {n}, a, [&] { return as[k++ / 7]; });
  k = 0;
  UOpRef B = leaf<double>(DType::Float64, {n}, b, [&] { return bs[k++ % 7]; });
  auto g = fe::gradient(*fe::reduce(Ops::ADD, *fe::pow(A, B), {0}), {A, B});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> ga = run<double>((*g)[0], {n}), gb = run<double>((*g)[1], {n});
  auto same = [](double got, double want) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::abs(got - want) <= 1e-12 * std::max(1.0, std::abs(want));
  };
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const double want_a = y == 0 ? 0 : y * std::pow(x, y - 1);
    const double want_b = x == 0 && y >= 0 ? 0 : std::pow(x, y) * std::log(x);
    EXPECT_TRUE(same(ga[i], want_a)) << "d/da " << x << " ** " << y << ": " << ga[i] << " vs " << want_a;
    EXPECT_TRUE(same(gb[i], want_b)) << "d/db " << x << " ** " << y << ": " << gb[i] << " vs " << want_b;
  }
}

// A negated negative constant renders as `(- -c)`: `(--c)` is C's decrement and does not compile.
TEST_F(ArithTest, NegatingANegativeConstantCompiles) {
  UOpRef c = *fe::constant(-0.3, DType::Float32, {2});
  EXPECT_EQ(run<float>(fe::alu(Ops::NEG, {c}), {2}), (std::vector<float>{0.3f, 0.3f}));
}

}  // namespace
}  // namespace polygrad
