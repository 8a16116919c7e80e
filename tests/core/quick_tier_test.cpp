// The quick compile tier (core/runtime/cpu/quick_compiler.h, core/cache/tiered_build.h): a kernel
// computes the same bits whichever tier built it, a realize runs the quick build while the
// optimized one is held, the optimized build is swapped in (and only it reaches the disk), the
// engine stops its background builds promptly, and --quick-compile=off builds none.
//
// Work is held in flight with tests/tools/held-compiler (an event the test controls), never by a
// guess at how long a compile takes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cache/kernel_cache.h"
#include "core/cache/tiered_build.h"
#include "core/engine/engine.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/cpu/quick_compiler.h"
#include "tests/core/cuda_corpus.h"
#include "tests/core/cuda_emulation.h"
#include "tests/eventually.h"

namespace polygrad {
namespace {

namespace emu = cuda_emulation;
namespace fe = frontend;
using polygrad::testing::eventually;

#define SKIP_WITHOUT_LIBTCC() \
  if (!quick_compiler_available()) GTEST_SKIP() << "this polygrad was built without libtcc: no quick tier"

// A program that marks each outer iteration it runs with `mark` in bufs[0] (int32), counts its
// launch calls, and runs `hook(i)` after iteration i.
class MarkingProgram final : public Program {
 public:
  MarkingProgram(int32_t mark, std::function<void(int64_t)> hook = {}) : mark_(mark), hook_(std::move(hook)) {}
  absl::Status launch(void** bufs, int64_t start, int64_t end) const override {
    ++calls;
    for (int64_t i = start; i < end; ++i) {
      static_cast<int32_t*>(bufs[0])[i] += mark_;
      if (hook_) hook_(i);
    }
    return absl::OkStatus();
  }
  mutable int calls = 0;

