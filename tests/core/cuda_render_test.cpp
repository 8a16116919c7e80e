// The CUDA renderer against NVRTC: every kernel of a varied corpus of graphs, produced by the
// real pipeline (schedule, lower, simplify, upcast, linearize), renders to CUDA C that NVRTC
// compiles to PTX for sm_80 and sm_90 with an empty log. Needs no GPU; skips where NVRTC is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/device.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/nvrtc.h"
#include "tests/core/cuda_corpus.h"

namespace polygrad {
namespace {

namespace fe = frontend;

using test_corpus::Corpus;

bool is_buffer(const UOp* n) { return n->op == Ops::BUFFER; }

std::vector<LinearKernel> corpus_kernels() {
  Corpus c;
  for (const std::string& e : c.errors) ADD_FAILURE() << "corpus graph rejected: " << e;
  std::vector<LinearKernel> out;
  for (const auto& g : c.graphs) {
    // As the CPU lowers them and as the CUDA path does (warp reductions).
    for (bool cuda : {false, true}) {
      auto ks = kernels_for(g, is_buffer, cuda);
      EXPECT_TRUE(ks.ok()) << ks.status();
      if (ks.ok()) out.insert(out.end(), ks->begin(), ks->end());
    }
  }
  return out;
}

std::vector<std::string> distinct_cuda_sources() {
  std::set<std::string> seen;
  for (const LinearKernel& k : corpus_kernels()) {
    auto src = render_cuda(k);
    EXPECT_TRUE(src.ok()) << src.status();
    if (src.ok()) seen.insert(*src);
  }
  return {seen.begin(), seen.end()};
}

// Under a sanitizer every kernel is still rendered (our code, instrumented), but only every 16th
// is compiled: NVRTC is not instrumented and the sources are the release build's, so compiling
// all again would check nothing more, while the sanitizer's allocator makes each compile several
// times slower (852 compiles took 206 s of ctest-asan and 189 s of ctest-tsan).
#if defined(POLYGRAD_ASAN_BUILD) || defined(POLYGRAD_TSAN_BUILD)
constexpr size_t kCompileStride = 16;
#else
constexpr size_t kCompileStride = 1;
#endif

// The acceptance check: at least 200 distinct kernels, each compiled for sm_80 and sm_90 with no
// error and nothing in the log (a warning is a renderer bug too).
TEST(CudaRender, EveryCorpusKernelCompilesWithNvrtc) {
  auto nvrtc = Nvrtc::get();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC is not available: " << nvrtc.status().message();
  std::vector<std::string> all = distinct_cuda_sources();
  ASSERT_GE(all.size(), 200u);
  std::vector<std::string> sources;
  for (size_t i = 0; i < all.size(); i += kCompileStride) sources.push_back(all[i]);

  const int archs[] = {80, 90};
  std::vector<std::string> failures(sources.size() * 2);
  std::atomic<size_t> next{0};
  auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t i; (i = next++) < failures.size();) {
      int arch = archs[i % 2];
      const std::string& src = sources[i / 2];
      auto r = (*nvrtc)->compile(src, arch, Nvrtc::Output::Ptx);
      if (!r.ok()) failures[i] = std::string(r.status().message());
      else if (!r->log.empty()) failures[i] = absl::StrCat("compute_", arch, " log:\n", r->log);
      else if (r->code.find(".entry pg_kernel") == std::string::npos) failures[i] = "no pg_kernel entry in the PTX";
    }
  };
  unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  size_t failed = 0;
  for (size_t i = 0; i < failures.size(); ++i) {
    if (failures[i].empty()) continue;
    if (++failed <= 3) ADD_FAILURE() << failures[i] << "\n--- source ---\n" << sources[i / 2];
  }
  EXPECT_EQ(failed, 0u) << "of " << failures.size() << " compiles";
  std::printf("[ info ] %zu of %zu distinct CUDA kernels compiled for compute_80 and compute_90 by NVRTC %s in %.1f s "
              "(%u threads)\n",
              sources.size(), all.size(), (*nvrtc)->version().c_str(), secs, n);
}

