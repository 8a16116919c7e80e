// The schedule cache (core/schedule/schedule_cache.h): a realize whose structure was seen before
// reuses the compiled program with its own buffers. Results are compared with an engine whose
// cache is off (the uncached pipeline), bit for bit, since both run the same kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "core/engine/engine.h"
#include "core/engine/placement.h"
#include "core/schedule/realize_key.h"
#include "core/schedule/realize_program.h"
#include "core/schedule/schedule_cache.h"
#include "core/frontend/composites.h"
#include "core/frontend/random.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class LookupCounter final : public EngineObserver {
 public:
  void on_schedule_cache_lookup(bool hit) override { (hit ? hits : misses).fetch_add(1); }
  std::atomic<int> hits{0}, misses{0};
};

UOpRef ok(absl::StatusOr<UOpRef> r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

class ScheduleCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cached_ = std::move(*Engine::create({.threads = 2, .observer = &lookups_})).release();
    uncached_ = std::move(*Engine::create({.threads = 2, .schedule_cache_entries = 0})).release();
  }
  static void TearDownTestSuite() {
    delete cached_;
    delete uncached_;
  }

  // A new leaf over a new buffer of random values; bound in `bound_` (and kept alive).
  UOpRef leaf(Shape shape, DType dt = DType::Float32) {
    BufferPtr buf = *cached_->allocate(dt, shape);
    std::uniform_real_distribution<double> d(-1, 1);
    for (int64_t i = 0; i < buf->numel(); ++i) {
      if (dt == DType::Float32) static_cast<float*>(buf->data())[i] = static_cast<float>(d(rng_));
      else static_cast<double*>(buf->data())[i] = d(rng_);
    }
    return bind(buf, dt, shape);
  }
  // A leaf node of its own standing for `buf` (two such nodes alias one buffer).
  UOpRef bind(const BufferPtr& buf, DType dt, Shape shape) {
    UOpRef x = ok(fe::buffer(next_leaf_id_++, dt, std::move(shape)));
    bound_[x.get()] = buf;
    keep_.push_back(x);
    return x;
  }

  static RealizeResult realize(Engine* e, const std::vector<UOpRef>& outs, const Bindings& bound,
                               const RealizeOptions& options = {}) {
    absl::StatusOr<RealizeResult> r = e->realize(outs, bound, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : RealizeResult{};
  }
  static std::vector<float> floats(const BufferPtr& b) {
    const auto* p = static_cast<const float*>(b->data());
    return {p, p + b->numel()};
  }
  static bool same_bytes(const BufferPtr& a, const BufferPtr& b) {
    return a->nbytes() == b->nbytes() && std::memcmp(a->data(), b->data(), a->nbytes()) == 0;
  }

  // A random graph over `leaves` ([4, 8] float32): the same `seed` gives the same structure.
  static std::vector<UOpRef> random_graph(uint32_t seed, const std::vector<UOpRef>& leaves) {
    std::mt19937 g(seed);
    std::vector<UOpRef> pool = leaves;
    auto pick = [&] { return pool[g() % pool.size()]; };
    for (int step = 0; step < 8; ++step) {
      UOpRef a = pick(), b = pick(), n;
      switch (g() % 7) {
        case 0: n = ok(fe::alu(Ops::ADD, {a, b})); break;
        case 1: n = ok(fe::alu(Ops::MUL, {a, b})); break;
        case 2: n = ok(fe::alu(Ops::MAX, {a, ok(fe::alu(Ops::NEG, {b}))})); break;
        case 3: n = ok(fe::alu(Ops::MUL, {a, ok(fe::constant(0.5 + g() % 4, DType::Float32, {4, 8}))})); break;
        case 4:  // a reduction broadcast back: a kernel boundary
          n = ok(fe::expand(ok(fe::reduce(Ops::ADD, a, {1})), {4, 8}));
          n = ok(fe::alu(Ops::SUB, {b, n}));
          break;
        case 5: n = ok(fe::reshape(ok(fe::permute(ok(fe::reshape(a, {8, 4})), {1, 0})), {4, 8})); break;
        default: n = ok(fe::alu(Ops::SQRT, {ok(fe::alu(Ops::MUL, {a, a}))})); break;
      }
      pool.push_back(n);
    }
    std::vector<UOpRef> outs{pool.back()};
    if (g() % 2) outs.push_back(ok(fe::reduce(Ops::MAX, pool[pool.size() - 2], {0})));
    return outs;
  }

  static inline LookupCounter lookups_;
  static inline Engine* cached_ = nullptr;
  static inline Engine* uncached_ = nullptr;
  Bindings bound_;
  std::vector<UOpRef> keep_;
  std::mt19937 rng_{7};
  uint64_t next_leaf_id_ = 1u << 30;  // clear of real buffer ids
};