 private:
  const int32_t mark_;
  const std::function<void(int64_t)> hook_;
};

// A launch on the quick program moves to the optimized one when it is swapped in mid-launch:
// every iteration runs exactly once, the quick ones all before the optimized ones, and most of
// a long launch runs optimized. A launch that starts after the swap is one optimized call.
TEST(TieredProgramLaunch, ALaunchInProgressMovesToTheOptimizedProgram) {
  constexpr int64_t n = 1000, swap_after = 10;
  auto optimized = std::make_shared<MarkingProgram>(2);
  TieredProgram* tiered = nullptr;
  auto quick = std::make_shared<MarkingProgram>(1, [&](int64_t i) {
    if (i == swap_after) tiered->swap_in(optimized);
  });
  std::atomic<uint64_t> quick_launches{0};
  TieredProgram program(quick, &quick_launches);
  tiered = &program;
  std::vector<int32_t> marks(n, 0);
  void* bufs[] = {marks.data()};
  ASSERT_TRUE(program.launch(bufs, 0, n).ok());
  EXPECT_EQ(quick_launches.load(), 1u);
  const auto first_optimized = std::find(marks.begin(), marks.end(), 2) - marks.begin();
  EXPECT_GT(first_optimized, swap_after) << "the quick program ran until the swap";
  EXPECT_LT(first_optimized, n / 10) << "the launch moved to the optimized program soon after the swap";
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(marks[i], i < first_optimized ? 1 : 2) << "iteration " << i;
  EXPECT_EQ(optimized->calls, 1) << "the rest of the range in one call";

  std::fill(marks.begin(), marks.end(), 0);
  ASSERT_TRUE(program.launch(bufs, 0, n).ok());
  EXPECT_EQ(std::count(marks.begin(), marks.end(), 2), n);
  EXPECT_EQ(optimized->calls, 2);
  EXPECT_EQ(quick_launches.load(), 1u);
}

TEST(QuickTierRule, OnlyCallsOfTheVectorisedFunctionsMakeAKernelWait) {
  const LinearKernel none;  // no casts: the source alone decides
  // The ten functions, called, with or without a space before the parenthesis.
  for (const char* f : {"exp", "expf", "log", "logf", "sin", "sinf", "cos", "cosf", "pow", "powf"}) {
    for (const char* sep : {"", " "}) {
      const std::string call = absl::StrFormat("  const float v = %s%s(x);\n", f, sep);
      EXPECT_FALSE(quick_tier_eligible(none, call, true)) << call;
      EXPECT_TRUE(quick_tier_eligible(none, call, false)) << "without vector math the calls do not matter: " << call;
    }
  }
  // Other math calls, and the names as parts of other identifiers or not called, are eligible.
  for (const char* s : {"exp2f(x)", "log2(x)", "sqrtf(x)", "pg_expf(x)", "expf_(x)", "my_log(x)", "int exp = 1;",
                        "(void)start; b0[i] = cosh;", "sinh(x)", "fmodf(a, b)", "powl"}) {
    EXPECT_TRUE(quick_tier_eligible(none, s, true)) << s;
  }
}

// Every cast between every two dtypes of the corpus: only float to integer makes a kernel wait.
TEST(QuickTierRule, FloatToIntegerCastsMakeAKernelWait) {
  for (DType from : test_corpus::kAllDTypes) {
    for (DType to : test_corpus::kAllDTypes) {
      auto y = fe::cast(*fe::buffer(1, from, {16}), to);
      if (!y.ok()) continue;
      auto ks = emu::kernel_cases({*y});
      ASSERT_TRUE(ks.ok()) << ks.status();
      const bool undefined_for_some_values = dtype_is_float(from) && !dtype_is_float(to) && to != DType::Bool;
      for (const auto& k : *ks)
        EXPECT_EQ(quick_tier_eligible(k.linear, k.c_source, false), !undefined_for_some_values)
            << dtype_name(from) << " -> " << dtype_name(to) << "\n" << k.c_source;
    }
  }
}

TEST(QuickCompiler, ReportsWhatDoesNotCompile) {
  SKIP_WITHOUT_LIBTCC();
  auto p = quick_compile("void pg_kernel(void** b, long s, long e) { undeclared_thing(); ");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("TinyCC"), std::string::npos) << p.status();
  auto missing = quick_compile("void other(void) {}\n");
  EXPECT_FALSE(missing.ok()) << "no entry point";
}

// A kernel TinyCC rejects (it has no __int128) and the C compiler builds: its quick build fails
// the same way every time, the optimized compiler builds it before get_or_build returns (as
// without the quick tier: nothing runs in the background), it computes the right values, and the
// failure is counted (polygradd_kernel_build_failures_total{tier="quick"}).
TEST(QuickTierFallback, AKernelTinyCCRejectsIsBuiltByTheOptimizedCompilerBeforeItRuns) {
  SKIP_WITHOUT_LIBTCC();
  const std::string source = absl::StrCat(
      "#include <stdint.h>\nvoid ", kKernelEntry,
      "(void** b, int64_t start, int64_t end) {\n"
      "  float* out = b[0];\n  const float* x = b[1];\n"
      "  for (int64_t i = start; i < end; ++i) {\n"
      "    const __int128 wide = (__int128)i * 3;\n"
      "    out[i] = x[i] * 2.0f + (float)(int64_t)(wide - 3 * i) + 1.0f;\n  }\n}\n");
  auto rejected = quick_compile(source);
  ASSERT_FALSE(rejected.ok()) << "TinyCC has no __int128";
  EXPECT_NE(rejected.status().message().find("error"), std::string::npos) << "TinyCC's message: " << rejected.status();
  auto cc = CpuCompiler::find("", std::chrono::seconds(120));
  ASSERT_TRUE(cc.ok()) << cc.status();

  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrFormat("polygrad-quick-fallback-%d", getpid());
  std::filesystem::remove_all(dir);
  {
    KernelCache cache(dir);
    const std::string key = KernelCache::key("CPU", cc->identity(), source);
    int quick_calls = 0;
    auto found = cache.get_or_build(
        key, [&](const KernelCache::StopFn& abandoned) { return cc->compile(source, abandoned); }, CpuCompiler::load,
        {}, [&] {
          ++quick_calls;
          return quick_compile(source);
        });
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(quick_calls, 1);
    EXPECT_EQ(found->result, CacheResult::Miss);
    EXPECT_EQ(dynamic_cast<const TieredProgram*>(found->program.get()), nullptr) << "no quick program to wrap";
    const KernelCache::Stats s = cache.stats();
    EXPECT_EQ(s.quick_failures, 1u);
    EXPECT_EQ(s.quick_builds, 0u);
    EXPECT_EQ(s.optimized_builds, 1u);
    EXPECT_EQ(s.background_pending, 0u) << "built in the foreground";
    EXPECT_EQ(cache.disk_keys(), std::vector<std::string>{key}) << "on disk when the call returns";

    std::vector<float> x(100), out(100, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 50.0f;
    void* bufs[] = {out.data(), x.data()};
    ASSERT_TRUE(found->program->launch(bufs, 0, 100).ok());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], x[i] * 2.0f + 1.0f) << i;
    EXPECT_EQ(cache.stats().quick_launches, 0u);
  }
  std::filesystem::remove_all(dir);
}

