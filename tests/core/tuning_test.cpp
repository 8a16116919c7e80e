// Tuning (core/engine/tuning.h): every candidate tiling computes the kernel's results; a search
// stores its winner in the kernel cache; a second engine on the same directory uses it without
// searching; --tune=off looks nothing up; a record that does not decode is ignored.
#include "core/engine/tuning.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cache/kernel_cache.h"
#include "core/codegen/upcast.h"
#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/frontend/conv.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad {
namespace {

namespace fs = std::filesystem;

struct TuningCounts : EngineObserver {
  std::atomic<int> hit{0}, miss{0}, search{0};
  void on_tuning(TuningResult r) override {
    (r == TuningResult::Hit ? hit : r == TuningResult::Miss ? miss : search).fetch_add(1);
  }
};

class TuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/polygrad-tuning-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<Engine> engine(TuneMode mode, TuningCounts& counts) {
    auto e = Engine::create({.cache_dir = dir_, .quick_compile = false, .tune = mode, .threads = 2, .observer = &counts});
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *std::move(e) : nullptr;
  }

  // a @ b for a 24x40 and a 40x32 float32 matrix of fixed random values, checked against a
  // float64 product. `transposed`: b is stored as its 32x40 transpose (x @ W.T, whose reduction
  // is the contiguous axis of both operands: lanes along the reduction, not across columns).
  void check_matmul(Engine& e, bool transposed = false) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> av(24 * 40), bv(40 * 32);
    for (float& x : av) x = d(rng);
    for (float& x : bv) x = d(rng);
    BufferPtr a = *e.allocate(DType::Float32, {24, 40});
    BufferPtr b = *e.allocate(DType::Float32, transposed ? Shape{32, 40} : Shape{40, 32});
    std::memcpy(a->data(), av.data(), av.size() * sizeof(float));
    float* bd = static_cast<float*>(b->data());
    for (int k = 0; k < 40; ++k)
      for (int j = 0; j < 32; ++j) (transposed ? bd[j * 40 + k] : bd[k * 32 + j]) = bv[k * 32 + j];
    UOpRef x = *frontend::buffer(a->id(), DType::Float32, {24, 40});
    UOpRef w = *frontend::buffer(b->id(), DType::Float32, transposed ? Shape{32, 40} : Shape{40, 32});
    auto y = frontend::matmul(x, transposed ? *frontend::permute(w, {1, 0}) : w);
    ASSERT_TRUE(y.ok()) << y.status();
    root_ = *y;
    materialized_ = {x.get(), w.get()};
    auto r = e.realize({*y}, {{x.get(), a}, {w.get(), b}});
    ASSERT_TRUE(r.ok()) << r.status();
    const float* got = static_cast<const float*>(r->outputs[0]->data());
    for (int i = 0; i < 24; ++i)
      for (int j = 0; j < 32; ++j) {
        double want = 0;
        for (int k = 0; k < 40; ++k) want += double(av[i * 40 + k]) * bv[k * 32 + j];
        ASSERT_NEAR(got[i * 32 + j], want, 1e-4) << "at " << i << "," << j;
      }
  }

  // The candidate tilings of the last checked matmul's kernel.
  std::vector<UpcastChoice> candidates() {
    auto k = lower_to_linear(root_, [&](const UOp* n) { return std::count(materialized_.begin(), materialized_.end(), n) > 0; });
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? upcast_candidates(k->simplified) : std::vector<UpcastChoice>{};
  }

  // The keys of the cache entries that are tuning records.
  std::vector<std::string> record_keys() {
    KernelCache cache(dir_);
    std::vector<std::string> keys;
    for (const auto& f : fs::recursive_directory_iterator(dir_)) {
      std::string key = f.path().stem().string();
      if (f.is_regular_file() && KernelCache::valid_key(key) &&
          cache.find_record(key, [](const std::string& p) { return UpcastChoice::decode(p).has_value(); }))
        keys.push_back(key);
    }
    return keys;
  }

  fs::path dir_;
  UOpRef root_;
  std::vector<const UOp*> materialized_;
};