TEST_F(ScheduleCacheTest, SameStructureOverNewBuffersHitsAndMatchesTheUncachedEngine) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::vector<UOpRef> first_leaves{leaf({4, 8}), leaf({4, 8}), leaf({4, 8})};
    RealizeResult first = realize(cached_, random_graph(seed, first_leaves), bound_);
    EXPECT_FALSE(first.stats.schedule_cache_hit) << "seed " << seed;
    std::vector<UOpRef> leaves{leaf({4, 8}), leaf({4, 8}), leaf({4, 8})};
    std::vector<UOpRef> outs = random_graph(seed, leaves);
    RealizeResult again = realize(cached_, outs, bound_);
    EXPECT_TRUE(again.stats.schedule_cache_hit) << "seed " << seed;
    EXPECT_EQ(again.stats.compiled, 0u);
    EXPECT_EQ(again.stats.kernels, first.stats.kernels);
    EXPECT_EQ(again.stats.cache_hits, again.stats.kernels);
    RealizeResult want = realize(uncached_, outs, bound_);
    EXPECT_FALSE(want.stats.schedule_cache_hit);
    ASSERT_EQ(again.outputs.size(), want.outputs.size());
    for (size_t i = 0; i < want.outputs.size(); ++i)
      EXPECT_TRUE(same_bytes(again.outputs[i], want.outputs[i])) << "seed " << seed << " output " << i;
  }
}

TEST_F(ScheduleCacheTest, AnyStructuralDifferenceMisses) {
  auto graph = [&](double c, Shape shape, DType dt, Ops op) {
    UOpRef x = leaf(shape, dt), w = leaf(shape, dt);
    UOpRef y = ok(fe::alu(op, {ok(fe::alu(Ops::MUL, {x, ok(fe::constant(c, dt, shape))})), w}));
    return std::vector<UOpRef>{ok(fe::reduce(Ops::ADD, y, {1})), y};
  };
  auto hit = [&](const std::vector<UOpRef>& outs) { return realize(cached_, outs, bound_).stats.schedule_cache_hit; };
  auto base = [&] { return graph(2.0, {3, 5}, DType::Float32, Ops::ADD); };
  ASSERT_FALSE(hit(base()));
  EXPECT_TRUE(hit(base())) << "same structure, new buffers";
  EXPECT_FALSE(hit(graph(3.0, {3, 5}, DType::Float32, Ops::ADD))) << "constant";
  EXPECT_FALSE(hit(graph(2.0, {3, 6}, DType::Float32, Ops::ADD))) << "shape";
  EXPECT_FALSE(hit(graph(2.0, {3, 5}, DType::Float64, Ops::ADD))) << "dtype";
  EXPECT_FALSE(hit(graph(2.0, {3, 5}, DType::Float32, Ops::SUB))) << "op";
  std::vector<UOpRef> outs = base();
  EXPECT_FALSE(hit({outs[0]})) << "fewer outputs";
  EXPECT_FALSE(hit({outs[1], outs[0]})) << "outputs in another order";
  EXPECT_FALSE(hit({outs[0], outs[1], outs[1]})) << "an output twice";
  EXPECT_TRUE(hit(base()));
}