// Fully random bits for every element: huge, tiny, subnormal and NaN-payload floats, every
// integer (random_bytes keeps floats within a few binades of 1, besides 2% special values).
std::vector<uint8_t> raw_bits(DType dt, int64_t numel, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(static_cast<size_t>(numel) * dtype_itemsize(dt));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  if (dt == DType::Bool)
    for (uint8_t& b : out) b &= 1;
  return out;
}

// Whether the element of `dt` at `p` is a NaN.
bool is_nan(DType dt, const uint8_t* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_itemsize(dt));
  switch (dt) {
    case DType::Float16: return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    case DType::BFloat16: return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    case DType::Float32: return (bits & 0x7f800000) == 0x7f800000 && (bits & 0x7fffff) != 0;
    case DType::Float64: return (bits & 0x7ff0000000000000) == 0x7ff0000000000000 && (bits & 0xfffffffffffff) != 0;
    default: return false;
  }
}

// Every kernel of the CUDA corpus, rendered for the CPU, built by the quick compiler (one kernel
// at a time, as the kernel cache does) and by the optimized compiler with its real flags (many
// kernels per compiler run, for time), run on the same inputs: outputs must agree bit for bit for
// every kernel quick_tier_eligible admits.
TEST(QuickTierAgreement, EveryEligibleCorpusKernelComputesTheOptimizedBuildsBits) {
  SKIP_WITHOUT_LIBTCC();
  auto cc = CpuCompiler::find("", std::chrono::seconds(1200));
  ASSERT_TRUE(cc.ok()) << cc.status();
  test_corpus::Corpus corpus;
  std::vector<emu::KernelCase> cases;
  std::set<std::string> seen;
  for (const auto& g : corpus.graphs) {
    auto ks = emu::kernel_cases(g);
    ASSERT_TRUE(ks.ok()) << ks.status();
    for (auto& k : *ks)
      if (seen.insert(k.c_source).second) cases.push_back(std::move(k));
  }
  ASSERT_GE(cases.size(), 200u);
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.c_source);
  auto optimized = emu::KernelSet::cpu(sources, 4, [&](const std::string& unit) { return cc->compile(unit); });
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  // Kernels calling exp or log run twice more: quick builds calling the math library the
  // optimized compiler built (as the engine's do once it is loaded, quick_math.h).
  auto library = cc->compile(c_math_library_source());
  ASSERT_TRUE(library.ok()) << library.status();
  auto math = load_quick_math(*library);
  ASSERT_TRUE(math.ok()) << math.status();

  size_t eligible = 0, compared = 0, ineligible_differing = 0, nan_bits_differ = 0, with_math = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const emu::KernelCase& c = cases[k];
    const bool is_eligible = quick_tier_eligible(c.linear, c.c_source, cc->uses_vector_math());
    eligible += is_eligible;
    auto quick = quick_compile(c.c_source);
    ASSERT_TRUE(quick.ok()) << "kernel " << k << ": " << quick.status() << "\n" << c.c_source;
    std::vector<ProgramPtr> builds = {*quick};
    const size_t body = c.c_source.find("void pg_kernel(");
    if (c.c_source.find("pg_expf(", body) != std::string::npos || c.c_source.find("pg_logf(", body) != std::string::npos) {
      auto q = quick_compile(c.c_source, *math);
      ASSERT_TRUE(q.ok()) << "kernel " << k << " with the math library: " << q.status();
      builds.push_back(*q);
      ++with_math;
    }
    bool differs = false;
    for (size_t b = 0; b < builds.size() * 2 && !differs; ++b) {
      const int inputs = static_cast<int>(b % 2);
      const Program& build = *builds[b / 2];
      std::vector<std::vector<uint8_t>> in(c.dtypes.size());
      std::vector<void*> bufs(c.dtypes.size());
      for (size_t p = 1; p < c.dtypes.size(); ++p) {
        const uint64_t seed = k * 1000003 + p;
        in[p] = inputs == 0 ? emu::random_bytes(c.dtypes[p], c.numel[p], seed) : raw_bits(c.dtypes[p], c.numel[p], seed);
        bufs[p] = in[p].data();
      }
      const size_t out_bytes = static_cast<size_t>(c.numel[0]) * dtype_itemsize(c.dtypes[0]);
      std::vector<uint8_t> want(out_bytes, 0x5a), got(out_bytes, 0x5a);
      bufs[0] = want.data();
      ASSERT_TRUE(optimized->launch(k, bufs, c.linear.outer_size).ok());
      bufs[0] = got.data();
      ASSERT_TRUE(build.launch(bufs.data(), 0, c.linear.outer_size).ok());
      ++compared;
      if (got == want) continue;
      // Where both results are NaN, which NaN is not fixed (quick_compiler.h says why).
      const size_t size = dtype_itemsize(c.dtypes[0]);
      size_t first = 0;
      bool only_nans = true;
      for (size_t i = 0; i < static_cast<size_t>(c.numel[0]); ++i) {
        const uint8_t *w = want.data() + i * size, *g = got.data() + i * size;
        if (std::memcmp(w, g, size) == 0 || (is_nan(c.dtypes[0], w) && is_nan(c.dtypes[0], g))) continue;
        if (only_nans) first = i;
        only_nans = false;
      }
      if (only_nans) {
        ++nan_bits_differ;
        continue;
      }
      differs = true;
      if (!is_eligible) {
        ++ineligible_differing;
        continue;
      }
      ADD_FAILURE() << "kernel " << k << (inputs == 0 ? " (ordinary inputs)" : " (random bits)")
                    << (b >= 2 ? " with the math library" : "") << ": element "
                    << first << " is " << emu::format_element(c.dtypes[0], got.data() + first * size)
                    << " from the quick build, " << emu::format_element(c.dtypes[0], want.data() + first * size)
                    << " from the optimized one\n"
                    << c.c_source;
    }
  }
  std::printf("[ info ] %zu distinct corpus kernels, %zu eligible for the quick tier (%s), %zu calling exp or log "
              "also built against the math library: %zu runs compared bit for bit (%zu of them with NaNs of other "
              "sign or payload); %zu of the %zu ineligible kernels differ between the tiers\n",
              cases.size(), eligible, cc->uses_vector_math() ? "clang with libmvec" : "no vector math", with_math,
              compared, nan_bits_differ, ineligible_differing, cases.size() - eligible);
  EXPECT_GT(with_math, 0u) << "the corpus has exp and log kernels";
  EXPECT_GE(eligible * 10, cases.size() * 8) << "most kernels must be eligible";
}

