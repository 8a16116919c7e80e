// Where a CPU kernel's multiply-adds are fused (cpu_render_options): only in tiled reductions of
// at least kFusedMultiplyAddMinIterations, which the quick tier then never builds. These tests pin
// the rule on kernels and its exact effect on results: a large matmul computes each output as the
// chain fma(a[k], b[k], acc) in k order from its first run on, a small one as separate multiply
// and add, bit for bit (reference computed here in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/engine/cpu_backend.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/cpu/quick_compiler.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

// The one kernel `y` becomes, its leaves bound.
LinearKernel only_kernel(const UOpRef& y) {
  auto ks = kernels_for({y}, [](const UOp* n) { return n->op == Ops::BUFFER; });
  EXPECT_TRUE(ks.ok()) << ks.status();
  EXPECT_EQ(ks.ok() ? ks->size() : 0, 1u);
  return ks.ok() && ks->size() == 1 ? ks->front() : LinearKernel{};
}

TEST(FusedMultiplyAddRule, OnlyLargeTiledReductionsFuse) {
  UOpRef a = *fe::buffer(1, DType::Float32, {256, 512}), b = *fe::buffer(2, DType::Float32, {512, 512});
  LinearKernel large = only_kernel(*fe::matmul(a, b));
  ASSERT_GT(loop_iterations(large), kQuickTierMaxIterations);
  EXPECT_TRUE(cpu_render_options(large).fused_multiply_add);
  const std::string source = *render_c(large, cpu_render_options(large));
  EXPECT_TRUE(absl::StrContains(source, "#pragma clang fp contract(fast)"));

  // Small enough for the quick tier, large enough to fuse: the fusion wins (no quick build).
  UOpRef e = *fe::buffer(8, DType::Float32, {128, 256}), f = *fe::buffer(9, DType::Float32, {256, 256});
  LinearKernel middle = only_kernel(*fe::matmul(e, f));
  ASSERT_GE(loop_iterations(middle), kFusedMultiplyAddMinIterations);
  ASSERT_LE(loop_iterations(middle), kQuickTierMaxIterations);
  EXPECT_TRUE(cpu_render_options(middle).fused_multiply_add);

  UOpRef c = *fe::buffer(3, DType::Float32, {64, 128}), d = *fe::buffer(4, DType::Float32, {128, 64});
  LinearKernel small = only_kernel(*fe::matmul(c, d));
  // Its 64 x 128 x 64 multiply-adds and a little more (tile init, stores), not the product of
  // every loop's trips: the tile's store loops follow the reduction.
  EXPECT_GE(loop_iterations(small), 64 * 128 * 64);
  EXPECT_LT(loop_iterations(small), 2 * 64 * 128 * 64);
  EXPECT_FALSE(cpu_render_options(small).fused_multiply_add) << "the quick tier may build it";
  EXPECT_FALSE(absl::StrContains(*render_c(small), "fp contract"));

  // As large, but no reduction: an elementwise a * b + c keeps two roundings at every size.
  UOpRef x = *fe::buffer(5, DType::Float32, {1 << 26}), y = *fe::buffer(6, DType::Float32, {1 << 26});
  UOpRef z = *fe::buffer(7, DType::Float32, {1 << 26});
  LinearKernel elementwise = only_kernel(*fe::alu(Ops::ADD, {*fe::alu(Ops::MUL, {x, y}), z}));
  ASSERT_GT(loop_iterations(elementwise), kQuickTierMaxIterations);
  EXPECT_FALSE(cpu_render_options(elementwise).fused_multiply_add);
}

// Whether the optimized build honours the fusion: clang on a CPU with FMA instructions.
bool host_fuses() {
  auto cc = CpuCompiler::find("", std::chrono::seconds(120));
  if (!cc.ok() || !absl::StrContains(cc->identity(), "clang")) return false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) return absl::StrContains(line + " ", " fma ");
  return false;
}

class FusedMultiplyAddTest : public testing::RealizeFixture {
 protected:
  // a (m x k) @ b (k x n) as this test's reference: every output's sum in k order, each step
  // fused (one rounding) or a rounded product added (two).
  static std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t k,
                                      int64_t n, bool fused) {
    std::vector<float> out(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) {
          const float x = a[i * k + t], y = b[t * n + j];
          if (fused) {
            acc = std::fma(x, y, acc);
          } else {
            volatile float product = x * y;  // rounded on its own, whatever this file's flags
            acc = acc + product;
          }
        }
        out[i * n + j] = acc;
      }
    return out;
  }

  void check(int64_t m, int64_t k, int64_t n, bool fused) {
    std::vector<float> av, bv;
    std::uniform_real_distribution<float> d(-1, 1);
    UOpRef a = leaf<float>(DType::Float32, {m, k}, av, [&] { return d(rng_); });
    UOpRef b = leaf<float>(DType::Float32, {k, n}, bv, [&] { return d(rng_); });
    std::vector<float> got = run<float>(fe::matmul(a, b), {m, n});
    std::vector<float> want = reference(av, bv, m, k, n, fused);
    ASSERT_EQ(got.size(), want.size());
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0) << "of " << got.size() << " outputs; first: " << got[0] << " vs " << want[0];
    // And the other rounding would have been visible: the inputs tell the two apart.
    std::vector<float> other = reference(av, bv, m, k, n, !fused);
    int64_t distinct = 0;
    for (size_t i = 0; i < got.size(); ++i) distinct += other[i] != want[i];
    EXPECT_GT(distinct, 0);
  }
};

TEST_F(FusedMultiplyAddTest, ALargeMatmulFusesEveryStepAndASmallOneNone) {
  const bool fuses = host_fuses();
  check(256, 512, 512, fuses);  // 2^26 iterations: beyond the quick tier
  check(128, 256, 256, fuses);  // 2^23: the quick tier's size, no quick build: fused from the first run
  check(64, 128, 64, false);
}

}  // namespace
}  // namespace polygrad
