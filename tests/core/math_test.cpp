// The elementwise math composites (core/frontend/math.h) against the C library in float64, over
// ranges that reach every branch of each approximation, and their argument checks. Values at
// nan, ±inf and ±0 and the gradients are compared with torch in tests/e2e/test_torch_parity.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "core/frontend/math.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class MathTest : public testing::RealizeFixture {
 protected:
  // Relative error against `want` over 256 random float64 inputs in [lo, hi).
  void expect_close(const std::function<absl::StatusOr<UOpRef>(const UOpRef&)>& f,
                    const std::function<double(double)>& want, double lo, double hi, double rtol,
                    const std::string& what) {
    std::vector<double> x;
    UOpRef X = randd({256}, x, lo, hi);
    std::vector<double> got = run<double>(f(X), {256});
    for (size_t i = 0; i < x.size(); ++i) {
      const double w = want(x[i]);
      EXPECT_NEAR(got[i], w, rtol * std::abs(w) + 1e-300) << what << " at " << x[i];
    }
  }
  // The C library's overloaded functions, picked at double.
  void expect_close(const std::function<absl::StatusOr<UOpRef>(const UOpRef&)>& f, double (*want)(double), double lo,
                    double hi, double rtol, const std::string& what) {
    expect_close(f, std::function<double(double)>(want), lo, hi, rtol, what);
  }
};

TEST_F(MathTest, MatchesTheCLibraryOnEveryBranch) {
  // erf: |x| below 0.84375, to 1.25, to 1/0.35, to 6, beyond.
  expect_close(fe::erf, std::erf, -0.84, 0.84, 4e-16, "erf");
  expect_close(fe::erf, std::erf, 0.84, 1.26, 4e-16, "erf");
  expect_close(fe::erf, std::erf, 1.2, 2.9, 4e-16, "erf");
  expect_close(fe::erf, std::erf, -6.5, -2.8, 4e-16, "erf");
  // atan: [0, 0.66], to tan(3 pi / 8), beyond.
  expect_close(fe::atan, std::atan, -0.66, 0.66, 4e-16, "atan");
  expect_close(fe::atan, std::atan, 0.6, 2.5, 4e-16, "atan");
  expect_close(fe::atan, std::atan, -1e6, -2.3, 4e-16, "atan");
  expect_close(fe::asin, std::asin, -1, 1, 8e-16, "asin");
  expect_close(fe::acos, std::acos, -1, 1, 8e-16, "acos");
  // sinh, cosh: through expm1 below 20, exp(|x| / 2)^2 / 2 above.
  expect_close(fe::sinh, std::sinh, -1e-3, 1e-3, 8e-16, "sinh");
  expect_close(fe::sinh, std::sinh, -25, 25, 1e-15, "sinh");
  expect_close(fe::sinh, std::sinh, 600, 709, 1e-15, "sinh");
  expect_close(fe::cosh, std::cosh, -25, 25, 1e-15, "cosh");
  expect_close(fe::asinh, std::asinh, -1e-3, 1e-3, 8e-16, "asinh");
  expect_close(fe::asinh, std::asinh, -1e12, 1e12, 8e-16, "asinh");
  expect_close(fe::acosh, std::acosh, 1, 1.01, 8e-16, "acosh");
  expect_close(fe::acosh, std::acosh, 1, 1e12, 8e-16, "acosh");
  expect_close(fe::atanh, std::atanh, -1, 1, 1e-15, "atanh");
  expect_close(fe::log10, std::log10, 1e-5, 1e5, 4e-16, "log10");
  // log1p, expm1: the corrected formulas below |x| = 0.5, the plain ones above.
  expect_close(fe::log1p, std::log1p, -1e-9, 1e-9, 4e-16, "log1p");
  expect_close(fe::log1p, std::log1p, -0.5, 0.5, 4e-16, "log1p");
  expect_close(fe::log1p, std::log1p, -0.99, 1e6, 4e-16, "log1p");
  expect_close(fe::expm1, std::expm1, -1e-9, 1e-9, 4e-16, "expm1");
  expect_close(fe::expm1, std::expm1, -0.5, 0.5, 4e-16, "expm1");
  expect_close(fe::expm1, std::expm1, -50, 50, 4e-16, "expm1");
  // softplus: below the threshold log1p(exp(beta x)) / beta, above it x (exp(800) overflows).
  for (double beta : {1.0, 0.5, 3.0}) {
    expect_close([beta](const UOpRef& v) { return fe::softplus(v, beta, 20); },
                 [beta](double v) { return beta * v > 20 ? v : std::log1p(std::exp(beta * v)) / beta; }, -300, 300,
                 1e-15, "softplus");
  }
}

TEST_F(MathTest, ClampsAgreeWithStdClampAndPropagateNan) {
  std::vector<double> x, lo, hi;
  UOpRef X = randd({256}, x, -3, 3), L = randd({256}, lo, -2, 0), H = randd({256}, hi, 0, 2);
  std::vector<double> got = run<double>(fe::clamp_max(*fe::clamp_min(X, L), H), {256});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], std::clamp(x[i], lo[i], hi[i])) << x[i];
  UOpRef N = *fe::constant(NAN, DType::Float64, {256});
  for (double v : run<double>(fe::clamp_min(X, N), {256})) EXPECT_TRUE(std::isnan(v));
  for (double v : run<double>(fe::clamp_max(N, H), {256})) EXPECT_TRUE(std::isnan(v));
}

TEST_F(MathTest, ArgumentsAreChecked) {
  std::vector<double> x;
  UOpRef X = randd({2, 3}, x);
  UOpRef I = *fe::constant(int64_t{1}, DType::Int32, {2, 3});
  for (auto f : {fe::erf, fe::atan, fe::sinh, fe::log1p, fe::softsign, fe::selu}) {
    auto r = f(I);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("float"), std::string::npos) << r.status();
  }
  EXPECT_EQ(fe::celu(X, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::softplus(X, 0, 20).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::softplus(X, 1, NAN).status().code(), absl::StatusCode::kInvalidArgument);
  UOpRef B = *fe::constant(int64_t{1}, DType::Bool, {2, 3});
  EXPECT_NE(fe::clamp_min(B, B).status().message().find("bool"), std::string::npos);
  EXPECT_EQ(fe::clamp_max(X, I).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::isclose(X, X, -1, 0, false).status().code(), absl::StatusCode::kInvalidArgument);
  UOpRef Y = randd({3}, x);
  EXPECT_NE(fe::logaddexp(X, Y).status().message().find("differ"), std::string::npos);
  EXPECT_FALSE(fe::lerp(X, X, Y).ok());
  // Integers: always finite; isclose compares them in float64.
  EXPECT_EQ((*fe::isfinite(I))->dtype, DType::Bool);
  EXPECT_EQ((*fe::isclose(I, I, 0, 0, false))->dtype, DType::Bool);
}

}  // namespace
}  // namespace polygrad