// tests/tools/held-compiler behind a gate directory: open, every compile runs at once; held, each
// compile waits (and says so with a held.<pid> file) until the gate opens again.
class Gate {
 public:
  explicit Gate(const std::filesystem::path& dir) : dir_(dir / "gate") {
    std::filesystem::create_directories(dir_);
    std::filesystem::create_symlink(std::filesystem::path(POLYGRAD_TEST_TOOLS_DIR) / "held-compiler", dir_ / "cc");
    release();
  }
  ~Gate() { release(); }
  std::string compiler() const { return (dir_ / "cc").string(); }
  void hold() { std::filesystem::remove(dir_ / "open"); }
  void release() { std::ofstream(dir_ / "open").flush(); }
  std::vector<pid_t> held_pids() const {
    std::vector<pid_t> pids;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("held.", 0) == 0) pids.push_back(static_cast<pid_t>(std::stol(name.substr(5))));
    }
    return pids;
  }

 private:
  std::filesystem::path dir_;
};

class QuickTierEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrFormat("polygrad-quick-tier-%d-%s", getpid(),
                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    gate_ = std::make_unique<Gate>(dir_);
  }
  void TearDown() override {
    engine_.reset();
    gate_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start(bool quick) {
    auto e = Engine::create({.cache_dir = dir_ / "cache", .compiler = gate_->compiler(), .quick_compile = quick,
                             .threads = 1});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
    engine_->wait_for_quick_math();  // its compile is not one of those the tests hold
  }
  // A bound float32 input 0, 1, ..., n-1.
  UOpRef input(int64_t n) {
    BufferPtr buf = *engine_->allocate(DType::Float32, {n});
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(buf->data())[i] = static_cast<float>(i);
    UOpRef x = *fe::buffer(buf->id(), DType::Float32, {n});
    bound_[x.get()] = buf;
    leaves_.push_back(x);
    return x;
  }
  // Realizes `y` and returns its elements.
  std::vector<float> realize(const UOpRef& y, RealizeStats* stats = nullptr) {
    auto r = engine_->realize({y}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    if (stats) *stats = r->stats;
    const float* d = static_cast<const float*>(r->outputs[0]->data());
    return std::vector<float>(d, d + r->outputs[0]->numel());
  }
  // relu(2x - 5): eligible (no exp, log, sin, cos or pow).
  UOpRef eligible_graph(int64_t n) {
    UOpRef x = input(n);
    UOpRef two = *fe::constant(2.0, DType::Float32, {n}), five = *fe::constant(5.0, DType::Float32, {n});
    return *fe::relu(*fe::alu(Ops::ADD, {*fe::alu(Ops::MUL, {x, two}), *fe::alu(Ops::NEG, {five})}));
  }
  static void expect_relu(const std::vector<float>& v) {
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], std::max(0.0f, 2.0f * static_cast<float>(i) - 5.0f)) << i;
  }
  KernelCache& cache() { return engine_->kernel_cache(); }

  std::filesystem::path dir_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<Engine> engine_;
  Bindings bound_;
  std::vector<UOpRef> leaves_;
};

