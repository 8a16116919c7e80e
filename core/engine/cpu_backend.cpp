#include "core/engine/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine_impl.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cpu/quick_compiler.h"

namespace polygrad {
namespace {

// Below this much work per launch, threads cost more than they save.
constexpr int64_t kParallelThreshold = 1 << 15;
// Chunks per pool thread: threads claim chunks as they free up, so one that starts late (an idle
// vCPU is slow to wake) or shares its core with the client takes fewer instead of holding up
// the launch. Beyond one per thread, no chunk gets less than kParallelThreshold of work.
constexpr int64_t kChunksPerThread = 4;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(Engine::Impl& impl)
      : impl_(impl), caps_{.tiles = impl.compiler.wide_vectors() ? kWideTiles : TileLimits{}} {}

  const std::string& name() const override { return name_; }
  const CodegenCaps& caps() const override { return caps_; }

  absl::StatusOr<RenderedKernel> render(const LinearKernel& kernel) const override {
    const CRenderOptions options = cpu_render_options(kernel);
    auto source = render_c(kernel, options);
    if (!source.ok()) return source.status();
    if (impl_.dump_kernels) std::fprintf(stderr, "polygrad kernel:\n%s\n", source->c_str());
    std::string key = KernelCache::key("CPU", impl_.compiler.identity(), *source);
    const bool quick = impl_.quick_compile && !options.fused_multiply_add &&
                       loop_iterations(kernel) <= kQuickTierMaxIterations &&
                       quick_tier_eligible(kernel, *source, impl_.compiler.uses_vector_math());
    return RenderedKernel{*std::move(source), std::move(key), kernel.params.size(), 1, quick};
  }

  ProgramPtr cached(const RenderedKernel& k) const override { return impl_.cache.in_memory(k.key); }

  absl::StatusOr<KernelCache::Found> build(const RenderedKernel& k, const KernelCache::StopFn& should_stop) override {
    // Owns its source: with the quick tier it runs in the background after this call returns.
    // `impl_` outlives it (Engine::Impl's destructor stops the background builds first).
    auto compile = [&impl = impl_, source = k.source](const KernelCache::StopFn& abandoned) -> absl::StatusOr<std::string> {
      // A slot is waited for the way the compiler runs: given up once nobody wants the result.
      if (!impl.compile_slots.acquire(abandoned, kSlotPoll))
        return absl::CancelledError("abandoned while waiting for a compile slot");
      auto t0 = std::chrono::steady_clock::now();
      auto bytes = impl.compiler.compile(source, abandoned);
      impl.compile_slots.release();
      if (impl.observer()) impl.observer()->on_compile(seconds_since(t0), bytes.ok());
      return bytes;
    };
    KernelCache::QuickBuild quick;
    if (k.quick_eligible)
      quick = [&k, math = impl_.quick_math.get()] { return quick_compile(k.source, math); };  // runs within this call
    return impl_.cache.get_or_build(k.key, compile, CpuCompiler::load, should_stop, quick);
  }

  absl::StatusOr<BufferPtr> allocate(DType dtype, const Shape& shape, Buffer::Fill fill) override {
    return allocate_host_buffer(dtype, shape, fill);
  }
  absl::Status copy(const void* from, void* to, size_t bytes) override {
    std::memcpy(to, from, bytes);
    return absl::OkStatus();
  }

  absl::Status launch(const CompiledKernel& k, void* const* bufs, size_t) override {
    auto t0 = std::chrono::steady_clock::now();
    const int64_t n = k.outer_size, threads = impl_.pool.size();
    const int64_t chunks =
        k.work >= kParallelThreshold && n > 1
            ? std::min({n, threads * kChunksPerThread, std::max(threads, k.work / kParallelThreshold)})
            : 1;
    void** args = const_cast<void**>(bufs);
    absl::Status status;
    if (chunks == 1) {
      status = k.program->launch(args, 0, n);
    } else {
      std::mutex mu;  // chunks fail on several threads; the first failure is the one reported
      impl_.pool.parallel_for(chunks, [&](int64_t c) {
        absl::Status s = k.program->launch(args, n * c / chunks, n * (c + 1) / chunks);
        if (s.ok()) return;
        std::lock_guard lock(mu);
        if (status.ok()) status = std::move(s);
      });
    }
    if (status.ok() && impl_.observer()) impl_.observer()->on_kernel(seconds_since(t0));
    return status;
  }
  // Launches return when their kernel has run.
  absl::Status synchronize() override { return absl::OkStatus(); }

 private:
  Engine::Impl& impl_;
  const std::string name_ = "CPU";
  const CodegenCaps caps_;
};

}  // namespace

// A 3x3 conv 4x64x56x56 on one AVX-512 core: 9 ms fused against 15 with separate multiply and
// add (C harness, clang 14); matmul likewise does two operations per vector in one instruction.
// The bench MLP step's x @ W1.T (128 x 784 x 256, 2^24.6 iterations) took 0.45 ms unfused and
// 0.36 fused on two AMD EPYC AVX-512 cores (build/core_step_bench --profile). Below 2^22
// iterations TinyCC's code runs in under ~10 ms, well before clang has built the kernel, so
// small reductions keep their quick build and their two roundings.
CRenderOptions cpu_render_options(const LinearKernel& kernel) {
  return {.fused_multiply_add =
              loop_iterations(kernel) >= kFusedMultiplyAddMinIterations && !kernel.upcast_ranges.empty()};
}

std::unique_ptr<Backend> make_cpu_backend(Engine::Impl& impl) { return std::make_unique<CpuBackend>(impl); }

}  // namespace polygrad
