// Kernel outputs are allocated without zero-filling (run_program.cpp: a kernel's one STORE covers
// every output element). These tests poison the host block cache with NaN bits first, so each
// output and intermediate comes back in memory that held them: an element a kernel left unwritten
// (a pad's zeros, a reduce's rows, a matmul tile) would show as a NaN instead of the right value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/frontend/composites.h"
#include "core/runtime/host_allocator.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;
constexpr size_t kBlock = size_t{1} << 20;  // every output below is 1 MiB of float32
constexpr int64_t kFloats = kBlock / 4;

class OutputFillTest : public testing::RealizeFixture {
 protected:
  // Called once the test's leaves exist (their memory is filled by the test).
  void poison() {
    host_cache_trim();
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) {
      blocks.push_back(host_alloc(kBlock));
      std::memset(blocks.back(), 0xff, kBlock);  // all-ones bits: a NaN as float
    }
    for (void* b : blocks) host_free(b, kBlock);
    reuses_before_ = host_allocator_stats().reuses;
  }
  void TearDown() override {
    // The realize took its output blocks from the poisoned ones (or the test proves nothing).
    EXPECT_GT(host_allocator_stats().reuses, reuses_before_);
    host_cache_trim();
  }

  UOpRef randf(Shape shape, std::vector<float>& v) {
    std::uniform_real_distribution<float> d(-1, 1);
    return leaf<float>(DType::Float32, std::move(shape), v, [&] { return d(rng_); });
  }

  uint64_t reuses_before_ = 0;
};

TEST_F(OutputFillTest, APadWritesItsZeros) {
  std::vector<float> xv;
  UOpRef x = randf({512, 480}, xv);
  poison();
  std::vector<float> y = run<float>(fe::pad(x, {{0, 0}, {16, 16}}), {512, 512});
  ASSERT_EQ(y.size(), static_cast<size_t>(kFloats));
  for (int64_t r = 0; r < 512; ++r)
    for (int64_t c = 0; c < 512; ++c) {
      const float want = (c < 16 || c >= 496) ? 0.0f : xv[r * 480 + (c - 16)];
      ASSERT_EQ(y[r * 512 + c], want) << "row " << r << " column " << c;
    }
}

TEST_F(OutputFillTest, AReduceWritesEveryRow) {
  std::vector<float> xv;
  UOpRef x = randf({kFloats, 4}, xv);
  poison();
  std::vector<float> y = run<float>(fe::reduce(Ops::MAX, x, {1}), {kFloats, 1});
  ASSERT_EQ(y.size(), static_cast<size_t>(kFloats));
  for (int64_t r = 0; r < kFloats; ++r) {
    const float want = std::max(std::max(xv[r * 4], xv[r * 4 + 1]), std::max(xv[r * 4 + 2], xv[r * 4 + 3]));
    ASSERT_EQ(y[r], want) << "row " << r;
  }
}

// relu(a @ b) is an intermediate of 1 MiB (the arena's memory), then multiplied by c.
TEST_F(OutputFillTest, MatmulTilesAndIntermediatesAreAllWritten) {
  std::vector<float> av, bv, cv;
  UOpRef a = randf({512, 32}, av), b = randf({32, 512}, bv), c = randf({512, 512}, cv);
  poison();
  auto h = fe::matmul(a, b);
  ASSERT_TRUE(h.ok()) << h.status();
  auto zero = fe::constant(0.0, DType::Float32, {512, 512});
  auto relu = fe::alu(Ops::MAX, {*h, *zero});
  ASSERT_TRUE(relu.ok()) << relu.status();
  std::vector<float> y = run<float>(fe::matmul(*relu, c), {512, 512});
  ASSERT_EQ(y.size(), static_cast<size_t>(kFloats));
  std::vector<double> hv(512 * 512);
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 512; ++j) {
      double s = 0;
      for (int k = 0; k < 32; ++k) s += double(av[i * 32 + k]) * bv[k * 512 + j];
      hv[i * 512 + j] = std::max(s, 0.0);
    }
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 512; ++j) {
      double want = 0;
      for (int k = 0; k < 512; ++k) want += hv[i * 512 + k] * cv[k * 512 + j];
      ASSERT_NEAR(y[i * 512 + j], want, 1e-3 * (1 + std::abs(want))) << "row " << i << " column " << j;
    }
}

}  // namespace
}  // namespace polygrad
