// core/frontend/einsum.h: products, traces, "..." and implicit outputs against direct loops on
// random float64 inputs, and the equation checks (a client's string: bounded, never echoed long).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/frontend/einsum.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class EinsumTest : public testing::RealizeFixture {
 protected:
  static absl::Status any_grid(const Shape&) { return absl::OkStatus(); }
  absl::StatusOr<UOpRef> ein(std::vector<UOpRef> xs, std::string_view eq) { return fe::einsum(xs, eq, any_grid); }
};

TEST_F(EinsumTest, ProductsTracesAndImplicitOutputsMatchLoops) {
  std::vector<double> a, b, c;
  UOpRef A = randd({2, 3}, a), B = randd({3, 4}, b), C = randd({3, 3}, c);
  auto mm = run<double>(ein({A, B}, " ij , jk -> ik "), {2, 4});
  auto implicit = run<double>(ein({B, A}, "jk,ij"), {2, 4});  // implicit output: ik, in ASCII order
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double want = 0;
      for (int j = 0; j < 3; ++j) want += a[i * 3 + j] * b[j * 4 + k];
      EXPECT_NEAR(mm[i * 4 + k], want, 1e-12);
      EXPECT_NEAR(implicit[i * 4 + k], want, 1e-12);
    }
  auto trace = run<double>(ein({C}, "ii"), {});
  auto diag = run<double>(ein({C}, "ii->i"), {3});
  EXPECT_NEAR(trace[0], c[0] + c[4] + c[8], 1e-12);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(diag[i], c[i * 4], 1e-15);
  // "..." broadcasts right-aligned; a row of A times each column of C, summed over j.
  auto batched = run<double>(ein({A, C}, "...j,jk->...k"), {2, 3});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      double want = 0;
      for (int j = 0; j < 3; ++j) want += a[i * 3 + j] * c[j * 3 + k];
      EXPECT_NEAR(batched[i * 3 + k], want, 1e-12);
    }
}

TEST_F(EinsumTest, EquationsAreCheckedAndNamed) {
  std::vector<double> a, b;
  UOpRef A = randd({2, 3}, a), B = randd({4, 3}, b);
  auto message = [&](std::vector<UOpRef> xs, std::string_view eq) {
    auto r = ein(std::move(xs), eq);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(message({A}, "ij,jk->ik"), "einsum: the equation has 2 operands, 1 tensors given");
  EXPECT_EQ(message({A}, "ijk->i"), "einsum: operand 0 names 3 axes but has 2");
  EXPECT_EQ(message({A, B}, "ij,jk->ik"), "einsum: label 'j' has sizes 3 and 4");
  EXPECT_EQ(message({A}, "ii->i"), "einsum: label 'i' repeats in operand 0 over axes of sizes 2 and 3");
  EXPECT_EQ(message({A}, "ij->ii"), "einsum: output label 'i' repeats");
  EXPECT_EQ(message({A}, "ij->k"), "einsum: output label 'k' is not in any input");
  EXPECT_EQ(message({A}, "i.j->ij"), "einsum: operand 0: '.' is not a letter or '...'");
  EXPECT_EQ(message({A}, std::string("i\x01") + "->i"), "einsum: operand 0: byte 1 is not a letter or '...'");
  EXPECT_EQ(message({A}, "..i...j->ij"), "einsum: operand 0: '.' is not a letter or '...'");
  EXPECT_EQ(message({A}, std::string(600, 'i')), "einsum: the equation has 600 characters, more than 512");
  EXPECT_EQ(message({}, "->"), "einsum: takes one or more operands");
  auto refused = fe::einsum(std::vector<UOpRef>{A, A}, "ij,kj->ik",
                            [](const Shape& grid) { return absl::ResourceExhaustedError(absl::StrCat(grid.size(), " axes")); });
  EXPECT_EQ(refused.status().message(), "3 axes");
}

}  // namespace
}  // namespace polygrad