TEST_F(QuickTierEngine, RealizeRunsTheQuickBuildThenTheOptimizedOneIsSwappedIn) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  gate_->hold();
  UOpRef y = eligible_graph(1000);
  RealizeStats stats;
  // Completes with the optimized compiler held: the quick build ran it.
  std::vector<float> first = realize(y, &stats);
  expect_relu(first);
  EXPECT_EQ(stats.compiled, 1u);
  EXPECT_EQ(cache().stats().quick_builds, 1u);
  ASSERT_TRUE(eventually([&] { return !gate_->held_pids().empty(); })) << "the optimized build is not in flight";
  EXPECT_EQ(cache().stats().background_pending, 1u);
  EXPECT_EQ(cache().stats().optimized_builds, 0u);
  EXPECT_TRUE(cache().disk_keys().empty()) << "the disk tier holds only optimized builds";
  // Runs again, still on the quick build, while the optimized one is held.
  expect_relu(realize(y));

  gate_->release();
  ASSERT_TRUE(eventually([&] { return cache().stats().background_pending == 0; }));
  EXPECT_EQ(cache().stats().optimized_builds, 1u);
  EXPECT_EQ(cache().stats().background_failures, 0u);
  const std::vector<std::string> keys = cache().disk_keys();
  ASSERT_EQ(keys.size(), 1u) << "the optimized build is written to disk once it is done";
  ProgramPtr program = cache().in_memory(keys[0]);
  auto* tiered = dynamic_cast<const TieredProgram*>(program.get());
  ASSERT_NE(tiered, nullptr) << "the memory tier keeps the wrapper it handed out";
  EXPECT_TRUE(tiered->optimized());
  // The next realize runs through the same wrapper, now the optimized program, and compiles nothing.
  expect_relu(realize(y, &stats));
  EXPECT_EQ(stats.compiled, 0u);
  EXPECT_EQ(cache().stats().quick_builds, 1u);
}

