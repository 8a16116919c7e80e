#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/cache/remote_store.h"
#include "core/codegen/linearize.h"
#include "core/engine/engine_impl.h"
#include "core/engine/kernels_for.h"
#include "core/engine/realize_key.h"
#include "core/engine/realize_program.h"
#include "core/engine/placed_realize.h"
#include "core/engine/placement.h"
#include "core/engine/transfers.h"
#include "core/render/c_renderer.h"
#include "core/runtime/concurrent_jobs.h"
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

absl::StatusOr<BufferPtr> allocate_host_buffer(DType dtype, const Shape& shape, Buffer::Fill fill) {
  BufferPtr b = Buffer::allocate_host(dtype, shape, fill);
  if (!b) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", n * static_cast<int64_t>(dtype_itemsize(dtype)),
                                                     " bytes of host memory"));
  }
  return b;
}

Engine::Impl::Impl(EngineOptions opts, CpuCompiler cc)
    : options(std::move(opts)),
      compiler(std::move(cc)),
      cache(options.cache_dir, options.cache_max_bytes, options.cache_signing_key),
      schedules(options.schedule_cache_entries),
      pool(std::max(1u, options.threads ? options.threads : std::thread::hardware_concurrency()) - 1),
      compile_threads(std::clamp(std::thread::hardware_concurrency(), 1u, 1024u)),
      compile_slots(compile_threads),
      dump_kernels([] {
        const char* v = std::getenv("POLYGRAD_DUMP_KERNELS");
        return v != nullptr && *v != '\0' && *v != '0';
      }()) {}

absl::StatusOr<Engine::Impl::KernelSource> Engine::Impl::render(
    const UOpRef& root, const std::function<bool(const UOp*)>& materialized) const {
  auto lowered = lower_to_linear(root, materialized);
  if (!lowered.ok()) return lowered.status();
  auto source = render_c(lowered->linear);
  if (!source.ok()) return source.status();
  if (dump_kernels) std::fprintf(stderr, "polygrad kernel:\n%s\n", source->c_str());
  std::string key = KernelCache::key("CPU", compiler.identity(), *source);
  return KernelSource{*std::move(lowered), *std::move(source), std::move(key)};
}

absl::StatusOr<KernelCache::Found> Engine::Impl::program_for(const KernelSource& k,
                                                             const KernelCache::StopFn& should_stop) {
  return cache.get_or_build(
      k.key,
      [&](const KernelCache::StopFn& abandoned) -> absl::StatusOr<std::string> {
        compile_slots.acquire();
        auto t0 = std::chrono::steady_clock::now();
        auto bytes = compiler.compile(k.source, abandoned);
        compile_slots.release();
        if (observer()) observer()->on_compile(seconds_since(t0), bytes.ok());
        return bytes;
      },
      CpuCompiler::load, should_stop);
}

