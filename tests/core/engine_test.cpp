// End-to-end through the core: graphs built with the frontend, realized on the CPU device, and
// compared with the same computation done directly in C++ on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <tuple>

#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "core/render/panel.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_dir_ = std::filesystem::temp_directory_path() / ("polygrad-core-test-" + std::to_string(getpid()));
    auto e = Engine::create({.cache_dir = cache_dir_, .threads = 2});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    std::filesystem::remove_all(cache_dir_);
  }

  // A float32 buffer leaf with random values in [lo, hi), bound for realize.
  UOpRef input(Shape shape, std::vector<float>& values, float lo = -1, float hi = 1) {
    auto buf = engine_->allocate(DType::Float32, shape);
    EXPECT_TRUE(buf.ok());
    std::uniform_real_distribution<float> dist(lo, hi);
    values.resize((*buf)->numel());
    for (float& v : values) v = dist(rng_);
    std::memcpy((*buf)->data(), values.data(), values.size() * 4);
    UOpRef leaf = *fe::buffer((*buf)->id(), DType::Float32, shape);
    bound_[leaf.get()] = *buf;
    leaves_.push_back(leaf);  // binding keys are addresses: keep the nodes alive
    return leaf;
  }

  std::vector<float> run(const UOpRef& out, RealizeStats* stats = nullptr) {
    auto r = engine_->realize({out}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    if (stats) *stats = r->stats;
    const float* p = static_cast<const float*>(r->outputs[0]->data());
    return std::vector<float>(p, p + r->outputs[0]->numel());
  }

  static UOpRef ok(absl::StatusOr<UOpRef> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  static inline Engine* engine_ = nullptr;
  static inline std::filesystem::path cache_dir_;
  std::mt19937 rng_{42};
  Bindings bound_;
  std::vector<UOpRef> leaves_;
};

TEST_F(EngineTest, ElementwiseChainIsOneKernel) {
  std::vector<float> a, b;
  UOpRef x = input({7, 5}, a), y = input({7, 5}, b);
  UOpRef z = ok(fe::alu(Ops::MUL, {ok(fe::alu(Ops::ADD, {x, y})), x}));
  z = ok(fe::alu(Ops::MAX, {z, ok(fe::constant(0.0, DType::Float32, {7, 5}))}));
  RealizeStats stats;
  auto out = run(z, &stats);
  EXPECT_EQ(stats.kernels, 1u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(out[i], std::max((a[i] + b[i]) * a[i], 0.0f));
}

// A softmax over rows is one kernel on the CPU (its row reductions run inside it, once per row);
// over rows longer than the fused limit, or with a GPU's scheduling, three.
TEST_F(EngineTest, SoftmaxInOneRealizeIsOneKernelPerRowOnTheCpu) {
  for (auto [R, C, kernels] : {std::tuple<int64_t, int64_t, uint32_t>{33, 17, 1}, {3, 5000, 3}}) {
    std::vector<float> a;
    UOpRef x = input({R, C}, a, -5, 5);
    UOpRef m = ok(fe::expand(ok(fe::reduce(Ops::MAX, x, {1})), {R, C}));
    UOpRef e = ok(fe::alu(Ops::EXP2, {ok(fe::alu(Ops::MUL, {ok(fe::alu(Ops::SUB, {x, m})),
                                                            ok(fe::constant(1.4426950408889634, DType::Float32, {R, C}))}))}));
    UOpRef s = ok(fe::expand(ok(fe::reduce(Ops::ADD, e, {1})), {R, C}));
    UOpRef sm = ok(fe::alu(Ops::FDIV, {e, s}));
    RealizeStats stats;
    auto out = run(sm, &stats);
    EXPECT_EQ(stats.kernels, kernels) << R << " x " << C;
    auto gpu = create_schedule({sm}, [](const UOp* n) { return n->op == Ops::BUFFER; });
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ(gpu->items.size(), 3u) << "without fuse_row_reductions";
    for (int64_t r = 0; r < R; ++r) {
      float mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, a[r * C + c]);
      for (int64_t c = 0; c < C; ++c) sum += std::exp(a[r * C + c] - mx);
      for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(out[r * C + c], std::exp(a[r * C + c] - mx) / sum, 1e-6) << r << ", " << c;
    }
  }
}

// softmax's fused CPU kernel computes exp(x - max) once per element (codegen/store_reuse.h): the
// sum's loop stores it to the output, the output loop divides what it loads. Short rows, rows
// the vector lanes take, rank 3 and one row all agree with a direct computation; softmax over
// the first axis (its reduction is not per row) is computed as before.
TEST_F(EngineTest, FusedSoftmaxComputesEachExponentialOnce) {
  const auto count = [](const LinearKernel& k, Ops op) {
    return std::count_if(k.ops.begin(), k.ops.end(), [&](const UOpRef& n) { return n->op == op; });
  };
  for (const Shape& shape : std::vector<Shape>{{33, 17}, {64, 1024}, {3, 5, 40}, {1, 8}}) {
    std::vector<float> a;
    UOpRef x = input(shape, a, -8, 8);
    UOpRef sm = ok(fe::softmax(x, -1));
    auto ks = kernels_for({sm}, [](const UOp* n) { return n->op == Ops::BUFFER; });
    ASSERT_TRUE(ks.ok()) << ks.status();
    ASSERT_EQ(ks->size(), 1u) << shape.size();
    const LinearKernel& k = ks->front();
    // One row has no row loop for the threads to split, and keeps both exps (the sum's stores
    // would race with another thread's output loop over the same row).
    const int64_t lanes = count(k, Ops::STORE) - (shape[0] == 1 ? 0 : 1);  // the output's stores, one per lane
    EXPECT_EQ(count(k, Ops::EXP2), shape[0] == 1 ? 2 * lanes : lanes) << "exp once per element; rank " << shape.size();
    auto out = run(sm);
    const int64_t C = shape.back(), R = static_cast<int64_t>(a.size()) / C;
    ASSERT_EQ(static_cast<int64_t>(out.size()), R * C);
    for (int64_t r = 0; r < R; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max<double>(mx, a[r * C + c]);
      for (int64_t c = 0; c < C; ++c) sum += std::exp(a[r * C + c] - mx);
      for (int64_t c = 0; c < C; ++c)
        ASSERT_NEAR(out[r * C + c], std::exp(a[r * C + c] - mx) / sum, 2e-7) << shape.size() << ": " << r << ", " << c;
    }
  }
  std::vector<float> a;
  UOpRef x = input({16, 12}, a, -8, 8);
  UOpRef cols = ok(fe::softmax(x, 0));
  auto out = run(cols);
  for (int64_t c = 0; c < 12; ++c) {
    double mx = -INFINITY, sum = 0;
    for (int64_t r = 0; r < 16; ++r) mx = std::max<double>(mx, a[r * 12 + c]);
    for (int64_t r = 0; r < 16; ++r) sum += std::exp(a[r * 12 + c] - mx);
    for (int64_t r = 0; r < 16; ++r) ASSERT_NEAR(out[r * 12 + c], std::exp(a[r * 12 + c] - mx) / sum, 2e-7) << r << ", " << c;
  }
}

// A matmul whose right operand outgrows a core's cache walks its column tiles outermost and
// reads that operand from a panel copied once per column tile (render/panel.h), in the narrow
// tiles kernels_for lays out and in the engine's own (wide on an AVX-512 machine). A small
// operand, or too few row tiles to repay the copy, keeps the operand where it is. All match
// float64 sums.
TEST_F(EngineTest, LargeMatmulReadsItsColumnOperandFromAPanel) {
  struct Case {
    int64_t M, K, N;
    bool panel;
  };
  for (const Case c : {Case{96, 512, 512, true}, Case{192, 1024, 256, true}, Case{96, 64, 64, false},
                       Case{12, 512, 512, false}}) {
    std::vector<float> av, bv;
    UOpRef a = input({c.M, c.K}, av), b = input({c.K, c.N}, bv);
    UOpRef ab = ok(fe::expand(ok(fe::reshape(a, {c.M, 1, c.K})), {c.M, c.N, c.K}));
    UOpRef bb = ok(fe::expand(ok(fe::reshape(ok(fe::permute(b, {1, 0})), {1, c.N, c.K})), {c.M, c.N, c.K}));
    UOpRef y = ok(fe::reshape(ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {ab, bb})), {2})), {c.M, c.N}));
    auto ks = kernels_for({y}, [](const UOp* n) { return n->op == Ops::BUFFER; });
    ASSERT_TRUE(ks.ok()) << ks.status();
    ASSERT_EQ(ks->size(), 1u);
    const auto plan = plan_panel(ks->front());
    EXPECT_EQ(plan.has_value(), c.panel) << c.M << "x" << c.K << "x" << c.N;
    if (plan) {
      EXPECT_EQ(ks->front().outer_size, c.N / plan->cols) << "column tiles outermost";
    }
    auto source = render_c(ks->front());  // the C the CPU builds copies the panel, or reads B in place
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ(source->find("pg_panel[") != std::string::npos, c.panel) << c.M << "x" << c.K << "x" << c.N;
    auto out = run(y);
    ASSERT_EQ(static_cast<int64_t>(out.size()), c.M * c.N);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < c.K; ++k) want += static_cast<double>(av[i * c.K + k]) * bv[k * c.N + j];
        ASSERT_NEAR(out[i * c.N + j], want, 1e-5 * c.K) << c.M << "x" << c.K << "x" << c.N << " at " << i << ", " << j;
      }
  }
}