// Which tier ran, counted: launches run the quick build while the optimized one is held, and none
// does once the background builds have drained (the optimized build swapped in), through the
// schedule cache's program and through a graph compiled afresh alike.
TEST_F(QuickTierEngine, OnceTheBackgroundBuildsDrainNoLaunchRunsAQuickBuild) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  gate_->hold();
  UOpRef y = eligible_graph(1000);
  expect_relu(realize(y));
  const uint64_t first = cache().stats().quick_launches;
  EXPECT_GE(first, 1u) << "the first realize ran the quick build";
  expect_relu(realize(y));
  EXPECT_GT(cache().stats().quick_launches, first) << "still the quick build while the optimized one is held";

  ASSERT_TRUE(eventually([&] { return !gate_->held_pids().empty(); }));
  gate_->release();
  ASSERT_TRUE(eventually([&] { return cache().stats().background_pending == 0; }));
  ASSERT_EQ(cache().stats().optimized_builds, 1u);
  const uint64_t drained = cache().stats().quick_launches;
  RealizeStats stats;
  for (int i = 0; i < 5; ++i) {
    expect_relu(realize(y, &stats));
    EXPECT_EQ(stats.compiled, 0u);
  }
  UOpRef again = eligible_graph(1000);  // the same kernel from another input: another program, same key
  expect_relu(realize(again, &stats));
  EXPECT_EQ(stats.compiled, 0u);
  EXPECT_EQ(cache().stats().quick_launches, drained) << "a launch ran the quick build after the swap";
  EXPECT_EQ(cache().stats().quick_builds, 1u);
}

// RealizeOptions::quick_compile false (what prewarm asks): with the quick tier on, a new kernel
// still waits for the optimized compiler, and is on disk when the realize returns.
TEST_F(QuickTierEngine, ARealizeRefusingTheQuickTierWaitsForTheOptimizedBuild) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  UOpRef y = eligible_graph(500);
  RealizeOptions final_only;
  final_only.quick_compile = false;
  gate_->hold();
  auto pending = std::async(std::launch::async, [&] { return engine_->realize({y}, bound_, final_only); });
  ASSERT_TRUE(eventually([&] { return !gate_->held_pids().empty(); }));
  // The compiler is held: the realize cannot have finished unless a quick build ran it.
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate_->release();
  auto r = pending.get();
  ASSERT_TRUE(r.ok()) << r.status();
  const float* d = static_cast<const float*>(r->outputs[0]->data());
  expect_relu(std::vector<float>(d, d + r->outputs[0]->numel()));
  EXPECT_EQ(r->stats.compiled, 1u);
  const KernelCache::Stats s = cache().stats();
  EXPECT_EQ(s.quick_builds, 0u);
  EXPECT_EQ(s.optimized_builds, 1u);
  EXPECT_EQ(s.background_pending, 0u);
  EXPECT_EQ(cache().disk_keys().size(), 1u) << "built in the foreground: on disk when the realize returns";
}

