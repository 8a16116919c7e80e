#include "core/engine/cuda_backend.h"

#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine_impl.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/cubin.h"
#include "core/runtime/cuda/nvrtc.h"

namespace polygrad {
namespace {

uint64_t address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

class CudaBackend final : public Backend {
 public:
  CudaBackend(Engine::Impl& impl, CudaStream& stream) : impl_(impl), stream_(stream), dev_(stream.device()) {}

  const std::string& name() const override { return dev_.name(); }
  const CodegenCaps& caps() const override { return caps_; }

  absl::StatusOr<RenderedKernel> render(const LinearKernel& kernel) const override {
    auto nvrtc = Nvrtc::get();
    if (!nvrtc.ok()) return nvrtc.status();
    auto source = render_cuda(kernel);
    if (!source.ok()) return source.status();
    if (impl_.dump_kernels) std::fprintf(stderr, "polygrad CUDA kernel:\n%s\n", source->c_str());
    // A loaded module belongs to one GPU's context, and the cache's memory tier holds loaded
    // programs: a second GPU gets keys of its own (and so compiles its own CUBINs).
    std::string scoped = dev_.props().ordinal == 0 ? *std::move(source) : absl::StrCat("// ", dev_.name(), "\n", *source);
    std::string key = cubin_cache_key(scoped, dev_.props().arch(), (*nvrtc)->version());
    return RenderedKernel{std::move(scoped), std::move(key), kernel.params.size(), cuda_threads_per_iteration(kernel)};
  }

  ProgramPtr cached(const RenderedKernel& k) const override { return impl_.cache.in_memory(k.key); }

  // NVRTC compiles in this process and cannot be interrupted: `should_stop` is checked between
  // kernels only.
  absl::StatusOr<KernelCache::Found> build(const RenderedKernel& k, const KernelCache::StopFn&) override {
    auto nvrtc = Nvrtc::get();
    if (!nvrtc.ok()) return nvrtc.status();
    return cubin_from_cache(
        impl_.cache, **nvrtc, k.source, dev_.props().arch(),
        [&](const std::string& cubin) { return dev_.load(cubin, k.nparams); },
        [&](double seconds, bool ok) {
          if (impl_.observer()) impl_.observer()->on_compile(seconds, ok);
        });
  }

  absl::StatusOr<BufferPtr> allocate(DType dtype, const Shape& shape, Buffer::Fill fill) override {
    return dev_.allocate(dtype, shape, stream_, fill);
  }
  absl::Status copy(const void* from, void* to, size_t bytes) override {
    return dev_.copy(address(from), address(to), bytes, stream_);
  }

  absl::Status launch(const CompiledKernel& k, void* const* args, size_t nargs) override {
    if (impl_.observer()) {
      auto t = CudaDevice::Timer::start(stream_);
      if (!t.ok()) return t.status();
      timers_.push_back(std::move(*t));
    }
    const auto& program = static_cast<const CudaProgram&>(*k.program);
    if (absl::Status s = program.run(stream_, args, nargs, k.outer_size, k.threads_per_iteration); !s.ok()) return s;
    return impl_.observer() ? timers_.back()->record_end() : absl::OkStatus();
  }

  absl::Status synchronize() override {
    absl::Status s = stream_.synchronize();
    std::vector<std::unique_ptr<CudaDevice::Timer>> timers = std::move(timers_);
    timers_.clear();
    if (!s.ok()) return s;
    for (const auto& t : timers) {
      auto secs = t->seconds();
      if (!secs.ok()) return secs.status();
      impl_.observer()->on_device_kernel(dev_.name(), *secs);
    }
    return absl::OkStatus();
  }

  bool reuses_intermediates() const override { return true; }

 private:
  Engine::Impl& impl_;
  CudaStream& stream_;
  CudaDevice& dev_;
  const CodegenCaps caps_ = kCudaCaps;
  std::vector<std::unique_ptr<CudaDevice::Timer>> timers_;  // launches since the last synchronize
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(Engine::Impl& impl, CudaStream& stream) {
  return std::make_unique<CudaBackend>(impl, stream);
}

}  // namespace polygrad
