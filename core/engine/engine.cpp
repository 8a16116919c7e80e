#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/codegen/linearize.h"
#include "core/engine/engine_impl.h"
#include "core/engine/kernels_for.h"
#include "core/engine/placed_realize.h"
#include "core/engine/placement.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cuda/discovery.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

// Below this much work per launch, threads cost more than they save.
constexpr int64_t kParallelThreshold = 1 << 15;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether CUDA is enabled by `names` (empty: whenever it exists); FAILED_PRECONDITION naming the
// device and the reason when a listed device cannot be used.
absl::StatusOr<bool> enabled_devices(const std::vector<std::string>& names) {
  if (names.empty()) return true;
  bool cuda = false;
  for (const std::string& n : names) {
    auto code = device_code(n);
    if (!code.ok()) return absl::InvalidArgumentError(absl::StrCat("device \"", n, "\": ", code.status().message()));
    if (*code == kCpuDevice) continue;
    if (absl::Status s = cuda_device_usable(*code); !s.ok()) return s;
    cuda = true;
  }
  return cuda;
}

}  // namespace

Engine::Impl::Impl(EngineOptions opts, CpuCompiler cc)
    : options(std::move(opts)),
      compiler(std::move(cc)),
      cache(options.cache_dir, options.cache_max_bytes),
      pool(std::max(1u, options.threads ? options.threads : std::thread::hardware_concurrency()) - 1),
      dump_kernels([] {
        const char* v = std::getenv("POLYGRAD_DUMP_KERNELS");
        return v != nullptr && *v != '\0' && *v != '0';
      }()) {}

absl::StatusOr<CompiledKernel> Engine::Impl::build(const UOpRef& root,
                                                   const std::function<bool(const UOp*)>& materialized,
                                                   RealizeStats& stats) {
  auto lowered = lower_to_linear(root, materialized);
  if (!lowered.ok()) return lowered.status();
  const LinearKernel& linear = lowered->linear;
  auto source = render_c(linear);
  if (!source.ok()) return source.status();
  if (dump_kernels) std::fprintf(stderr, "polygrad kernel:\n%s\n", source->c_str());
  std::string key = KernelCache::key("CPU", compiler.identity(), *source);
  auto found = cache.get_or_build(
      key,
      [&]() -> absl::StatusOr<std::string> {
        auto t0 = std::chrono::steady_clock::now();
        auto bytes = compiler.compile(*source);
        if (observer()) observer()->on_compile(seconds_since(t0), bytes.ok());
        return bytes;
      },
      CpuCompiler::load);
  if (!found.ok()) return found.status();
  if (observer()) observer()->on_cache_lookup(found->result);
  if (found->result == CacheResult::Miss) ++stats.compiled;
  else ++stats.cache_hits;
  int64_t work = 1;
  for (const UOpRef& u : linear.ops)
    if (u->op == Ops::RANGE) work *= std::max<int64_t>(1, u->src[0]->arg_int());
  return CompiledKernel{found->program, lowered->params, linear.outer_size, work};
}

void Engine::Impl::launch(const CompiledKernel& k, void* const* bufs) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t n = k.outer_size;
  int64_t chunks = (k.work >= kParallelThreshold && n > 1) ? std::min<int64_t>(n, pool.size()) : 1;
  void** args = const_cast<void**>(bufs);
  if (chunks == 1) {
    k.program->launch(args, 0, n);
  } else {
    pool.parallel_for(chunks, [&](int64_t c) {
      int64_t start = n * c / chunks, end = n * (c + 1) / chunks;
      k.program->launch(args, start, end);
    });
  }
  if (observer()) observer()->on_kernel(seconds_since(t0));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::create(EngineOptions options) {
  auto cc = CpuCompiler::find(options.compiler, options.compile_timeout);
  if (!cc.ok()) return cc.status();
  auto enabled = enabled_devices(options.devices);
  if (!enabled.ok()) return enabled.status();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(*cc));
  impl->cuda_enabled = *enabled;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

KernelCache& Engine::kernel_cache() { return impl_->cache; }

