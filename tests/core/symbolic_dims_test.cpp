// Symbolic dims (core/ir/symbolic_dims.h): reductions over a marked axis read only the part below
// the extent, the mark follows the axis through elementwise and movement ops, one set of kernels
// serves every value, and ops that would change a marked axis are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/frontend/composites.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class SymbolicDimsTest : public testing::RealizeFixture {
 protected:
  // A 0-d int32 leaf: the Variable's value, rewritten in place by set().
  UOpRef variable(int32_t value) {
    std::vector<int32_t> v;
    UOpRef x = leaf<int32_t>(DType::Int32, {}, v, [&] { return value; });
    var_ = x;
    return x;
  }
  void set(int32_t value) { std::memcpy(bound_.at(var_.get())->data(), &value, sizeof value); }

  UOpRef var_;
};

// softmax(K q) V over the first n of W cached rows, the attention of one query over a KV cache.
TEST_F(SymbolicDimsTest, AttentionOverThePrefixOfACacheMatchesTheDirectSumAndCompilesOnce) {
  constexpr int64_t W = 16, D = 8;
  std::vector<double> k, v, q;
  UOpRef K = randd({W, D}, k), V = randd({W, D}, v), Q = randd({1, D}, q);
  UOpRef n = variable(1);
  UOpRef Kn = *fe::bound(K, 0, n), Vn = *fe::bound(V, 0, n);
  UOpRef scores = *fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {Kn, *fe::expand(Q, {W, D})}), {1});  // (W, 1)
  EXPECT_EQ(scores->extents.size(), 2u);
  UOpRef p = *fe::softmax(scores, 0);
  UOpRef out = *fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {*fe::expand(p, {W, D}), Vn}), {0});  // (1, D)
  EXPECT_TRUE(out->extents.empty());
  for (int32_t len : {1, 5, 16, 3, 40}) {
    set(len);
    auto r = engine_->realize({out}, bound_);
    ASSERT_TRUE(r.ok()) << r.status();
    // One set of kernels for every length: only the first realize compiles.
    if (len == 1) EXPECT_GT(r->stats.compiled, 0u);
    else EXPECT_EQ(r->stats.compiled, 0u) << "length " << len;
    const auto* got = static_cast<const double*>(r->outputs[0]->data());
    const int64_t rows = std::min<int64_t>(len, W);
    std::vector<double> s(rows);
    double mx = -INFINITY, total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < D; ++d) s[r] += k[r * D + d] * q[d];
      mx = std::max(mx, s[r]);
    }
    for (double& x : s) total += (x = std::exp(x - mx));
    for (int64_t d = 0; d < D; ++d) {
      double want = 0;
      for (int64_t r = 0; r < rows; ++r) want += s[r] / total * v[r * D + d];
      EXPECT_NEAR(got[d], want, 1e-12) << "length " << len << " d " << d;
    }
  }
}

// The loops over a symbolic axis stop at its extent, so the work follows the value, not the
// axis' largest size (the masks keep the result right where a pass dropped the stop).
TEST_F(SymbolicDimsTest, LoopsOverASymbolicAxisStopAtTheExtent) {
  std::vector<double> k, q;
  UOpRef K = *fe::bound(randd({64, 8}, k), 0, variable(5));
  UOpRef scores = *fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {K, *fe::expand(randd({1, 8}, q), {64, 8})}), {1});
  UOpRef total = *fe::reduce(Ops::ADD, scores, {0});
  auto kernels = kernels_for({total}, [&](const UOp* u) { return bound_.contains(u); });
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  int stopping = 0;
  for (const LinearKernel& kernel : *kernels) {
    absl::StatusOr<std::string> src = render_c(kernel, {});
    ASSERT_TRUE(src.ok()) << src.status();
    stopping += src->find("_end = ") != std::string::npos;
  }
  EXPECT_GT(stopping, 0);
  EXPECT_NEAR(run<double>(total, {1, 1})[0], [&] {
    double t = 0;
    for (int r = 0; r < 5; ++r)
      for (int d = 0; d < 8; ++d) t += k[r * 8 + d] * q[d];
    return t;
  }(), 1e-12);
}

TEST_F(SymbolicDimsTest, AMarkedAxisMergedWithTheAxesInsideItKeepsItsPrefix) {
  constexpr int64_t W = 6, D = 4;
  std::vector<double> a;
  UOpRef A = randd({W, D}, a);
  UOpRef n = variable(0);
  UOpRef flat = *fe::reshape(*fe::bound(A, 0, n), {1, W * D});
  ASSERT_EQ(flat->extents.size(), 2u);
  ASSERT_TRUE(flat->extents[1]);
  UOpRef total = *fe::reduce(Ops::ADD, flat, {1});
  UOpRef biggest = *fe::reduce(Ops::MAX, flat, {1});
  for (int32_t len : {0, 2, 6}) {
    set(len);
    double want = 0, want_max = -INFINITY;
    for (int64_t i = 0; i < len * D; ++i) {
      want += a[i];
      want_max = std::max(want_max, a[i]);
    }
    EXPECT_NEAR(run<double>(total, {1, 1})[0], want, 1e-12) << len;
    EXPECT_EQ(run<double>(biggest, {1, 1})[0], want_max) << len;
  }
}

TEST_F(SymbolicDimsTest, OpsThatWouldChangeAMarkedAxisAreRefused) {
  std::vector<double> a;
  UOpRef A = *fe::bound(randd({6, 4}, a), 0, variable(3));
  EXPECT_NE(message(fe::flip(A, {0})).find("symbolic axis 0"), std::string::npos);
  EXPECT_NE(message(fe::pad(A, {{0, 1}, {0, 0}})).find("symbolic axis 0"), std::string::npos);
  EXPECT_NE(message(fe::shrink(A, {{1, 6}, {0, 4}})).find("symbolic axis 0"), std::string::npos);
  EXPECT_NE(message(fe::reshape(A, {3, 2, 4})).find("symbolic axis 0"), std::string::npos);
  EXPECT_NE(message(fe::bound(A, 1, A)).find("0-d int32"), std::string::npos);
  // The message names the axis that would change.
  UOpRef both = *fe::bound(A, 1, variable(2));
  EXPECT_NE(message(fe::flip(both, {1})).find("symbolic axis 1"), std::string::npos);
  // What leaves the axis alone is fine, and the mark stays.
  EXPECT_TRUE((*fe::flip(A, {1}))->extents[0]);
  EXPECT_TRUE((*fe::shrink(A, {{0, 6}, {1, 3}}))->extents[0]);
  EXPECT_TRUE((*fe::permute(A, {1, 0}))->extents[1]);
}

}  // namespace
}  // namespace polygrad
