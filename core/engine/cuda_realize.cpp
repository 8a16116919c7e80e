#include "core/engine/cuda_realize.h"


#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine_impl.h"
#include "core/engine/kernels_for.h"
#include "core/engine/realize_key.h"
#include "core/engine/realize_program.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/cubin.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

absl::StatusOr<CudaKernel> build(Engine::Impl& impl, CudaDevice& dev, const UOpRef& root,
                                 const std::function<bool(const UOp*)>& materialized, RealizeStats& stats) {
  auto nvrtc = Nvrtc::get();
  if (!nvrtc.ok()) return nvrtc.status();
  auto lowered = lower_for_cuda(root, materialized);
  if (!lowered.ok()) return lowered.status();
  auto source = render_cuda(lowered->linear);
  if (!source.ok()) return source.status();
  if (impl.dump_kernels) std::fprintf(stderr, "polygrad CUDA kernel:\n%s\n", source->c_str());
  // A loaded module belongs to one GPU's context, and the cache's memory tier holds loaded
  // programs: a second GPU gets keys of its own (and so compiles its own CUBINs).
  const std::string scoped = dev.props().ordinal == 0 ? *source : absl::StrCat("// ", dev.name(), "\n", *source);
  const size_t nparams = lowered->params.size();
  auto found = cubin_from_cache(
      impl.cache, **nvrtc, scoped, dev.props().arch(),
      [&](const std::string& cubin) { return dev.load(cubin, nparams); },
      [&](double seconds, bool ok) {
        if (impl.observer()) impl.observer()->on_compile(seconds, ok);
      });
  if (!found.ok()) return found.status();
  if (impl.observer()) impl.observer()->on_cache_lookup(found->result);
  if (found->result == CacheResult::Miss) ++stats.compiled;
  else ++stats.cache_hits;
  return CudaKernel{std::static_pointer_cast<const CudaProgram>(found->program), lowered->params,
                    lowered->linear.outer_size, cuda_threads_per_iteration(lowered->linear)};
}

}  // namespace

absl::StatusOr<CudaSchedule> compile_for_cuda(Engine::Impl& impl, CudaDevice& dev, const std::vector<UOpRef>& roots,
                                              const std::function<bool(const UOp*)>& is_bound,
                                              const RealizeOptions& options, const char* what, RealizeStats& stats) {
  auto sched = create_schedule(roots, is_bound);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  CudaSchedule out;
  for (const ScheduleItem& item : sched->items) {
    if (options.should_stop && options.should_stop())
      return absl::CancelledError(absl::StrCat(what, " cancelled before compiling"));
    if (item.root->numel() == 0) {
      out.kernels.push_back(CudaKernel{nullptr, {item.root.get()}, 0});
      continue;
    }
    auto k = build(impl, dev, item.root, materialized, stats);
    if (!k.ok()) return k.status();
    out.kernels.push_back(std::move(*k));
  }
  out.schedule = *std::move(sched);
  return out;
}

absl::Status KernelTimes::launch(const CudaKernel& k, const void* const* args, size_t nargs) {
  if (impl_.observer()) {
    auto t = CudaDevice::Timer::start(stream_);
    if (!t.ok()) return t.status();
    timers_.push_back(std::move(*t));
  }
  if (absl::Status s = k.program->run(stream_, args, nargs, k.outer_size, k.threads_per_iteration); !s.ok()) return s;
  return impl_.observer() ? timers_.back()->record_end() : absl::OkStatus();
}

absl::Status KernelTimes::report() {
  for (const auto& t : timers_) {
    auto secs = t->seconds();
    if (!secs.ok()) return secs.status();
    impl_.observer()->on_device_kernel(stream_.device().name(), *secs);
  }
  timers_.clear();
  return absl::OkStatus();
}

absl::StatusOr<RealizeResult> realize_on_cuda(Engine::Impl& impl, CudaStream& stream, const std::vector<UOpRef>& outputs,
                                              const Bindings& bound, const RealizeOptions& options) {
  CudaDevice& dev = stream.device();
  // As on the CPU (engine.cpp): the same structure on the same GPU reuses its program.
  ScheduleCache& schedules = impl.schedules;
  RealizeKey key;
  if (schedules.enabled()) {
    key = realize_key(outputs, bound, dev.name());
    std::shared_ptr<const RealizeProgram> cached = schedules.find(key);
    if (impl.observer()) impl.observer()->on_schedule_cache_lookup(cached != nullptr);
    if (cached) {
      auto result = run_program(impl, *cached, std::move(key.leaf_buffers), options, &stream);
      if (result.ok()) {
        result->stats.schedule_cache_hit = true;
        result->stats.cache_hits = result->stats.kernels;
      }
      return result;
    }
  }
  RealizeStats build_stats;
  auto compiled = compile_for_cuda(impl, dev, outputs, [&](const UOp* n) { return bound.count(n) > 0; }, options,
                                   "realize", build_stats);
  if (!compiled.ok()) return compiled.status();
  std::vector<BufferPtr> leaf_buffers = std::move(key.leaf_buffers);
  auto program = make_program(compiled->schedule, std::move(compiled->kernels), key.leaves, bound, leaf_buffers);
  if (!program.ok()) return program.status();
  auto shared = std::make_shared<const RealizeProgram>(*std::move(program));
  if (shared->cacheable && schedules.enabled()) schedules.insert(key, shared);
  auto result = run_program(impl, *shared, std::move(leaf_buffers), options, &stream);
  if (result.ok()) {
    result->stats.compiled = build_stats.compiled;
    result->stats.cache_hits = build_stats.cache_hits;
  }
  return result;
}

}  // namespace polygrad