TEST_F(ScheduleCacheTest, AliasedLeavesAreAnotherStructure) {
  auto f = [](const UOpRef& a, const UOpRef& b) { return ok(fe::alu(Ops::SUB, {a, ok(fe::alu(Ops::MUL, {b, b}))})); };
  BufferPtr shared = *cached_->allocate(DType::Float32, {16});
  for (int i = 0; i < 16; ++i) static_cast<float*>(shared->data())[i] = 0.25f * static_cast<float>(i);
  auto expect_values = [&](const RealizeResult& r) {
    ASSERT_EQ(r.outputs.size(), 1u);
    for (int i = 0; i < 16; ++i) {
      const float v = 0.25f * static_cast<float>(i);
      EXPECT_FLOAT_EQ(floats(r.outputs[0])[i], v - v * v) << i;
    }
  };
  // Distinct buffers first, then two leaves of one buffer: the key differs, and so does the
  // result a program could compute if it wrote in place.
  ASSERT_FALSE(realize(cached_, {f(leaf({16}), leaf({16}))}, bound_).stats.schedule_cache_hit);
  RealizeResult aliased = realize(cached_, {f(bind(shared, DType::Float32, {16}), bind(shared, DType::Float32, {16}))}, bound_);
  EXPECT_FALSE(aliased.stats.schedule_cache_hit);
  expect_values(aliased);
  RealizeResult again = realize(cached_, {f(bind(shared, DType::Float32, {16}), bind(shared, DType::Float32, {16}))}, bound_);
  EXPECT_TRUE(again.stats.schedule_cache_hit);
  expect_values(again);
  // One leaf node used twice is a third structure.
  UOpRef one = bind(shared, DType::Float32, {16});
  RealizeResult same_node = realize(cached_, {f(one, one)}, bound_);
  EXPECT_FALSE(same_node.stats.schedule_cache_hit);
  expect_values(same_node);
  // And distinct buffers after the aliased form still get the distinct-buffer program.
  EXPECT_TRUE(realize(cached_, {f(leaf({16}), leaf({16}))}, bound_).stats.schedule_cache_hit);
}

