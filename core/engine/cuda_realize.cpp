#include "core/engine/cuda_realize.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine_impl.h"
#include "core/engine/kernels_for.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/cubin.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

struct CudaKernel {
  std::shared_ptr<const CudaProgram> program;  // null: no elements, nothing to launch
  std::vector<const UOp*> params;
  int64_t outer_size = 0;
};

absl::StatusOr<CudaKernel> build(Engine::Impl& impl, CudaDevice& dev, const UOpRef& root,
                                 const std::function<bool(const UOp*)>& materialized, RealizeStats& stats) {
  auto nvrtc = Nvrtc::get();
  if (!nvrtc.ok()) return nvrtc.status();
  auto lowered = lower_to_linear(root, materialized);
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
                    lowered->linear.outer_size};
}

}  // namespace

absl::StatusOr<RealizeResult> realize_on_cuda(Engine::Impl& impl, CudaStream& stream, const std::vector<UOpRef>& outputs,
                                              const Bindings& bound, const RealizeOptions& options) {
  CudaDevice& dev = stream.device();
  auto is_bound = [&](const UOp* n) { return bound.count(n) > 0; };
  auto sched = create_schedule(outputs, is_bound);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  auto stopped = [&] { return options.should_stop && options.should_stop(); };

  RealizeResult result;
  std::vector<CudaKernel> kernels;
  for (const ScheduleItem& item : sched->items) {
    if (stopped()) return absl::CancelledError("realize cancelled before compiling");
    if (item.root->numel() == 0) {
      kernels.push_back(CudaKernel{nullptr, {item.root.get()}, 0});
      continue;
    }
    auto k = build(impl, dev, item.root, materialized, result.stats);
    if (!k.ok()) return k.status();
    kernels.push_back(std::move(*k));
  }

  std::unordered_map<const UOp*, BufferPtr> buffers;
  std::vector<BufferPtr> retired;
  // Destroyed before the two above (reverse order of declaration): on any return, queued work has
  // finished before their blocks go back to the allocator.
  struct SyncOnExit {
    CudaStream& stream;
    ~SyncOnExit() { (void)stream.synchronize(); }
  } sync_on_exit{stream};
  for (const auto& [node, buf] : bound) buffers.emplace(node, buf);
  std::unordered_map<const UOp*, size_t> last_use;
  for (size_t i = 0; i < kernels.size(); ++i)
    for (const UOp* p : kernels[i].params) last_use[p] = i;
  std::unordered_set<const UOp*> keep;
  for (const UOpRef& o : sched->outputs) keep.insert(o.get());

  for (size_t i = 0; i < kernels.size(); ++i) {
    if (stopped()) return absl::CancelledError("realize cancelled between kernels");
    const CudaKernel& k = kernels[i];
    const UOp* out = k.params[0];
    auto buf = dev.allocate(out->dtype, out->shape, stream);
    if (!buf.ok()) return buf.status();
    buffers[out] = *buf;
    if (k.program) {
      std::vector<const void*> ptrs;
      for (const UOp* p : k.params) {
        const BufferPtr& b = buffers.at(p);
        if (b->device() != dev.name())  // placement keeps this from happening; never launch on it
          return absl::InternalError(absl::StrCat("a ", dev.name(), " kernel was given a ", b->device(), " buffer"));
        ptrs.push_back(b->data());
      }
      std::unique_ptr<CudaDevice::Timer> timer;
      if (impl.observer()) {
        auto t = CudaDevice::Timer::start(stream);
        if (!t.ok()) return t.status();
        timer = std::move(*t);
      }
      if (absl::Status s = k.program->run(stream, ptrs.data(), ptrs.size(), k.outer_size); !s.ok()) return s;
      if (timer) {
        auto secs = timer->stop();
        if (!secs.ok()) return secs.status();
        impl.observer()->on_device_kernel(dev.name(), *secs);
      }
      ++result.stats.kernels;
    }
    // Intermediates read for the last time are kept until the stream has finished: the
    // allocator is shared with other sessions' streams, which must not get a block this stream's
    // queued kernels still read.
    for (const UOp* p : k.params)
      if (last_use[p] == i && !keep.count(p) && !bound.count(p)) {
        retired.push_back(std::move(buffers.at(p)));
        buffers.erase(p);
      }
  }
  if (absl::Status s = stream.synchronize(); !s.ok()) return s;
  retired.clear();
  for (const UOpRef& o : sched->outputs) result.outputs.push_back(buffers.at(o.get()));
  return result;
}

}  // namespace polygrad