// Row fusion runs a reduction inside its consumer only where that computes it once per row: a
// reduction over everything, over columns, or read through a permute keeps its own kernel.
TEST_F(EngineTest, RowFusionOnlyTakesReductionsOverTheLastAxisReadAlongIt) {
  UOpRef x = ok(fe::buffer(1, DType::Float32, {64, 32}));
  const auto kernels = [](const UOpRef& y) {
    auto s = create_schedule({y}, [](const UOp* n) { return n->op == Ops::BUFFER; }, {.fuse_row_reductions = true});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->items.size() : 0;
  };
  const auto minus = [&](const UOpRef& r) { return ok(fe::alu(Ops::SUB, {x, ok(fe::expand(r, {64, 32}))})); };
  UOpRef rows = ok(fe::reduce(Ops::ADD, x, {1}));
  EXPECT_EQ(kernels(minus(rows)), 1u);
  UOpRef centered = minus(rows);  // layernorm's shape: a row reduction of a row-fused value
  UOpRef var = ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {centered, centered})), {1}));
  UOpRef normed = ok(fe::alu(Ops::FDIV, {centered, ok(fe::expand(var, {64, 32}))}));
  EXPECT_EQ(kernels(normed), 1u);
  // Once per row: three passes over each row (mean, variance, output; and combining lanes), not
  // a reduction per element. Rank 3 likewise (the reduction sits inside both outer loops).
  UOpRef x3 = ok(fe::buffer(3, DType::Float32, {4, 16, 32}));
  UOpRef m3 = ok(fe::expand(ok(fe::reduce(Ops::MAX, x3, {2})), {4, 16, 32}));
  for (const UOpRef& y : {normed, ok(fe::alu(Ops::SUB, {x3, m3}))}) {
    auto ks = kernels_for({y}, [](const UOp* n) { return n->op == Ops::BUFFER; });
    ASSERT_TRUE(ks.ok()) << ks.status();
    ASSERT_EQ(ks->size(), 1u);
    EXPECT_LT(loop_iterations(ks->front()), 6 * y->numel()) << "a reduction per element would be ~32x";
  }
  EXPECT_EQ(kernels(minus(ok(fe::reduce(Ops::ADD, x, {0, 1})))), 2u) << "a total";
  EXPECT_EQ(kernels(minus(ok(fe::reduce(Ops::ADD, x, {0})))), 2u) << "columns";
  UOpRef t = ok(fe::permute(x, {1, 0}));  // (32, 64): rows of x are its columns
  UOpRef through_permute = ok(fe::permute(ok(fe::expand(rows, {64, 32})), {1, 0}));
  EXPECT_EQ(kernels(ok(fe::alu(Ops::SUB, {t, through_permute}))), 2u) << "read through a permute";
  UOpRef wide = ok(fe::buffer(2, DType::Float32, {4, 8192}));
  EXPECT_EQ(kernels(ok(fe::alu(Ops::SUB, {wide, ok(fe::expand(ok(fe::reduce(Ops::MAX, wide, {1})), {4, 8192}))}))), 2u)
      << "rows longer than the fused limit";
}