// PTX is checked for every kernel above; a CUBIN also runs ptxas. A few kernels that use every
// prelude helper (16-bit conversions are inline PTX) go all the way to sm_90 machine code.
TEST(CudaRender, HalfMatmulCompilesToCubin) {
  auto nvrtc = Nvrtc::get();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC is not available: " << nvrtc.status().message();
  uint64_t id = 1;
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    UOpRef a = *fe::buffer(id++, dt, {16, 32}), b = *fe::buffer(id++, dt, {32, 64});
    auto ks = kernels_for({*fe::softmax(*fe::matmul(a, b), -1)}, is_buffer);
    ASSERT_TRUE(ks.ok()) << ks.status();
    for (const LinearKernel& k : *ks) {
      auto src = render_cuda(k);
      ASSERT_TRUE(src.ok()) << src.status();
      for (int arch : {80, 90}) {
        auto r = (*nvrtc)->compile(*src, arch, Nvrtc::Output::Cubin);
        ASSERT_TRUE(r.ok()) << r.status() << "\n" << *src;
        EXPECT_EQ(r->log, "") << *src;
        EXPECT_GT(r->code.size(), 0u);
      }
    }
  }
}

// The CUDA target differs from C only in prelude, signature and the outer loop: the grid-stride
// mapping, typed parameters, and no header NVRTC would have to find.
// ptxas 13.0 drops negations it folds into sm_90's three-input integer max/min (an argmin of
// int32 was wrong on an H200): every integer negation of 32 bits or fewer, however the graph
// spells it, renders through pg_ineg for CUDA, and stays C's minus for the CPU.
TEST(CudaRender, IntegerNegationsGoThroughPgIneg) {
  for (DType dt : {DType::Int8, DType::Int16, DType::Int32, DType::UInt32}) {
    UOpRef x = *fe::buffer(1, dt, {5, 7});
    UOpRef neg = *fe::alu(Ops::NEG, {x});
    UOpRef minus_one = *fe::alu(Ops::MUL, {x, *fe::constant(int64_t{-1}, dt, {5, 7})});
    UOpRef from_zero = *fe::alu(Ops::SUB, {*fe::constant(int64_t{0}, dt, {5, 7}), x});
    for (const UOpRef& v : {neg, minus_one, from_zero}) {
      auto ks = kernels_for({*fe::reduce(Ops::MAX, v, {1})}, is_buffer, /*cuda=*/true);
      ASSERT_TRUE(ks.ok()) << ks.status();
      ASSERT_EQ(ks->size(), 1u);
      std::string src = *render_cuda((*ks)[0]);
      std::string body = src.substr(src.find("pg_kernel("));
      EXPECT_NE(body.find("pg_ineg("), std::string::npos) << dtype_name(dt) << "\n" << body;
      EXPECT_EQ(body.find("(-v"), std::string::npos) << dtype_name(dt) << "\n" << body;
      EXPECT_EQ(render_c((*ks)[0])->find("pg_ineg"), std::string::npos);
    }
  }
  // Floats and 64-bit integers keep the plain minus.
  for (DType dt : {DType::Float32, DType::Int64}) {
    auto ks = kernels_for({*fe::reduce(Ops::MAX, *fe::alu(Ops::NEG, {*fe::buffer(1, dt, {5, 7})}), {1})}, is_buffer, true);
    ASSERT_TRUE(ks.ok()) << ks.status();
    std::string src = *render_cuda((*ks)[0]);
    EXPECT_EQ(src.substr(src.find("pg_kernel(")).find("pg_ineg("), std::string::npos) << src;
  }
}

