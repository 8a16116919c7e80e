// What the CUDA renderer's kernels compute, checked without a GPU: every distinct kernel of the
// corpus (tests/core/cuda_corpus.h) is lowered and rendered as the GPU path does it
// (lower_for_cuda, render_cuda) and run on the host — the threads of its launch one after another,
// or as fibers meeting at each warp shuffle for a kernel with a warp per output (see
// cuda_emulation.h) — and its output compared with the CPU path's (the same graph lowered and
// rendered as the CPU runs it) on the same random inputs: bit for bit, except float results that
// a warp's lanes summed or multiplied in another order (within a tolerance). Each kernel runs with
// the launch shape of a 132-multiprocessor GPU and with a small grid, which sends every kernel
// with more than a few outer iterations through the grid-stride loop.
//
// Not covered: the prelude's 16-bit conversions pg_h2f, pg_f2h and pg_f2bf are inline PTX and
// are replaced by the C renderer's host conversions (see cuda_emulation.h); NVRTC compiles the
// PTX (cuda_render_test.cpp) but only a GPU run checks what it computes. Nor is anything about
// the device itself: NVRTC's code generation (it contracts a * b + c into FMA by default, which
// the host compile here does not), CUDA's own libm (expf, sinf, ... are not glibc's), float to
// integer casts of NaN or out-of-range values (undefined in C++; x86 and PTX differ), memory,
// launches and streams. docs/GPU.md lists these for the first GPU run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/device.h"
#include "tests/core/cuda_corpus.h"
#include "tests/core/cuda_emulation.h"