TEST_F(EngineTest, MovementChainThenReduce) {
  std::vector<float> a;
  UOpRef x = input({4, 6, 5}, a);
  // permute -> flip -> shrink -> pad, then sum over the middle axis.
  UOpRef p = ok(fe::permute(x, {2, 0, 1}));                 // (5, 4, 6)
  UOpRef f = ok(fe::flip(p, {0, 2}));
  UOpRef s = ok(fe::shrink(f, {{1, 4}, {0, 4}, {2, 6}}));    // (3, 4, 4)
  UOpRef d = ok(fe::pad(s, {{1, 0}, {0, 2}, {1, 1}}));       // (4, 6, 6)
  UOpRef r = ok(fe::reduce(Ops::ADD, d, {1}));               // (4, 1, 6)
  auto out = run(r);
  ASSERT_EQ(out.size(), 24u);
  auto X = [&](int64_t i, int64_t j, int64_t k) { return a[(i * 6 + j) * 5 + k]; };
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t k = 0; k < 6; ++k) {
      float want = 0;
      for (int64_t j = 0; j < 6; ++j) {
        int64_t si = i - 1, sj = j, sk = k - 1;  // undo pad
        if (si < 0 || si >= 3 || sj >= 4 || sk < 0 || sk >= 4) continue;
        int64_t fi = si + 1, fj = sj, fk = sk + 2;  // undo shrink
        int64_t pi = 4 - fi, pj = fj, pk = 5 - fk;  // undo flip of axes 0 (size 5) and 2 (size 6)
        want += X(pj, pk, pi);                      // undo permute (2, 0, 1)
      }
      EXPECT_NEAR(out[i * 6 + k], want, 1e-5) << i << "," << k;
    }
}