TEST_F(ScheduleCacheTest, ConcurrentRunsOfOneProgramAreIndependent) {
  constexpr int kThreads = 6, kRuns = 15;
  auto graph = [](const UOpRef& x, const UOpRef& w) {
    UOpRef h = ok(fe::matmul(x, w));
    return ok(fe::alu(Ops::ADD, {h, ok(fe::expand(ok(fe::reduce(Ops::MAX, h, {1})), {16, 24}))}));
  };
  ASSERT_FALSE(realize(cached_, {graph(leaf({16, 32}), leaf({32, 24}))}, bound_).stats.schedule_cache_hit);
  // Each thread: its own buffers, checked against the uncached engine on the same buffers.
  std::vector<Bindings> binds(kThreads);
  std::vector<std::vector<UOpRef>> outs(kThreads);
  std::vector<std::vector<BufferPtr>> want(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRuns; ++r) {
      Bindings mine;
      UOpRef x = leaf({16, 32}), w = leaf({32, 24});
      mine[x.get()] = bound_.at(x.get());
      mine[w.get()] = bound_.at(w.get());
      outs[t].push_back(graph(x, w));
      want[t].push_back(realize(uncached_, {outs[t].back()}, mine).outputs.at(0));
      binds[t].merge(mine);
    }
  std::atomic<int> hits{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<RealizeResult> got = cached_->realize({outs[t][r]}, binds[t]);
        if (!got.ok() || !same_bytes(got->outputs.at(0), want[t][r])) wrong.fetch_add(1);
        if (got.ok() && got->stats.schedule_cache_hit) hits.fetch_add(1);
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(hits.load(), kThreads * kRuns);
}

TEST_F(ScheduleCacheTest, EveryRunReturnsFreshOutputBuffers) {
  auto graph = [](const UOpRef& x) {
    return ok(fe::alu(Ops::ADD, {x, ok(fe::expand(ok(fe::reduce(Ops::ADD, x, {0})), {6, 10}))}));
  };
  UOpRef x1 = leaf({6, 10});
  RealizeResult first = realize(cached_, {graph(x1), x1}, bound_);
  const std::vector<float> first_values = floats(first.outputs[0]);
  UOpRef x2 = leaf({6, 10});
  RealizeResult second = realize(cached_, {graph(x2), x2}, bound_);
  ASSERT_TRUE(second.stats.schedule_cache_hit);
  EXPECT_NE(second.outputs[0].get(), first.outputs[0].get());
  EXPECT_EQ(floats(first.outputs[0]), first_values) << "the second run wrote into the first run's output";
  EXPECT_NE(floats(second.outputs[0]), first_values);
  // An output that is a bound leaf is that request's buffer.
  EXPECT_EQ(first.outputs[1].get(), bound_.at(x1.get()).get());
  EXPECT_EQ(second.outputs[1].get(), bound_.at(x2.get()).get());
}

TEST_F(ScheduleCacheTest, SeededRandomNodesRepeatTheirStream) {
  auto draw = [&](uint64_t seed) {
    UOpRef x = leaf({64});
    return std::vector<UOpRef>{ok(fe::alu(Ops::ADD, {x, ok(fe::rand({64}, DType::Float32, {seed, 3}))}))};
  };
  RealizeResult a = realize(cached_, draw(5), bound_);
  std::vector<UOpRef> again = draw(5);
  RealizeResult b = realize(cached_, again, bound_);
  EXPECT_TRUE(b.stats.schedule_cache_hit);
  EXPECT_TRUE(same_bytes(b.outputs[0], realize(uncached_, again, bound_).outputs[0]));
  EXPECT_FALSE(realize(cached_, draw(6), bound_).stats.schedule_cache_hit) << "another seed is another graph";
  EXPECT_FALSE(a.stats.schedule_cache_hit);
}

TEST_F(ScheduleCacheTest, CancelledHitFreesEverything) {
  // Column reductions broadcast back: each its own kernel (a row reduction would run inside
  // its consumer, ScheduleOptions::fuse_row_reductions).
  auto graph = [](const UOpRef& x) {
    UOpRef s = ok(fe::expand(ok(fe::reduce(Ops::ADD, x, {0})), {8, 8}));
    return ok(fe::alu(Ops::MUL, {ok(fe::expand(ok(fe::reduce(Ops::MAX, ok(fe::alu(Ops::SUB, {x, s})), {0})), {8, 8})), x}));
  };
  ASSERT_GE(realize(cached_, {graph(leaf({8, 8}))}, bound_).stats.kernels, 2u);
  std::vector<UOpRef> outs{graph(leaf({8, 8}))};
  const int64_t live = Buffer::live_count();
  int polls = 0;
  RealizeOptions stop_after_one{.should_stop = [&] { return ++polls > 1; }};
  absl::StatusOr<RealizeResult> r = cached_->realize(outs, bound_, stop_after_one);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(Buffer::live_count(), live);
  EXPECT_EQ(polls, 2) << "the hit path polls between kernels";
}

// RealizeOptions::inline_work_limit: only a cached program of little enough work runs; anything
// else is deferred with nothing run, allocated or counted, and the same request then runs whole.
TEST_F(ScheduleCacheTest, InlineWorkLimitRunsOnlySmallCachedPrograms) {
  auto graph = [&](Shape shape) {
    UOpRef x = leaf(shape), y = leaf(shape);
    return std::vector<UOpRef>{ok(fe::alu(Ops::ADD, {ok(fe::alu(Ops::MUL, {x, y})), x}))};
  };
  const RealizeOptions small{.inline_work_limit = 64};
  for (Shape shape : {Shape{4, 8}, Shape{16, 16}}) {  // 32 iterations: within the limit; 256: over it
    std::vector<UOpRef> outs = graph(shape);
    const int64_t live = Buffer::live_count();
    const int misses = lookups_.misses.load(), hits = lookups_.hits.load();
    RealizeResult first = realize(cached_, outs, bound_, small);  // not cached yet
    EXPECT_TRUE(first.deferred);
    EXPECT_TRUE(first.outputs.empty());
    EXPECT_EQ(Buffer::live_count(), live);
    EXPECT_EQ(lookups_.misses.load(), misses) << "a deferred lookup is counted where the request runs";
    RealizeResult whole = realize(cached_, outs, bound_);
    ASSERT_FALSE(whole.deferred);
    std::vector<UOpRef> again = graph(shape);
    RealizeResult inline_run = realize(cached_, again, bound_, small);
    const bool fits = shape[0] * shape[1] <= 64;
    EXPECT_EQ(inline_run.deferred, !fits) << shape[0] << "x" << shape[1];
    if (fits) {
      EXPECT_TRUE(inline_run.stats.schedule_cache_hit);
      ASSERT_EQ(inline_run.outputs.size(), 1u);
      RealizeResult want = realize(uncached_, again, bound_);
      EXPECT_TRUE(same_bytes(inline_run.outputs[0], want.outputs[0]));
      EXPECT_EQ(lookups_.hits.load(), hits + 1);
    } else {
      EXPECT_EQ(lookups_.hits.load(), hits);
    }
  }
  // Transfers and other devices are never run inline.
  std::vector<UOpRef> outs = graph({4, 8});
  ASSERT_FALSE(realize(cached_, outs, bound_).deferred);
  EXPECT_TRUE(realize(cached_, {ok(fe::copy(outs[0], kCpuDevice))}, bound_, small).deferred);
}

TEST(ScheduleCacheLru, BoundedByEntriesAndZeroDisables) {
  LookupCounter counter;
  auto e = Engine::create({.threads = 1, .observer = &counter, .schedule_cache_entries = 2});
  ASSERT_TRUE(e.ok()) << e.status();
  Bindings bound;
  std::vector<UOpRef> keep;
  auto graph = [&](double c) {
    BufferPtr buf = *(*e)->allocate(DType::Float32, {4});
    UOpRef x = ok(fe::buffer(buf->id(), DType::Float32, {4}));
    bound[x.get()] = buf;
    keep.push_back(x);
    return std::vector<UOpRef>{ok(fe::alu(Ops::ADD, {x, ok(fe::constant(c, DType::Float32, {4}))}))};
  };
  auto hit = [&](double c) {
    absl::StatusOr<RealizeResult> r = (*e)->realize(graph(c), bound);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(static_cast<const float*>(r->outputs[0]->data())[0], static_cast<float>(c));
    return r->stats.schedule_cache_hit;
  };
  EXPECT_FALSE(hit(1));
  EXPECT_FALSE(hit(2));
  EXPECT_FALSE(hit(3));  // evicts 1
  EXPECT_EQ((*e)->schedule_cache_entries(), 2u);
  EXPECT_FALSE(hit(1));  // evicts 2
  EXPECT_TRUE(hit(3));   // 3 is now the most recently used
  EXPECT_FALSE(hit(2));  // evicts 1
  EXPECT_TRUE(hit(3));
  EXPECT_EQ((*e)->schedule_cache_entries(), 2u);
  EXPECT_EQ(counter.hits.load(), 2);
  EXPECT_EQ(counter.misses.load(), 5);

  LookupCounter none;
  auto off = Engine::create({.threads = 1, .observer = &none, .schedule_cache_entries = 0});
  ASSERT_TRUE(off.ok()) << off.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RealizeResult> r = (*off)->realize(graph(1), bound);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->stats.schedule_cache_hit);
  }
  EXPECT_EQ((*off)->schedule_cache_entries(), 0u);
  EXPECT_EQ(none.hits.load() + none.misses.load(), 0) << "a disabled cache is not looked up";
}

