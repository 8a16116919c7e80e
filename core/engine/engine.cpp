#include "core/engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/cache/remote_store.h"
#include "core/engine/cpu_backend.h"
#include "core/engine/engine_impl.h"
#include "core/engine/pipeline.h"
#include "core/engine/placed_realize.h"
#include "core/engine/placement.h"
#include "core/engine/transfers.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cpu/quick_compiler.h"
#include "core/runtime/cuda/discovery.h"

namespace polygrad {
namespace {

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
      }()),
      quick_compile(options.quick_compile && quick_compiler_available()) {
  cpu = make_cpu_backend(*this);
  if (quick_compile) {
    quick_math.start([this](const std::function<bool()>& stopping) -> absl::StatusOr<std::string> {
      if (!compile_slots.acquire(stopping, kSlotPoll)) return absl::CancelledError("stopped");
      auto bytes = compiler.compile(c_math_library_source(), stopping);
      compile_slots.release();
      return bytes;
    });
  }
}

Engine::Impl::~Impl() {
  quick_math.stop();
  cache.stop_background_builds();
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

void Engine::wait_for_quick_math() const { impl_->quick_math.wait(); }

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
  if (options.default_device != kCpuDevice || needs_placement(outputs, bound)) {
    if (options.inline_work_limit > 0) return RealizeResult{.deferred = true};
    return realize_placed(*this, *impl_, outputs, bound, options);
  }
  return realize_on(*impl_, *impl_->cpu, outputs, bound, options);
}

}  // namespace polygrad