TEST_F(EngineTest, MatmulAsBroadcastMultiplySum) {
  std::vector<float> a, b;
  const int64_t M = 9, K = 13, N = 6;
  UOpRef x = input({M, K}, a), y = input({K, N}, b);
  UOpRef xa = ok(fe::expand(ok(fe::reshape(x, {M, 1, K})), {M, N, K}));
  UOpRef yb = ok(fe::expand(ok(fe::reshape(ok(fe::permute(y, {1, 0})), {1, N, K})), {M, N, K}));
  UOpRef mm = ok(fe::reshape(ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {xa, yb})), {2})), {M, N}));
  RealizeStats stats;
  auto out = run(mm, &stats);
  EXPECT_EQ(stats.kernels, 1u);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float want = 0;
      for (int64_t k = 0; k < K; ++k) want += a[i * K + k] * b[k * N + j];
      EXPECT_NEAR(out[i * N + j], want, 1e-5);
    }
}

// Shapes chosen to hit every register-tiling case: both axes tiled, only columns, neither,
// a batch axis in front, and an elementwise epilogue (bias + relu) after the reduction.
class MatmulShapes : public EngineTest, public ::testing::WithParamInterface<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(MatmulShapes, MatchesReferenceWithEpilogue) {
  auto [B, M, K, N] = GetParam();
  std::vector<float> a, b, bias;
  UOpRef x = input({B, M, K}, a), y = input({B, K, N}, b), c = input({N}, bias);
  UOpRef xa = ok(fe::expand(ok(fe::reshape(x, {B, M, 1, K})), {B, M, N, K}));
  UOpRef yb = ok(fe::expand(ok(fe::reshape(ok(fe::permute(y, {0, 2, 1})), {B, 1, N, K})), {B, M, N, K}));
  UOpRef mm = ok(fe::reshape(ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {xa, yb})), {3})), {B, M, N}));
  UOpRef biased = ok(fe::alu(Ops::ADD, {mm, ok(fe::expand(ok(fe::reshape(c, {1, 1, N})), {B, M, N}))}));
  UOpRef out = ok(fe::alu(Ops::MAX, {biased, ok(fe::constant(0.0, DType::Float32, {B, M, N}))}));
  RealizeStats stats;
  auto got = run(out, &stats);
  EXPECT_EQ(stats.kernels, 1u);
  for (int64_t p = 0; p < B; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float want = 0;
        for (int64_t k = 0; k < K; ++k) want += a[(p * M + i) * K + k] * b[(p * K + k) * N + j];
        want = std::max(want + bias[j], 0.0f);
        ASSERT_NEAR(got[(p * M + i) * N + j], want, 1e-4) << p << "," << i << "," << j;
      }
}