TEST(ScheduleCacheLru, ADigestCollisionIsAMiss) {
  ScheduleCache cache(4);
  RealizeKey a{.structure = "graph a", .digest = 7};
  RealizeKey b{.structure = "graph b", .digest = 7};
  auto program = std::make_shared<const RealizeProgram>();
  cache.insert(a, program);
  EXPECT_EQ(cache.find(a), program);
  EXPECT_EQ(cache.find(b), nullptr);
}

TEST(ScheduleCacheLru, StructureBytesAreBoundedToo) {
  ScheduleCache cache(100, 20);
  auto program = std::make_shared<const RealizeProgram>();
  RealizeKey a{.structure = "0123456789", .digest = 1}, b{.structure = "abcdefghij", .digest = 2};
  RealizeKey c{.structure = "ABCDEFGHIJ", .digest = 3}, huge{.structure = std::string(21, 'x'), .digest = 4};
  cache.insert(a, program);
  cache.insert(b, program);
  EXPECT_EQ(cache.size(), 2u);
  cache.insert(c, program);  // 30 bytes: the least recently used goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(a), nullptr);
  EXPECT_EQ(cache.find(c), program);
  cache.insert(huge, program);  // larger than the whole bound: not kept, nothing evicted
  EXPECT_EQ(cache.find(huge), nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(RealizeKeyTest, BoundNodesAreAbstractedToTypeShapeAndAliasing) {
  BufferPtr b1 = Buffer::allocate_host(DType::Float32, {3}), b2 = Buffer::allocate_host(DType::Float32, {3});
  UOpRef x = ok(fe::buffer(b1->id(), DType::Float32, {3})), y = ok(fe::buffer(b2->id(), DType::Float32, {3}));
  // A realized node is a leaf like a BUFFER: what it was computed from is not in the key.
  UOpRef realized = ok(fe::alu(Ops::EXP2, {x}));
  auto key = [](const UOpRef& a, const UOpRef& b, const Bindings& bound) {
    return realize_key({ok(fe::alu(Ops::ADD, {a, b}))}, bound);
  };
  RealizeKey distinct = key(x, y, {{x.get(), b1}, {y.get(), b2}});
  EXPECT_EQ(distinct.leaves, (std::vector<const UOp*>{x.get(), y.get()}));
  EXPECT_EQ(distinct.leaf_buffers, (std::vector<BufferPtr>{b1, b2}));
  EXPECT_EQ(key(y, x, {{x.get(), b2}, {y.get(), b1}}).structure, distinct.structure);
  EXPECT_EQ(key(realized, y, {{realized.get(), b1}, {y.get(), b2}}).structure, distinct.structure);
  EXPECT_NE(key(x, y, {{x.get(), b1}, {y.get(), b1}}).structure, distinct.structure) << "aliasing";
  EXPECT_NE(key(realized, y, {{x.get(), b1}, {y.get(), b2}}).structure, distinct.structure) << "an unbound node";
}

// A GPU's programs are its own: the same structure on the CPU, on CUDA:0 and on CUDA:1 is three
// keys (their kernels and launches differ), and the same GPU twice is one.
TEST(RealizeKeyTest, TheDeviceIsPartOfTheKey) {
  BufferPtr b = Buffer::allocate_host(DType::Float32, {3});
  UOpRef x = ok(fe::buffer(b->id(), DType::Float32, {3}));
  const std::vector<UOpRef> out{ok(fe::alu(Ops::NEG, {x}))};
  const Bindings bound{{x.get(), b}};
  RealizeKey cpu = realize_key(out, bound), gpu0 = realize_key(out, bound, "CUDA:0");
  RealizeKey gpu1 = realize_key(out, bound, "CUDA:1");
  EXPECT_NE(cpu.structure, gpu0.structure);
  EXPECT_NE(cpu.digest, gpu0.digest);
  EXPECT_NE(gpu0.structure, gpu1.structure);
  EXPECT_EQ(realize_key(out, bound, "CUDA:0").structure, gpu0.structure);
  EXPECT_EQ(gpu0.leaves, cpu.leaves);
}

}  // namespace
}  // namespace polygrad