TEST(UpcastChoice, DecodesWhatItEncodesAndNothingElse) {
  for (UpcastChoice c : {UpcastChoice{}, UpcastChoice{16, 6, 0, 0}, UpcastChoice{64, 8, 0, 0}, UpcastChoice{4, 1, 16, 4}}) {
    auto back = UpcastChoice::decode(c.encode());
    ASSERT_TRUE(back.has_value()) << c.encode();
    EXPECT_EQ(*back, c);
  }
  for (const char* bad : {"", "cols=16", "cols=16 rows=6 lanes=0 tile=0 ", "cols=128 rows=1 lanes=0 tile=0", "cols=64 rows=16 lanes=0 tile=0",
                          "cols=-4 rows=1 lanes=0 tile=0", "rows=1 cols=16 lanes=0 tile=0", "cols=16 rows=17 lanes=0 tile=0",
                          "cols=x rows=1 lanes=0 tile=0"})
    EXPECT_FALSE(UpcastChoice::decode(bad).has_value()) << bad;
}

TEST_F(TuningTest, ASearchStoresItsWinnerAndASecondEngineUsesItWithoutSearching) {
  TuningCounts first;
  {
    auto e = engine(TuneMode::Search, first);
    ASSERT_NE(e, nullptr);
    check_matmul(*e);
    check_matmul(*e);  // the schedule cache: no second lookup
  }
  EXPECT_EQ(first.search.load(), 1);
  EXPECT_EQ(first.hit.load() + first.miss.load(), 0);
  ASSERT_EQ(record_keys().size(), 1u);

  TuningCounts second;
  auto e = engine(TuneMode::Cached, second);
  ASSERT_NE(e, nullptr);
  check_matmul(*e);
  EXPECT_EQ(second.search.load(), 0);
  EXPECT_EQ(second.hit.load(), 1);
  EXPECT_EQ(second.miss.load(), 0);
}

TEST_F(TuningTest, CachedModeWithNoRecordRunsTheHeuristicAndOffLooksNothingUp) {
  TuningCounts cached, off;
  check_matmul(*engine(TuneMode::Cached, cached));
  EXPECT_EQ(cached.miss.load(), 1);
  EXPECT_EQ(cached.hit.load() + cached.search.load(), 0);
  check_matmul(*engine(TuneMode::Off, off));
  EXPECT_EQ(off.hit.load() + off.miss.load() + off.search.load(), 0);
  EXPECT_TRUE(record_keys().empty());
}

// Each candidate a search may store, forced through a record: every one computes the product,
// for a matmul (tiles of columns and rows) and for x @ W.T (lanes along the reduction).
TEST_F(TuningTest, EveryCandidateTilingComputesTheMatmul) {
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "x @ W.T" : "x @ W");
    std::error_code ec;
    fs::remove_all(dir_ / "v1", ec);
    TuningCounts searched;
    check_matmul(*engine(TuneMode::Search, searched), transposed);
    const std::vector<std::string> keys = record_keys();
    ASSERT_EQ(keys.size(), 1u);
    const std::vector<UpcastChoice> choices = candidates();
    ASSERT_GE(choices.size(), 4u) << "a matmul has several tilings";
    for (const UpcastChoice& c : choices) {
      KernelCache(dir_).store_record(keys[0], c.encode());
      const auto any = [](const std::string&) { return true; };
      ASSERT_EQ(KernelCache(dir_).find_record(keys[0], any), c.encode()) << "the record on disk is the forced one";
      TuningCounts counts;
      auto e = engine(TuneMode::Cached, counts);
      ASSERT_NE(e, nullptr);
      SCOPED_TRACE(c.encode());
      check_matmul(*e, transposed);
      EXPECT_EQ(counts.hit.load(), 1);
    }
  }
}

TEST_F(TuningTest, ARecordThatDoesNotDecodeIsIgnored) {
  TuningCounts searched;
  check_matmul(*engine(TuneMode::Search, searched));
  const std::vector<std::string> keys = record_keys();
  ASSERT_EQ(keys.size(), 1u);
  KernelCache(dir_).store_record(keys[0], "cols=4096 rows=4096 lanes=0 tile=0");
  TuningCounts counts;
  check_matmul(*engine(TuneMode::Cached, counts));
  EXPECT_EQ(counts.miss.load(), 1);
  EXPECT_EQ(counts.hit.load(), 0);
}

TEST(UpcastCandidates, AnElementwiseKernelHasNone) {
  UOpRef x = *frontend::buffer(1, DType::Float32, {64});
  UOpRef y = uop(Ops::ADD, DType::Float32, {x, x}, {}, {64});
  auto k = lower_to_linear(y, [&](const UOp* n) { return n == x.get(); });
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(upcast_candidates(k->simplified).empty());
}