INSTANTIATE_TEST_SUITE_P(Tiling, MatmulShapes,
                         ::testing::Values(std::make_tuple(1, 16, 20, 32), std::make_tuple(1, 6, 7, 8),
                                           std::make_tuple(1, 5, 3, 16), std::make_tuple(3, 8, 9, 4),
                                           std::make_tuple(2, 3, 5, 7), std::make_tuple(1, 1, 64, 48)));

TEST_F(EngineTest, LargeFloat32SumIsAccurate) {
  // One sequential float32 accumulator over 2^20 values drifts by ~1e-3 relative; the
  // two-stage reduction must stay close to the float64 sum.
  std::vector<float> a;
  const int64_t n = 1 << 20;
  UOpRef x = input({n}, a, 0, 2);
  RealizeStats stats;
  auto out = run(ok(fe::reduce(Ops::ADD, x, {0})), &stats);
  double want = 0;
  for (float v : a) want += v;
  EXPECT_NEAR(out[0] / want, 1.0, 2e-6);
  EXPECT_EQ(stats.kernels, 2u);
  auto mx = run(ok(fe::reduce(Ops::MAX, x, {0})));
  EXPECT_EQ(mx[0], *std::max_element(a.begin(), a.end()));
}

TEST_F(EngineTest, LargeReductionOverNonAdjacentAxes) {
  std::vector<float> a;
  UOpRef x = input({64, 3, 1024}, a);
  auto out = run(ok(fe::reduce(Ops::ADD, x, {0, 2})));
  ASSERT_EQ(out.size(), 3u);
  for (int64_t j = 0; j < 3; ++j) {
    double want = 0;
    for (int64_t i = 0; i < 64; ++i)
      for (int64_t k = 0; k < 1024; ++k) want += a[(i * 3 + j) * 1024 + k];
    EXPECT_NEAR(out[j], want, 1e-3);
  }
}

TEST_F(EngineTest, VeryLongChainsRealize) {
  // 5000 chained ops: more than one kernel may hold, so the scheduler cuts the chain.
  std::vector<float> a;
  UOpRef x = input({16}, a);
  UOpRef y = x;
  UOpRef one = ok(fe::constant(1.0, DType::Float32, {16}));
  for (int i = 0; i < 5000; ++i) y = ok(fe::alu(i % 2 ? Ops::ADD : Ops::SUB, {y, one}));
  y = ok(fe::alu(Ops::ADD, {y, one}));
  RealizeStats stats;
  auto out = run(y, &stats);
  EXPECT_GT(stats.kernels, 1u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(out[i], a[i] + 1, 1e-4);
}

// x @ W.T (nn.Linear's layout): no output axis is read contiguously, so the reduction itself is
// split into vector lanes, and the output axes into a register tile around them. Shapes cover
// lane counts 16 and 8, a reduction too odd to split, tiles of 4 x 2 and 2 x 4 rows/columns and
// axes too odd to tile.
class MatmulTransposed : public EngineTest, public ::testing::WithParamInterface<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(MatmulTransposed, MatchesReference) {
  auto [M, K, N] = GetParam();
  std::vector<float> a, w;
  UOpRef x = input({M, K}, a), W = input({N, K}, w);
  UOpRef xa = ok(fe::expand(ok(fe::reshape(x, {M, 1, K})), {M, N, K}));
  UOpRef wb = ok(fe::expand(ok(fe::reshape(W, {1, N, K})), {M, N, K}));
  UOpRef mm = ok(fe::reshape(ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {xa, wb})), {2})), {M, N}));
  auto got = run(mm);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += static_cast<double>(a[i * K + k]) * w[j * K + k];
      ASSERT_NEAR(got[i * N + j], want, 1e-4) << i << "," << j;
    }
  // Row maxima of x: the same lanes for MAX.
  auto mx = run(ok(fe::reduce(Ops::MAX, x, {1})));
  for (int64_t i = 0; i < M; ++i) EXPECT_EQ(mx[i], *std::max_element(a.begin() + i * K, a.begin() + (i + 1) * K));
}