namespace polygrad {
namespace {

namespace emu = cuda_emulation;
namespace fe = frontend;

std::vector<std::string> sources(const std::vector<emu::KernelCase>& cases, bool cuda) {
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(cuda ? c.cuda_source : c.c_source);
  return out;
}

struct Compiled {
  absl::StatusOr<emu::KernelSet> cpu = absl::UnknownError("not compiled");
  absl::StatusOr<emu::KernelSet> emulated = absl::UnknownError("not compiled");
};

// Both sides compile at once: with few cores the compilers are most of the test's time.
// The emulation's shim switches between lane stacks with x86-64 assembly.
#if defined(__x86_64__)
#define SKIP_UNLESS_X86_64() (void)0
#else
#define SKIP_UNLESS_X86_64() GTEST_SKIP() << "the emulation switches between lane stacks with x86-64 assembly"
#endif

// The graph's one kernel as a case (a failure, and nullopt, when it has another number of them).
std::optional<emu::KernelCase> single_case(const UOpRef& graph) {
  auto ks = emu::kernel_cases({graph});
  if (!ks.ok() || ks->size() != 1) {
    ADD_FAILURE() << (ks.ok() ? absl::StrCat(ks->size(), " kernels") : ks.status().ToString());
    return std::nullopt;
  }
  return std::move((*ks)[0]);
}

// The messages about kernel `k`.
size_t count_for(const std::vector<std::string>& mismatches, size_t k) {
  const std::string prefix = "kernel " + std::to_string(k) + " ";
  size_t n = 0;
  for (const std::string& m : mismatches) n += m.rfind(prefix, 0) == 0;
  return n;
}

Compiled compile(const std::vector<emu::KernelCase>& cases, size_t units);

// `right`, then a copy of it per perturbation (the first occurrence of `from` after `after` in its
// CUDA source replaced by `to`), compiled and compared: the mismatch messages, "kernel k ..." for
// case k.
struct Perturbation {
  const char* from;
  const char* to;
  const char* after = "pg_kernel(";  // the kernel, not the prelude
};
std::vector<std::string> compare_perturbed(const emu::KernelCase& right,
                                           const std::vector<Perturbation>& perturbations) {
  std::vector<emu::KernelCase> cases{right};
  for (auto [from, to, after] : perturbations) {
    emu::KernelCase wrong = right;
    size_t at = wrong.cuda_source.find(from, wrong.cuda_source.find(after));
    if (at == std::string::npos) {
      ADD_FAILURE() << from << " is not in\n" << right.cuda_source;
      return {};
    }
    wrong.cuda_source.replace(at, std::strlen(from), to);
    cases.push_back(std::move(wrong));
  }
  Compiled compiled = compile(cases, 1);
  if (!compiled.cpu.ok() || !compiled.emulated.ok()) {
    ADD_FAILURE() << compiled.cpu.status() << " / " << compiled.emulated.status();
    return {};
  }
  return emu::compare(cases, *compiled.cpu, *compiled.emulated);
}

Compiled compile(const std::vector<emu::KernelCase>& cases, size_t units) {
  Compiled out;
  std::thread cpu([&] { out.cpu = emu::KernelSet::cpu(sources(cases, false), units); });
  out.emulated = emu::KernelSet::emulated_cuda(sources(cases, true), units);
  cpu.join();
  return out;
}

TEST(CudaEmulation, EveryCorpusKernelComputesWhatTheCpuComputes) {
  SKIP_UNLESS_X86_64();
  test_corpus::Corpus corpus;
  for (const std::string& e : corpus.errors) ADD_FAILURE() << "corpus graph rejected: " << e;
  std::vector<emu::KernelCase> cases;
  std::set<std::string> seen;
  size_t strided = 0, warps = 0, warps_exact = 0, blocks = 0, tiled = 0, staged = 0, reassociated = 0;
  for (const auto& g : corpus.graphs) {
    auto ks = emu::kernel_cases(g);
    ASSERT_TRUE(ks.ok()) << ks.status();
    for (auto& k : *ks) {
      // The launch passes every lowered buffer, then n: the kernel must declare each of them.
      EXPECT_EQ(k.cuda_linear.params.size(), k.cuda_args.size()) << k.cuda_source;
      if (!seen.insert(k.cuda_source).second) continue;
      LaunchDims small = emu::launch_shapes(k.cuda_linear.outer_size, k.threads_per_iteration, k.staged).back();
      if (k.cuda_linear.outer_size * k.threads_per_iteration > int64_t{small.grid} * small.block) ++strided;
      warps += k.threads_per_iteration == kWarpLanes;
      blocks += k.threads_per_iteration == kBlockLanes;
      tiled += !k.cuda_linear.upcast_ranges.empty();
      staged += k.staged;
      warps_exact += k.threads_per_iteration == kWarpLanes && !k.reassociates;
      reassociated += k.reassociates;
      cases.push_back(std::move(k));
    }
  }
  ASSERT_GE(cases.size(), 200u);
  EXPECT_GT(strided, 0u) << "no kernel takes the grid-stride path";
  EXPECT_GT(warps, 20u) << "too few kernels with a warp per output";
  EXPECT_GT(warps_exact, 0u) << "every warp kernel is compared within a tolerance: none bit for bit";
  EXPECT_GT(blocks, 0u) << "no kernel with a block per output";
  EXPECT_GT(tiled, 0u) << "no kernel with register tiles";
  EXPECT_GT(staged, 0u) << "no kernel staging operands in shared memory";
  EXPECT_LT(reassociated * 4, cases.size()) << "most kernels must be compared bit for bit";

  auto t0 = std::chrono::steady_clock::now();
  Compiled compiled = compile(cases, 4);
  ASSERT_TRUE(compiled.cpu.ok()) << compiled.cpu.status();
  ASSERT_TRUE(compiled.emulated.ok()) << compiled.emulated.status();
  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> mismatches = emu::compare(cases, *compiled.cpu, *compiled.emulated);
  auto t2 = std::chrono::steady_clock::now();

  // Every mismatch in one line, the first few with their source.
  for (size_t i = 0; i < mismatches.size(); ++i)
    ADD_FAILURE() << (i < 3 || std::getenv("POLYGRAD_EMU_VERBOSE") ? mismatches[i]
                                                                    : mismatches[i].substr(0, mismatches[i].find('\n')));
  EXPECT_EQ(mismatches.size(), 0u) << "of " << cases.size() * 2 << " launches";
  std::printf("[ info ] %zu distinct CUDA kernels emulated on the host (%zu through the grid-stride loop, %zu with a "
              "warp per output, %zu of those bit for bit, %zu with a block per output, %zu with register tiles, %zu of those staging operands in shared memory) and "
              "compared with the CPU path (%zu that sum floats in another order within a tolerance, the rest bit for "
              "bit): compiled in %.1f s, ran in %.1f s\n",
              cases.size(), strided, warps, warps_exact, blocks, tiled, staged, reassociated,
              std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
}

// The comparison can fail: a kernel computing a wrong value, one leaving an element unwritten,
// and one whose grid-stride step skips work are each caught, while the kernel as rendered passes.
TEST(CudaEmulation, CatchesAWrongKernel) {
  SKIP_UNLESS_X86_64();
  UOpRef a = *fe::buffer(1, DType::Float32, {100, 100}), b = *fe::buffer(2, DType::Float32, {100, 100});
  std::optional<emu::KernelCase> found = single_case(*fe::alu(Ops::ADD, {a, b}));
  ASSERT_TRUE(found);
  const emu::KernelCase& right = *found;
  LaunchDims small = emu::launch_shapes(right.cuda_linear.outer_size).back();
  ASSERT_GT(right.cuda_linear.outer_size, int64_t{small.grid} * small.block) << "the grid-stride path is not exercised";

  std::vector<std::string> mismatches = compare_perturbed(right, {
      {" + ", " - ", "const float v"},  // a wrong value (the addition after the loop header's)
      {" < n; ", " < n - 1; "},                                            // the last element unwritten
      {"r0 += (int64_t)gridDim.x * blockDim.x", "r0 += (int64_t)gridDim.x * blockDim.x * 2"},  // a wrong stride
  });
  // The right kernel: no message. The wrong value and the unwritten element: one per launch
  // shape. The wrong stride: only where the grid is smaller than the trip count.
  ASSERT_EQ(mismatches.size(), 5u);
  EXPECT_EQ(mismatches[0].rfind("kernel 1 ", 0), 0u) << mismatches[0];
  EXPECT_EQ(mismatches[2].rfind("kernel 2 ", 0), 0u) << mismatches[2];
  EXPECT_EQ(mismatches[4].rfind("kernel 3 ", 0), 0u) << mismatches[4];
}

// Kernels with a warp per output are emulated with their lanes meeting at every shuffle: a
// wrong combine tree or lane stride gives wrong sums, and a lane that leaves before a shuffle
// stops the emulation with the reason instead of reading a value no lane wrote.
TEST(CudaEmulation, CatchesAWrongWarpKernel) {
  SKIP_UNLESS_X86_64();
  UOpRef x = *fe::buffer(1, DType::Int32, {40, 200});
  std::optional<emu::KernelCase> found = single_case(*fe::reduce(Ops::ADD, x, {1}));
  ASSERT_TRUE(found);
  const emu::KernelCase& right = *found;
  ASSERT_EQ(right.threads_per_iteration, kWarpLanes) << right.cuda_source;
  EXPECT_FALSE(right.reassociates);  // integer sums: compared bit for bit

  std::vector<std::string> mismatches = compare_perturbed(right, {
      {"int d = 16;", "int d = 8;"},                                       // half the lanes never added
      {"+= 32) {", "+= 16) {"},                                            // lanes overlap
      {"for (int d = 16;", "if (pg_lane == 7) return;\n    for (int d = 16;"},  // a lane leaves early
  });
  // Each wrong kernel fails under both launch shapes and both schedules; the right one never.
  EXPECT_EQ(count_for(mismatches, 0), 0u);
  for (size_t k = 1; k <= 3; ++k) EXPECT_EQ(count_for(mismatches, k), 4u) << "kernel " << k;
  ASSERT_EQ(mismatches.size(), 12u);
  EXPECT_NE(mismatches[8].find("not every lane of the warp reaches"), std::string::npos) << mismatches[8];
}

// A few outputs with long reductions take a block each: the warps' totals meet in shared memory
// between two barriers. A kernel without the second barrier computes the right sums under one
// thread schedule and wrong ones under the other — caught as a schedule-dependent result — and
// one that drops a warp's total is wrong under both.
TEST(CudaEmulation, CatchesAWrongBlockKernel) {
  SKIP_UNLESS_X86_64();
  UOpRef x = *fe::buffer(1, DType::Int32, {6, 4096});
  std::optional<emu::KernelCase> found = single_case(*fe::reduce(Ops::ADD, x, {1}));
  ASSERT_TRUE(found);
  const emu::KernelCase& right = *found;
  ASSERT_EQ(right.threads_per_iteration, kBlockLanes) << right.cuda_source;

  std::vector<std::string> mismatches = compare_perturbed(right, {
      {"__syncthreads();\n    }", "\n    }"},             // the barrier after the partials are read
      {"for (int w = 1; w < 8;", "for (int w = 1; w < 7;"},  // the last warp's total dropped
  });
  EXPECT_EQ(count_for(mismatches, 0), 0u);
  // Without the barrier: the small grid (each block takes several outputs) depends on the schedule.
  EXPECT_GE(count_for(mismatches, 1), 1u);
  bool schedule = false;
  for (const std::string& m : mismatches)
    schedule = schedule || m.find("depends on the order the threads run in") != std::string::npos;
  EXPECT_TRUE(schedule);
  EXPECT_EQ(count_for(mismatches, 2), 4u);
}

// A big matmul stages both operands through shared memory, 16 reduction steps at a time. A kernel
// without the barrier before a fill (a fast thread overwrites what slow ones still read) or after
// it (a thread reads before the fill is complete) gives a result that depends on the thread
// schedule; one whose fill puts a value in the wrong place is wrong under both.
TEST(CudaEmulation, CatchesAWrongStagedKernel) {
  SKIP_UNLESS_X86_64();
  UOpRef a = *fe::buffer(1, DType::Int32, {1024, 32}), b = *fe::buffer(2, DType::Int32, {32, 1024});
  std::optional<emu::KernelCase> found = single_case(*fe::matmul(a, b));
  ASSERT_TRUE(found);
  const emu::KernelCase& right = *found;
  ASSERT_TRUE(right.staged) << right.cuda_source;

  std::vector<std::string> mismatches = compare_perturbed(right, {
      {"__syncthreads();\n      for (int64_t pg_e", "\n      for (int64_t pg_e"},  // the barrier before the fills
      {"__syncthreads();\n      for (int64_t r", "\n      for (int64_t r"},         // the barrier after them
      {"pg_s1[pg_c * 64 + pg_q]", "pg_s1[pg_c * 64 + (pg_q ^ 1)]"},                   // columns swapped in pairs
  });
  EXPECT_EQ(count_for(mismatches, 0), 0u) << (mismatches.empty() ? "" : mismatches[0]);
  for (size_t k = 1; k <= 2; ++k) {
    bool schedule = false;
    for (const std::string& m : mismatches)
      schedule = schedule || (m.rfind(absl::StrCat("kernel ", k, " "), 0) == 0 &&
                              m.find("depends on the order the threads run in") != std::string::npos);
    EXPECT_TRUE(schedule) << "kernel " << k << " without a barrier was not caught";
  }
  EXPECT_GE(count_for(mismatches, 3), 2u);
}

// A float row sum takes a warp per row too; its lanes add in another order than the CPU's loop,
// so it is compared within the tolerance — and passes.
TEST(CudaEmulation, FloatWarpSumsAgreeWithinTheTolerance) {
  SKIP_UNLESS_X86_64();
  UOpRef x = *fe::buffer(1, DType::Float32, {40, 200});
  std::optional<emu::KernelCase> c = single_case(*fe::reduce(Ops::ADD, x, {1}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->threads_per_iteration, kWarpLanes);
  EXPECT_TRUE(c->reassociates);
  std::vector<emu::KernelCase> cases{*c};
  Compiled compiled = compile(cases, 1);
  ASSERT_TRUE(compiled.cpu.ok()) << compiled.cpu.status();
  ASSERT_TRUE(compiled.emulated.ok()) << compiled.emulated.status();
  std::vector<std::string> mismatches = emu::compare(cases, *compiled.cpu, *compiled.emulated);
  EXPECT_TRUE(mismatches.empty()) << mismatches[0];
}

// A vector load from an address that is not aligned to its size faults on a GPU; x86 would load
// it anyway, so the emulation checks every vector load's alignment and stops with the reason.
TEST(CudaEmulation, CatchesAMisalignedVectorLoad) {
  SKIP_UNLESS_X86_64();
  UOpRef a = *fe::buffer(1, DType::Float32, {1024, 8}), b = *fe::buffer(2, DType::Float32, {8, 1028});
  std::optional<emu::KernelCase> right = single_case(*fe::matmul(a, *fe::shrink(b, {{0, 8}, {0, 1024}})));
  ASSERT_TRUE(right);
  std::vector<std::string> mismatches = compare_perturbed(*right, {{"pg_load16(b2 + ", "pg_load16(b2 + 1 + "}});
  EXPECT_EQ(count_for(mismatches, 0), 0u);
  ASSERT_EQ(count_for(mismatches, 1), 2u);
  for (const std::string& m : mismatches) EXPECT_NE(m.find("not aligned to 16"), std::string::npos) << m;
}

// A prelude the emulation does not know is an error, not a silently different kernel.
TEST(CudaEmulation, RefusesAChangedPrelude) {
  auto ks = emu::kernel_cases({*fe::alu(Ops::NEG, {*fe::buffer(1, DType::Float16, {8})})});
  ASSERT_TRUE(ks.ok()) << ks.status();
  const std::string& src = (*ks)[0].cuda_source;
  auto host = emu::host_cuda_prelude(src);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->find("asm"), std::string::npos);
  EXPECT_NE(host->find("pg_f2bf"), std::string::npos);
  std::string changed = absl::StrReplaceAll(src, {{"cvt.rn.f16.f32", "cvt.rz.f16.f32"}});
  ASSERT_NE(changed, src);
  auto refused = emu::host_cuda_prelude(changed);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

}  // namespace
}  // namespace polygrad