TEST_F(QuickTierEngine, AKernelCallingSinWaitsForTheOptimizedCompiler) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  UOpRef x = input(100);
  UOpRef y = *fe::alu(Ops::SIN, {*fe::alu(Ops::MUL, {x, *fe::constant(0.1, DType::Float32, {100})})});
  gate_->hold();
  auto pending = std::async(std::launch::async, [&] { return realize(y); });
  ASSERT_TRUE(eventually([&] { return !gate_->held_pids().empty(); }));
  const bool waits = pending.wait_for(std::chrono::seconds(0)) == std::future_status::timeout;
  const uint64_t quick_builds = cache().stats().quick_builds;
  gate_->release();
  std::vector<float> v = pending.get();
  ASSERT_EQ(v.size(), 100u);
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = std::sin(static_cast<float>(i) * 0.1f);  // libmvec's sinf may differ by an ulp or two
    EXPECT_LE(std::fabs(v[i] - want), 1e-6f) << i;
  }
  // The rule applies only where the optimized compiler vectorises sin (clang with libmvec).
  auto cc = CpuCompiler::find("", std::chrono::seconds(120));
  ASSERT_TRUE(cc.ok());
  if (cc->uses_vector_math()) {
    EXPECT_TRUE(waits) << "a sin kernel must wait for the optimized compiler";
    EXPECT_EQ(quick_builds, 0u);
    EXPECT_EQ(cache().disk_keys().size(), 1u) << "a foreground build is on disk when the realize returns";
  }
}

// exp and log are c_math.h's functions on both tiers (the same bits: QuickTierAgreement), so a
// softmax-shaped kernel runs its quick build at once.
TEST_F(QuickTierEngine, AKernelCallingExpAndLogRunsAQuickBuild) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  UOpRef x = input(100);
  UOpRef scaled = *fe::alu(Ops::MUL, {x, *fe::constant(0.1, DType::Float32, {100})});
  UOpRef y = *fe::alu(Ops::ADD, {*fe::exp(scaled), *fe::log(*fe::alu(Ops::ADD, {scaled, *fe::constant(1.0, DType::Float32, {100})}))});
  gate_->hold();
  std::vector<float> v = realize(y);  // returns with the optimized compiler held: the quick build ran it
  EXPECT_EQ(cache().stats().quick_builds, 1u);
  ASSERT_EQ(v.size(), 100u);
  for (size_t i = 0; i < v.size(); ++i) {
    const double t = static_cast<float>(i) * 0.1f;
    const double want = std::exp(t) + std::log(t + 1);
    EXPECT_LE(std::fabs(v[i] - want), 4e-7 * std::fabs(want) + 1e-7) << i;
  }
  gate_->release();
}

TEST_F(QuickTierEngine, DestroyingTheEngineKillsAHeldBackgroundBuild) {
  SKIP_WITHOUT_LIBTCC();
  start(true);
  gate_->hold();
  expect_relu(realize(eligible_graph(64)));
  ASSERT_TRUE(eventually([&] { return !gate_->held_pids().empty(); }));
  const std::vector<pid_t> held = gate_->held_pids();
  // The gate stays closed: the destructor returns only because it kills the held compiler (were
  // it to wait for the compile, this test would hang).
  engine_.reset();
  for (pid_t p : held) EXPECT_TRUE(eventually([p] { return kill(p, 0) != 0; })) << "compiler " << p << " still runs";
}

TEST_F(QuickTierEngine, QuickCompileOffBuildsNoQuickPrograms) {
  start(false);
  RealizeStats stats;
  expect_relu(realize(eligible_graph(300), &stats));
  EXPECT_EQ(stats.compiled, 1u);
  const KernelCache::Stats s = cache().stats();
  EXPECT_EQ(s.quick_builds, 0u);
  EXPECT_EQ(s.optimized_builds, 1u);
  EXPECT_EQ(s.background_pending, 0u);
  EXPECT_EQ(cache().disk_keys().size(), 1u) << "built in the foreground: on disk when the realize returns";
}

}  // namespace
}  // namespace polygrad
