// core/frontend/factorizations.h: QR and SVD factors of random float64 matrices reconstruct them,
// Q is orthonormal, singular values descend; and the argument checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/frontend/factorizations.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class FactorizationsTest : public testing::RealizeFixture {};

TEST_F(FactorizationsTest, QrReconstructsWithOrthonormalQ) {
  std::vector<double> a;
  UOpRef A = randd({4, 3}, a);
  auto q = run<double>(fe::qr(A, "q"), {4, 3});
  auto r = run<double>(fe::qr(A, "r"), {3, 3});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      double qr_ij = 0;
      for (int k = 0; k < 3; ++k) qr_ij += q[i * 3 + k] * r[k * 3 + j];
      EXPECT_NEAR(qr_ij, a[i * 3 + j], 1e-12) << i << j;
    }
  for (int c = 0; c < 3; ++c)
    for (int d = 0; d < 3; ++d) {
      double dot = 0;
      for (int i = 0; i < 4; ++i) dot += q[i * 3 + c] * q[i * 3 + d];
      EXPECT_NEAR(dot, c == d ? 1.0 : 0.0, 1e-12);
    }
  for (int i = 1; i < 3; ++i)
    for (int j = 0; j < i; ++j) EXPECT_EQ(r[i * 3 + j], 0.0);  // upper triangular
}

TEST_F(FactorizationsTest, SvdOfAWideMatrixReconstructsWithDescendingValues) {
  std::vector<double> a;
  UOpRef A = randd({2, 3}, a);
  auto u = run<double>(fe::svd(A, 8, "u"), {2, 2});
  auto s = run<double>(fe::svd(A, 8, "s"), {2});
  auto vh = run<double>(fe::svd(A, 8, "vh"), {2, 3});
  EXPECT_GE(s[0], s[1]);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double x = 0;
      for (int k = 0; k < 2; ++k) x += u[i * 2 + k] * s[k] * vh[k * 3 + j];
      EXPECT_NEAR(x, a[i * 3 + j], 1e-10) << i << j;
    }
}

TEST_F(FactorizationsTest, ArgumentsAreChecked) {
  std::vector<double> a, v;
  UOpRef A = randd({3, 3}, a), V = randd({3}, v);
  auto message = [](const absl::StatusOr<UOpRef>& r) { return r.ok() ? std::string("ok") : std::string(r.status().message()); };
  EXPECT_EQ(message(fe::qr(A, "x")), "qr: the factor (composite.mode) is 'q' or 'r'");
  EXPECT_EQ(message(fe::qr(V, "q")), "qr: needs a matrix (or a batch of them), got rank 1");
  EXPECT_EQ(message(fe::svd(A, 0, "s")), "svd: sweeps (composite.n) must be 1 to 64, got 0");
  EXPECT_EQ(message(fe::svd(A, 2, "v")), "svd: the factor (composite.mode) is 'u', 's' or 'vh'");
  std::vector<double> big;
  UOpRef B = randd({2, 40}, big);  // rotated as its 40x2 transpose: 2 columns, 64 rotations
  EXPECT_EQ(message(fe::svd(B, 64, "s")), "ok");
  std::vector<double> wide;
  UOpRef W = randd({40, 40}, wide);
  EXPECT_EQ(message(fe::svd(W, 12, "s")),
            "svd: 12 sweeps over 40 columns are 9360 rotations, more than 8192 (svd is built for small matrices)");
}

}  // namespace
}  // namespace polygrad