INSTANTIATE_TEST_SUITE_P(ReduceLanes, MatmulTransposed,
                         ::testing::Values(std::make_tuple(5, 784, 7), std::make_tuple(3, 40, 6), std::make_tuple(4, 13, 3),
                                           std::make_tuple(1, 256, 10), std::make_tuple(128, 784, 256),
                                           std::make_tuple(6, 24, 4), std::make_tuple(2, 16, 3)));

// dW = dh.T @ x with dh an elementwise chain (a relu backward): the reduction would recompute dh
// once per column tile, so the scheduler gives it a buffer of its own (2 kernels). A single ALU
// op is cheaper to recompute than to store and stays fused (1 kernel). Both must match.
TEST_F(EngineTest, ExpensiveMatmulOperandGetsItsOwnKernel) {
  const int64_t B = 16, O = 8, I = 32;
  std::vector<float> h, g, xv;
  UOpRef pre = input({B, O}, h, -1, 1), grad = input({B, O}, g), x = input({B, I}, xv);
  auto matmul_t = [&](const UOpRef& d) {  // d.T @ x: (O, I), reducing over the batch
    UOpRef da = ok(fe::expand(ok(fe::reshape(ok(fe::permute(d, {1, 0})), {O, 1, B})), {O, I, B}));
    UOpRef xb = ok(fe::expand(ok(fe::reshape(ok(fe::permute(x, {1, 0})), {1, I, B})), {O, I, B}));
    return ok(fe::reshape(ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {da, xb})), {2})), {O, I}));
  };
  UOpRef zero = ok(fe::constant(0.0, DType::Float32, {B, O}));
  UOpRef positive = ok(fe::alu(Ops::CMPLT, {zero, pre}));
  UOpRef t = ok(fe::alu(Ops::MUL, {grad, pre}));
  UOpRef relu_back =  // 5 ALU ops: where(h > 0, (g*h + g) * h, g*h)
      ok(fe::alu(Ops::WHERE, {positive, ok(fe::alu(Ops::MUL, {ok(fe::alu(Ops::ADD, {t, grad})), pre})), t}));
  RealizeStats expensive, cheap;
  auto got = run(matmul_t(relu_back), &expensive);
  auto got_cheap = run(matmul_t(ok(fe::alu(Ops::ADD, {pre, grad}))), &cheap);
  EXPECT_EQ(expensive.kernels, 2u);
  EXPECT_EQ(cheap.kernels, 1u);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      double want = 0, want_cheap = 0;
      for (int64_t b = 0; b < B; ++b) {
        double hv = h[b * O + o], gv = g[b * O + o], tv = gv * hv;
        want += (hv > 0 ? (tv + gv) * hv : tv) * xv[b * I + i];
        want_cheap += (static_cast<double>(h[b * O + o]) + g[b * O + o]) * xv[b * I + i];
      }
      ASSERT_NEAR(got[o * I + i], want, 1e-4) << o << "," << i;
      ASSERT_NEAR(got_cheap[o * I + i], want_cheap, 1e-4) << o << "," << i;
    }
}