absl::StatusOr<CompiledSchedule> Engine::Impl::compile(const std::vector<UOpRef>& roots,
                                                       const std::function<bool(const UOp*)>& is_bound,
                                                       const RealizeOptions& options, const char* what,
                                                       RealizeStats& stats) {
  auto sched = create_schedule(roots, is_bound);
  if (!sched.ok()) return sched.status();
  CompiledSchedule out{*std::move(sched), {}};
  auto materialized = [&](const UOp* n) { return out.schedule.materialized.count(n) > 0; };
  const size_t n = out.schedule.items.size();
  std::vector<KernelSource> sources(n);
  std::vector<KernelCache::Found> found(n);
  std::vector<size_t> to_build;  // not in memory: read from disk or compiled, side by side
  for (size_t i = 0; i < n; ++i) {
    const UOpRef& root = out.schedule.items[i].root;
    if (root->numel() == 0) continue;
    auto k = render(root, materialized);
    if (!k.ok()) return k.status();
    sources[i] = *std::move(k);
    if (ProgramPtr p = cache.in_memory(sources[i].key)) found[i] = {std::move(p), CacheResult::MemoryHit};
    else to_build.push_back(i);
  }
  // Checked before any build (even with nothing to build, as a realize always was) and before each.
  auto cancelled = [&] {
    return options.should_stop && options.should_stop() ? absl::CancelledError(absl::StrCat(what, " cancelled before compiling"))
                                                        : absl::OkStatus();
  };
  if (absl::Status s = cancelled(); !s.ok()) return s;
  absl::Status built = run_concurrently(to_build.size(), compile_threads, [&](size_t j) -> absl::Status {
    if (absl::Status s = cancelled(); !s.ok()) return s;
    auto f = program_for(sources[to_build[j]], options.should_stop);
    if (!f.ok()) return f.status();
    found[to_build[j]] = *std::move(f);
    return absl::OkStatus();
  });
  if (!built.ok()) return built;
  for (size_t i = 0; i < n; ++i) {
    if (!found[i].program) {  // no elements: nothing to launch
      out.kernels.push_back(CompiledKernel{nullptr, {out.schedule.items[i].root.get()}, 0, 0});
      continue;
    }
    if (observer()) observer()->on_cache_lookup(found[i].result);
    if (found[i].result == CacheResult::Miss) ++stats.compiled;
    else ++stats.cache_hits;
    const LinearKernel& linear = sources[i].lowered.linear;
    int64_t work = 1;
    for (const UOpRef& u : linear.ops)
      if (u->op == Ops::RANGE) work *= std::max<int64_t>(1, u->src[0]->arg_int());
    out.kernels.push_back(CompiledKernel{std::move(found[i].program), std::move(sources[i].lowered.params),
                                        linear.outer_size, work});
  }
  return out;
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
  std::unique_ptr<RemoteTier> remote;
  if (!options.cache_remote.empty()) {
    if (options.cache_remote_key.empty())
      return absl::InvalidArgumentError("a remote kernel cache needs the secret its entries are signed with");
    auto store = open_remote_store(options.cache_remote, options.cache_remote_timeout);
    if (!store.ok()) return store.status();
    RemoteTierOptions ro;
    ro.breaker = options.cache_remote_breaker;
    ro.read_only = options.cache_remote_read_only;
    remote = std::make_unique<RemoteTier>(*std::move(store), options.cache_remote_key, ro, options.observer);
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(*cc));
  if (remote) impl->cache.set_remote(std::move(remote));
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

size_t Engine::schedule_cache_entries() const { return impl_->schedules.size(); }
absl::Status Engine::check_device(int64_t code) const {
  if (code == kCpuDevice) return absl::OkStatus();
  const std::string name = device_name(code);
  if (!impl_->cuda_enabled) return absl::FailedPreconditionError(absl::StrCat(name, " is not enabled (--devices)"));
  return cuda_device_usable(code);
}

namespace {
// `streams`, or a set for one call when the caller has none.
template <typename F>
auto with_streams(DeviceStreams* streams, F&& f) {
  if (streams) return f(*streams);
  DeviceStreams own;
  return f(own);
}
}  // namespace

absl::StatusOr<BufferPtr> Engine::to_host(const BufferPtr& buffer, DeviceStreams* streams) const {
  return with_streams(streams, [&](DeviceStreams& s) { return host_copy(buffer, s); });
}

absl::StatusOr<BufferPtr> Engine::clone(const BufferPtr& buffer, DeviceStreams* streams) const {
  auto code = buffer_device_code(*buffer);
  if (!code.ok()) return code.status();
  return with_streams(streams, [&](DeviceStreams& s) { return transfer(buffer, *code, s); });
}

absl::Status Engine::write(Buffer& dst, const void* from, size_t bytes, DeviceStreams* streams) const {
  return with_streams(streams, [&](DeviceStreams& s) { return write_bytes(dst, from, bytes, s); });
}

absl::Status Engine::copy(Buffer& dst, const Buffer& src, DeviceStreams* streams) const {
  return with_streams(streams, [&](DeviceStreams& s) { return copy_contents(dst, src, s); });
}

absl::StatusOr<BufferPtr> Engine::allocate(DType dtype, Shape shape, Buffer::Fill fill) {
  return allocate_host_buffer(dtype, shape, fill);
}

absl::StatusOr<RealizeResult> Engine::realize(const std::vector<UOpRef>& outputs, const Bindings& bound,
                                              const RealizeOptions& options) {
  // Transfers or device buffers: placed_realize.cpp splits the work by device (and calls back
  // here for the CPU part, which then needs no placement).
  if (options.default_device != kCpuDevice || needs_placement(outputs, bound))
    return realize_placed(*this, *impl_, outputs, bound, options);
  ScheduleCache& schedules = impl_->schedules;
  RealizeKey key;
  if (schedules.enabled()) {
    key = realize_key(outputs, bound);
    std::shared_ptr<const RealizeProgram> cached = schedules.find(key);
    if (impl_->observer()) impl_->observer()->on_schedule_cache_lookup(cached != nullptr);
    if (cached) {
      absl::StatusOr<RealizeResult> result = run_program(*impl_, *cached, std::move(key.leaf_buffers), options);
      if (result.ok()) {
        result->stats.schedule_cache_hit = true;
        result->stats.cache_hits = result->stats.kernels;
      }
      return result;
    }
  }

  RealizeStats build_stats;
  auto compiled = impl_->compile(outputs, [&](const UOp* n) { return bound.count(n) > 0; }, options, "realize", build_stats);
  if (!compiled.ok()) return compiled.status();
  std::vector<BufferPtr> leaf_buffers = std::move(key.leaf_buffers);
  auto program = make_program(compiled->schedule, std::move(compiled->kernels), key.leaves, bound, leaf_buffers);
  if (!program.ok()) return program.status();
  auto shared = std::make_shared<const RealizeProgram>(*std::move(program));
  // The graph may die once scheduling is done: the program keeps no node, only slots.
  if (shared->cacheable) schedules.insert(key, shared);
  absl::StatusOr<RealizeResult> result = run_program(*impl_, *shared, std::move(leaf_buffers), options);
  if (result.ok()) {
    result->stats.compiled = build_stats.compiled;
    result->stats.cache_hits = build_stats.cache_hits;
  }
  return result;
}

}  // namespace polygrad