// Tile sizes of the one kernel of `y` over the buffers `inputs`, sorted.
std::vector<int64_t> tile_of(const UOpRef& y, const std::vector<UOpRef>& inputs, const TileLimits& limits) {
  auto k = lower_to_linear(y, [&](const UOp* n) {
    return std::any_of(inputs.begin(), inputs.end(), [&](const UOpRef& b) { return b.get() == n; });
  });
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return {};
  Upcast u = apply_upcasts(k->simplified, {}, limits);
  std::vector<int64_t> sizes;
  for (int64_t id : u.upcast_ranges)
    for (const UOp* n : toposort({u.sink}))
      if (n->op == Ops::RANGE && n->arg_int() == id) sizes.push_back(n->src[0]->arg_int());
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

// The heuristic's matmul tile grows with the target's registers: 16 columns x 6 rows by default
// (AVX2), 64 x 6 within kWideTiles (AVX-512: 24 of 32 registers), the sizes of the ranges it
// places innermost; 4 rows where 6 does not divide them, never the 8 that would spill.
TEST(UpcastTiles, WideRegistersGetTheLargerMatmulTile) {
  UOpRef a = *frontend::buffer(1, DType::Float32, {24, 40});
  UOpRef b = *frontend::buffer(2, DType::Float32, {40, 64});
  UOpRef y = *frontend::matmul(a, b);
  EXPECT_EQ(tile_of(y, {a, b}, TileLimits{}), (std::vector<int64_t>{6, 16}));
  EXPECT_EQ(tile_of(y, {a, b}, kWideTiles), (std::vector<int64_t>{6, 64}));
  UOpRef a32 = *frontend::buffer(1, DType::Float32, {32, 40});
  UOpRef y32 = *frontend::matmul(a32, b);
  EXPECT_EQ(tile_of(y32, {a32, b}, kWideTiles), (std::vector<int64_t>{4, 64}));
}

// x @ W.T reads both operands along the reduction: partial sums in 8 lanes under a tile of rows
// of x by rows of W, 4 x 2 within AVX2's 16 registers, 4 x 4 within AVX-512's 32.
TEST(UpcastTiles, WideRegistersGetTheLargerLanesTile) {
  UOpRef x = *frontend::buffer(1, DType::Float32, {32, 64});
  UOpRef w = *frontend::buffer(2, DType::Float32, {16, 64});
  UOpRef y = *frontend::matmul(x, *frontend::permute(w, {1, 0}));
  EXPECT_EQ(tile_of(y, {x, w}, TileLimits{}), (std::vector<int64_t>{2, 4, 8}));
  EXPECT_EQ(tile_of(y, {x, w}, kWideTiles), (std::vector<int64_t>{4, 4, 8}));
}

// A conv's 56 output columns are taken whole on AVX-512 (3.5 vectors) with 4 output channels,
// half the accumulators of a power-of-two tile; AVX2's 16-column limit keeps 8 columns.
TEST(UpcastTiles, AWholeNonPowerOfTwoAxisIsOneTile) {
  UOpRef x = *frontend::buffer(1, DType::Float32, {2, 16, 58, 58});
  UOpRef w = *frontend::buffer(2, DType::Float32, {32, 16, 3, 3});
  UOpRef y = *frontend::conv(x, w, frontend::ConvParams{{1, 1}, {0, 0}, {1, 1}, 1});
  EXPECT_EQ(tile_of(y, {x, w}, kWideTiles), (std::vector<int64_t>{4, 56}));
  EXPECT_EQ(tile_of(y, {x, w}, TileLimits{}), (std::vector<int64_t>{4, 8}));
  // An axis of 10 is no multiple of 4, so no column tile: lanes along the reduction, as with
  // the narrow limits.
  UOpRef a = *frontend::buffer(1, DType::Float32, {24, 40});
  UOpRef b = *frontend::buffer(2, DType::Float32, {40, 10});
  UOpRef ab = *frontend::matmul(a, b);
  EXPECT_EQ(tile_of(ab, {a, b}, kWideTiles), tile_of(ab, {a, b}, TileLimits{}));
  EXPECT_EQ(tile_of(ab, {a, b}, kWideTiles), (std::vector<int64_t>{2, 4, 8}));
}

}  // namespace
}  // namespace polygrad