// cat(a', b') is pad(a') + pad(b'). Parts of a few ops stay fused into the one kernel; parts of
// more than 32 ALU ops each get a kernel of their own, so a cat of many large expressions does
// not become one kernel holding all of them (which took clang minutes to compile).
TEST_F(EngineTest, LargePaddedPartsOfACatGetTheirOwnKernels) {
  const int64_t N = 8;
  std::vector<float> av, bv;
  UOpRef a = input({N}, av), b = input({N}, bv);
  auto chain = [&](UOpRef x, int ops) {  // x*1.5 + 0.25, repeated: 2 ALU ops per round
    for (int i = 0; i < ops / 2; ++i)
      x = ok(fe::alu(Ops::ADD, {ok(fe::alu(Ops::MUL, {x, ok(fe::constant(1.5, DType::Float32, {N}))})),
                                ok(fe::constant(0.25, DType::Float32, {N}))}));
    return x;
  };
  auto cat = [&](const UOpRef& x, const UOpRef& y) {
    return ok(fe::alu(Ops::ADD, {ok(fe::pad(x, {{0, N}})), ok(fe::pad(y, {{N, 0}}))}));
  };
  auto expect = [&](const std::vector<float>& got, int ops) {
    for (int64_t i = 0; i < 2 * N; ++i) {
      double v = i < N ? av[i] : bv[i - N];
      for (int k = 0; k < ops / 2; ++k) v = v * 1.5 + 0.25;
      ASSERT_NEAR(got[i], v, 1e-3 * std::max(1.0, std::abs(v))) << i;
    }
  };
  RealizeStats small, large;
  auto got_small = run(cat(chain(a, 4), chain(b, 4)), &small);
  auto got_large = run(cat(chain(a, 40), chain(b, 40)), &large);
  EXPECT_EQ(small.kernels, 1u);
  EXPECT_EQ(large.kernels, 3u);
  expect(got_small, 4);
  expect(got_large, 40);
}

TEST_F(EngineTest, SecondRealizeHitsTheKernelCache) {
  std::vector<float> a;
  UOpRef x = input({64}, a);
  UOpRef y = ok(fe::alu(Ops::SQRT, {ok(fe::alu(Ops::MUL, {x, x}))}));
  RealizeStats first, second;
  run(y, &first);
  run(y, &second);
  EXPECT_EQ(second.compiled, 0u);
  EXPECT_EQ(second.cache_hits, 1u);
}

TEST_F(EngineTest, IntegerDivisionByZeroDoesNotTrap) {
  auto buf = engine_->allocate(DType::Int32, {4});
  int32_t vals[4] = {7, -8, std::numeric_limits<int32_t>::min(), 5};
  std::memcpy((*buf)->data(), vals, sizeof vals);
  UOpRef x = *fe::buffer((*buf)->id(), DType::Int32, {4});
  bound_[x.get()] = *buf;
  auto zero = ok(fe::constant(int64_t{0}, DType::Int32, {4}));
  auto minus1 = ok(fe::constant(int64_t{-1}, DType::Int32, {4}));
  auto r1 = engine_->realize({ok(fe::alu(Ops::IDIV, {x, zero})), ok(fe::alu(Ops::IDIV, {x, minus1}))}, bound_);
  ASSERT_TRUE(r1.ok()) << r1.status();
  const int32_t* d0 = static_cast<const int32_t*>(r1->outputs[0]->data());
  const int32_t* d1 = static_cast<const int32_t*>(r1->outputs[1]->data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d0[i], 0);
  EXPECT_EQ(d1[0], -7);
  EXPECT_EQ(d1[2], std::numeric_limits<int32_t>::min());
}

TEST_F(EngineTest, UnboundBufferIsAnError) {
  UOpRef x = *fe::buffer(987654321, DType::Float32, {3});
  auto r = engine_->realize({ok(fe::alu(Ops::NEG, {x}))}, bound_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace polygrad