std::vector<DeviceInfo> Engine::devices() const {
  // CUDA is listed even when absent or not enabled, saying why.
  const CudaAvailability& cuda = cuda_availability();
  if (!impl_->cuda_enabled)
    return {DeviceInfo{"CPU", true, impl_->compiler.version_line()},
            DeviceInfo{"CUDA", false, absl::StrCat("not enabled (--devices); ", cuda.detail)}};
  return {DeviceInfo{"CPU", true, impl_->compiler.version_line()}, DeviceInfo{"CUDA", cuda.available, cuda.detail}};
}

absl::Status Engine::check_device(int64_t code) const {
  if (code == kCpuDevice) return absl::OkStatus();
  const std::string name = device_name(code);
  if (!impl_->cuda_enabled) return absl::FailedPreconditionError(absl::StrCat(name, " is not enabled (--devices)"));
  return cuda_device_usable(code);
}

absl::StatusOr<BufferPtr> Engine::to_host(const BufferPtr& buffer) const { return host_copy(buffer); }

absl::StatusOr<BufferPtr> Engine::allocate(DType dtype, Shape shape, Buffer::Fill fill) {
  BufferPtr b = Buffer::allocate_host(dtype, shape, fill);
  if (!b) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", n * static_cast<int64_t>(dtype_itemsize(dtype)),
                                                     " bytes of host memory"));
  }
  return b;
}

absl::StatusOr<RealizeResult> Engine::realize(const std::vector<UOpRef>& outputs, const Bindings& bound,
                                              const RealizeOptions& options) {
  // Transfers or device buffers: placed_realize.cpp splits the work by device (and calls back
  // here for the CPU part, which then needs no placement).
  if (options.default_device != kCpuDevice || needs_placement(outputs, bound))
    return realize_placed(*this, *impl_, outputs, bound, options);
  auto is_bound = [&](const UOp* n) { return bound.count(n) > 0; };
  auto sched = create_schedule(outputs, is_bound);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  auto stopped = [&] { return options.should_stop && options.should_stop(); };

  RealizeResult result;
  std::vector<CompiledKernel> kernels;
  for (const ScheduleItem& item : sched->items) {
    if (stopped()) return absl::CancelledError("realize cancelled before compiling");
    if (item.root->numel() == 0) {
      kernels.push_back(CompiledKernel{nullptr, {item.root.get()}, 0, 0});
      continue;
    }
    auto k = impl_->build(item.root, materialized, result.stats);
    if (!k.ok()) return k.status();
    kernels.push_back(std::move(*k));
  }

  // Buffers of this realize: bound inputs, then each kernel's output. An intermediate is freed
  // after its last reader runs.
  std::unordered_map<const UOp*, BufferPtr> buffers;
  for (const auto& [node, buf] : bound) buffers.emplace(node, buf);
  std::unordered_map<const UOp*, size_t> last_use;
  for (size_t i = 0; i < kernels.size(); ++i)
    for (const UOp* p : kernels[i].params) last_use[p] = i;
  std::unordered_set<const UOp*> keep;
  for (const UOpRef& o : sched->outputs) keep.insert(o.get());

  for (size_t i = 0; i < kernels.size(); ++i) {
    if (stopped()) return absl::CancelledError("realize cancelled between kernels");
    const CompiledKernel& k = kernels[i];
    const UOp* out = k.params[0];
    auto buf = allocate(out->dtype, out->shape);
    if (!buf.ok()) return buf.status();
    buffers[out] = *buf;
    if (k.program) {
      std::vector<void*> ptrs;
      for (const UOp* p : k.params) ptrs.push_back(buffers.at(p)->data());
      impl_->launch(k, ptrs.data());
      ++result.stats.kernels;
    }
    for (const UOp* p : k.params)
      if (last_use[p] == i && !keep.count(p) && !bound.count(p)) buffers.erase(p);
  }
  for (const UOpRef& o : sched->outputs) result.outputs.push_back(buffers.at(o.get()));
  return result;
}

}  // namespace polygrad