TEST(CudaRender, KernelShape) {
  UOpRef x = *fe::buffer(1, DType::Float32, {64, 8}), y = *fe::buffer(2, DType::Bool, {64, 8});
  auto ks = kernels_for({*fe::sum(*fe::alu(Ops::WHERE, {y, x, *fe::alu(Ops::NEG, {x})}), {1}, false)}, is_buffer);
  ASSERT_TRUE(ks.ok()) << ks.status();
  ASSERT_EQ(ks->size(), 1u);
  std::string src = *render_cuda((*ks)[0]);
  EXPECT_NE(src.find("extern \"C\" __global__ void pg_kernel(float* __restrict__ b0, const "), std::string::npos)
      << src;
  EXPECT_NE(src.find("const bool* __restrict__ b"), std::string::npos) << src;
  EXPECT_NE(src.find(", int64_t n) {"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int64_t r0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r0 < n; "
                     "r0 += (int64_t)gridDim.x * blockDim.x) {"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("#include"), std::string::npos) << src;
  // A kernel without an outer loop (a full reduction) runs in one thread, or, reducing enough
  // elements, in one warp (tests below: or one block).
  auto total = kernels_for({*fe::sum(*fe::buffer(4, DType::Float32, {4, 8}), {}, false)}, is_buffer);
  ASSERT_TRUE(total.ok());
  EXPECT_NE(render_cuda(total->back())->find("if ((int64_t)blockIdx.x * blockDim.x + threadIdx.x >= n) return;"),
            std::string::npos);
  auto big = kernels_for({*fe::sum(*fe::buffer(3, DType::Float32, {1 << 20}), {}, false)}, is_buffer, /*cuda=*/true);
  ASSERT_TRUE(big.ok());
  ASSERT_EQ(big->size(), 2u);  // chunks, then their partial sums
  for (const LinearKernel& k : *big) EXPECT_EQ(cuda_threads_per_iteration(k), kWarpLanes);
  EXPECT_NE(render_cuda(big->back())->find("if (pg_group != 0) return;"), std::string::npos);
}

// The graph's one kernel, lowered the GPU's way (a failure, and an empty kernel, otherwise).
LinearKernel single_cuda_kernel(const UOpRef& graph) {
  auto ks = kernels_for({graph}, is_buffer, /*cuda=*/true);
  if (!ks.ok() || ks->size() != 1) {
    ADD_FAILURE() << (ks.ok() ? absl::StrCat(ks->size(), " kernels") : ks.status().ToString());
    return {};
  }
  return (*ks)[0];
}

// Reductions into few outputs get a warp per output on CUDA: lanes share the reduction loop,
// combine by shuffles, and one lane stores. Short reductions and kernels with many outputs keep
// a thread per output.
TEST(CudaRender, WarpPerOutputReductions) {
  UOpRef x = *fe::buffer(1, DType::Float32, {256, 1024}), h = *fe::buffer(2, DType::Float16, {256, 1024});
  for (const UOpRef& rows : {*fe::sum(x, {1}, false), *fe::max(x, {1}, false), *fe::sum(h, {1}, false)}) {
    const LinearKernel k = single_cuda_kernel(rows);
    EXPECT_EQ(cuda_threads_per_iteration(k), kWarpLanes);
    std::string src = *render_cuda(k);
    for (const char* want : {"const int pg_lane = threadIdx.x % 32;", "r0 = pg_group; r0 < n;", "= pg_lane; r",
                             "__shfl_down_sync(0xffffffffu, ", "__shfl_sync(0xffffffffu, ", "if (pg_lane == 0) b0["})
      EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
    // On the CPU the same graph keeps its tiles and one thread per output.
    auto cpu = kernels_for({rows}, is_buffer);
    ASSERT_TRUE(cpu.ok());
    EXPECT_EQ(render_cuda((*cpu)[0])->find("__shfl"), std::string::npos);
  }
  // Short reductions, and matmuls with outputs enough to give each a thread.
  UOpRef shortrows = *fe::sum(*fe::buffer(3, DType::Float32, {256, 16}), {1}, false);
  UOpRef mm = *fe::matmul(*fe::buffer(4, DType::Float32, {256, 128}), *fe::buffer(5, DType::Float32, {128, 256}));
  for (const UOpRef& g : {shortrows, mm}) {
    auto ks = kernels_for({g}, is_buffer, /*cuda=*/true);
    ASSERT_TRUE(ks.ok()) << ks.status();
    for (const LinearKernel& k : *ks) {
      EXPECT_EQ(cuda_threads_per_iteration(k), 1);
      EXPECT_EQ(k.outer_size, g->numel()) << "every output element is an outer iteration";
      EXPECT_EQ(render_cuda(k)->find("__shfl"), std::string::npos);
    }
  }
}

// Few outputs with long reductions get a block each (warps combined through shared memory);
// the launch geometry's block is exactly such a group, as the block's barriers require.
TEST(CudaRender, BlockPerOutputReductions) {
  EXPECT_EQ(launch_dims(int64_t{6} * kBlockLanes, 132).block, static_cast<unsigned>(kBlockLanes));
  UOpRef x = *fe::buffer(1, DType::Float32, {16, 8192});
  for (const UOpRef& rows : {*fe::sum(x, {1}, false), *fe::max(x, {1}, false)}) {
    const LinearKernel k = single_cuda_kernel(rows);
    EXPECT_EQ(cuda_threads_per_iteration(k), kBlockLanes);
    std::string src = *render_cuda(k);
    for (const char* want : {"const int pg_lane = threadIdx.x % 256;", "r0 = pg_group; r0 < n;", "+= 256) {",
                             "__shfl_down_sync(0xffffffffu, ", "__shared__ float pg_part[8];", "__syncthreads();",
                             "if (pg_lane == 0) b0["})
      EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
  }
  // Many outputs keep a warp each, however long the reduction.
  auto many = kernels_for({*fe::sum(*fe::buffer(2, DType::Float32, {2048, 4096}), {1}, false)}, is_buffer, true);
  ASSERT_TRUE(many.ok()) << many.status();
  for (const LinearKernel& k : *many) EXPECT_NE(cuda_threads_per_iteration(k), kBlockLanes);
}

// Reducing kernels with 2^20 outputs or more compute a 4 x 4 register tile per thread, over the
// last two long axes; smaller ones, and big kernels that do not reduce, keep a thread per output.
TEST(CudaRender, BigMatmulsGetRegisterTiles) {
  UOpRef a = *fe::buffer(1, DType::Float32, {1024, 64}), b = *fe::buffer(2, DType::Float32, {64, 1024});
  UOpRef batched = *fe::matmul(*fe::buffer(3, DType::Float32, {4, 512, 64}), *fe::buffer(4, DType::Float32, {64, 512}));
  for (const UOpRef& g : {*fe::matmul(a, b), batched}) {
    const LinearKernel k = single_cuda_kernel(g);
    EXPECT_EQ(k.upcast_ranges.size(), 2u);
    EXPECT_EQ(k.outer_size, g->numel() / 16) << "an outer iteration per 4 x 4 tile";
    EXPECT_EQ(cuda_threads_per_iteration(k), 1);
    std::string src = *render_cuda(k);
    for (const char* want : {"float acc0[16];", "#pragma unroll 4"})
      EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
  }
  UOpRef small = *fe::matmul(*fe::buffer(5, DType::Float32, {256, 64}), *fe::buffer(6, DType::Float32, {64, 256}));
  UOpRef odd = *fe::matmul(*fe::buffer(7, DType::Float32, {1026, 64}), *fe::buffer(8, DType::Float32, {64, 1026}));
  UOpRef elementwise =
      *fe::alu(Ops::ADD, {*fe::buffer(9, DType::Float32, {1024, 1024}), *fe::buffer(10, DType::Float32, {1024, 1024})});
  for (const UOpRef& g : {small, odd, elementwise}) {
    auto ks = kernels_for({g}, is_buffer, /*cuda=*/true);
    ASSERT_TRUE(ks.ok()) << ks.status();
    for (const LinearKernel& k : *ks) {
      EXPECT_TRUE(k.upcast_ranges.empty());
      EXPECT_EQ(k.outer_size, g->numel());
    }
  }
}

// Register tiles in 16 x 16 squares stage both matmul operands through shared memory, a chunk of
// 16 reduction steps at a time between two barriers (a last chunk of a reduction that is not a
// multiple of 16 is shorter), and read them there; a kernel whose tiles are not in squares, or
// whose reduction is shorter than a chunk, reads global memory.
TEST(CudaRender, SquareTilesStageOperandsInSharedMemory) {
  UOpRef a = *fe::buffer(1, DType::Float32, {1024, 64}), b = *fe::buffer(2, DType::Float32, {64, 1024});
  const LinearKernel k = single_cuda_kernel(*fe::matmul(a, b));
  ASSERT_TRUE(cuda_stages_operands(k));
  std::string src = *render_cuda(k);
  for (const char* want : {"__shared__ __align__(16) float pg_s0[1024];", "__shared__ __align__(16) float pg_s1[1024];",
                           "for (int64_t pg_k = 0; pg_k < 64; pg_k += 16) {", "= pg_s0[",
                           // a tile's 4 consecutive columns: one 16-byte read of shared memory
                           "const auto pg_vec0 = pg_load16(pg_s1 + "})
    EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
  size_t barriers = 0;
  for (size_t at = src.find("__syncthreads();"); at != std::string::npos; at = src.find("__syncthreads();", at + 1))
    ++barriers;
  EXPECT_EQ(barriers, 2u) << src;
  // Global memory is read only by the fills.
  const std::string body = src.substr(src.find("for (int64_t r3 = pg_k;"));
  EXPECT_EQ(body.find("b1["), std::string::npos) << body;
  EXPECT_EQ(body.find("b2["), std::string::npos) << body;

  UOpRef odd = *fe::matmul(*fe::buffer(3, DType::Float32, {1032, 64}), *fe::buffer(4, DType::Float32, {64, 1032}));
  const LinearKernel partial =
      single_cuda_kernel(*fe::matmul(*fe::buffer(7, DType::Float32, {1024, 24}), *fe::buffer(8, DType::Float32, {24, 1024})));
  ASSERT_TRUE(cuda_stages_operands(partial));
  src = *render_cuda(partial);
  for (const char* want : {"for (int64_t pg_k = 0; pg_k < 24; pg_k += 16) {", "if (pg_k + pg_c < 24) pg_s0[",
                           "r3 < pg_k + 16 && r3 < 24;"})
    EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;

  UOpRef short_k = *fe::matmul(*fe::buffer(5, DType::Float32, {1024, 8}), *fe::buffer(6, DType::Float32, {8, 1024}));
  for (const UOpRef& g : {odd, short_k}) {
    const LinearKernel plain = single_cuda_kernel(g);
    EXPECT_FALSE(plain.upcast_ranges.empty());
    EXPECT_FALSE(cuda_stages_operands(plain));
    EXPECT_EQ(render_cuda(plain)->find("__shared__"), std::string::npos);
  }
}

// Inside a register tile that does not stage its operands, a lane loop's loads of consecutive
// elements from an offset that is a multiple of the lanes become one aligned vector load before the loop; a transposed operand
// (its lanes are a row apart) and a view starting one element in (misaligned) keep scalar loads.
TEST(CudaRender, RegisterTilesLoadVectors) {
  auto render = [](const UOpRef& g) {
    const LinearKernel k = single_cuda_kernel(g);
    EXPECT_FALSE(k.upcast_ranges.empty());
    EXPECT_FALSE(cuda_stages_operands(k)) << "a reduction of 8 is shorter than a staged chunk";
    return *render_cuda(k);
  };
  UOpRef a = *fe::buffer(1, DType::Float32, {1024, 8});
  std::string f32 = render(*fe::matmul(a, *fe::buffer(2, DType::Float32, {8, 1024})));
  EXPECT_NE(f32.find("const auto pg_vec0 = pg_load16(b2 + "), std::string::npos) << f32;
  EXPECT_NE(f32.find("= ((const float*)&pg_vec0)[r2];"), std::string::npos) << f32;
  std::string f16 =
      render(*fe::matmul(*fe::buffer(3, DType::Float16, {1024, 8}), *fe::buffer(4, DType::Float16, {8, 1024})));
  EXPECT_NE(f16.find("pg_load8(b2 + "), std::string::npos) << f16;
  EXPECT_NE(f16.find("pg_h2f(((const uint16_t*)&pg_vec0)[r2])"), std::string::npos) << f16;
  std::string transposed = render(*fe::matmul(a, *fe::permute(*fe::buffer(5, DType::Float32, {1024, 8}), {1, 0})));
  EXPECT_EQ(transposed.find("pg_load"), transposed.find("pg_load16(const void")) << transposed;
  std::string offset = render(*fe::matmul(a, *fe::shrink(*fe::buffer(6, DType::Float32, {8, 1028}), {{0, 8}, {1, 1025}})));
  EXPECT_EQ(offset.find("pg_load16(b"), std::string::npos) << offset;
  EXPECT_EQ(offset.find("pg_load8(b"), std::string::npos) << offset;
}

// The device list names CUDA whether or not it can be used, and says why not.
TEST(CudaDevice, ListedWithTheReason) {
  auto engine = Engine::create({.threads = 1});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<DeviceInfo> devices = (*engine)->devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "CPU");
  EXPECT_TRUE(devices[0].available);
  const DeviceInfo& cuda = devices[1];
  EXPECT_EQ(cuda.name, "CUDA");
  EXPECT_FALSE(cuda.detail.empty());
  if (cuda.available) {
    EXPECT_NE(cuda.detail.find("(sm_"), std::string::npos) << cuda.detail;
    EXPECT_NE(cuda.detail.find("NVRTC"), std::string::npos) << cuda.detail;
  } else if (!CudaDriver::get().ok()) {
    EXPECT_EQ(cuda.detail, CudaDriver::get().status().message());
  }
  std::printf("[ info ] CUDA: %s (%s)\n", cuda.available ? "available" : "unavailable", cuda.detail.c_str());
}

}  // namespace
}  // namespace polygrad
