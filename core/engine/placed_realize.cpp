#include "core/engine/placed_realize.h"

#include <cstring>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/cuda_realize.h"
#include "core/engine/engine_impl.h"
#include "core/engine/placement.h"
#include "core/runtime/cuda/discovery.h"

namespace polygrad {
namespace {

uint64_t address(const BufferPtr& b) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b->data())); }

absl::StatusOr<CudaDevice*> cuda_device(int64_t code) {
  auto dev = CudaDevice::get(static_cast<int>(code - 1));
  if (!dev.ok())
    return absl::FailedPreconditionError(absl::StrCat(device_name(code), " is not available: ", dev.status().message()));
  return dev;
}

// One stream per GPU for the whole realize: transfers and kernels on a device run in order.
class Streams {
 public:
  absl::StatusOr<CudaStream*> on(int64_t code) {
    if (auto it = streams_.find(code); it != streams_.end()) return it->second.get();
    auto dev = cuda_device(code);
    if (!dev.ok()) return dev.status();
    auto s = CudaStream::create(**dev);
    if (!s.ok()) return s.status();
    return streams_.emplace(code, std::move(*s)).first->second.get();
  }

 private:
  std::map<int64_t, std::unique_ptr<CudaStream>> streams_;
};

// `src`'s contents in a new buffer on device `to`.
absl::StatusOr<BufferPtr> transfer(const BufferPtr& src, int64_t to, Streams& streams) {
  auto from = buffer_device_code(*src);
  if (!from.ok()) return from.status();
  if (to == kCpuDevice) {
    if (*from == kCpuDevice) {
      BufferPtr b = Buffer::allocate_host(src->dtype(), src->shape(), Buffer::Fill::None);
      if (!b) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", src->nbytes(), " bytes of host memory"));
      std::memcpy(b->data(), src->data(), src->nbytes());
      return b;
    }
    return host_copy(src);
  }
  auto stream = streams.on(to);
  if (!stream.ok()) return stream.status();
  CudaDevice& dev = (*stream)->device();
  BufferPtr host = src;
  if (*from != kCpuDevice && *from != to) {  // between GPUs: through the host
    auto h = host_copy(src);
    if (!h.ok()) return h.status();
    host = *h;
  }
  auto dst = dev.allocate(src->dtype(), src->shape(), **stream);
  if (!dst.ok()) return dst.status();
  absl::Status s = host->on_host() ? dev.upload(host->data(), address(*dst), host->nbytes(), **stream)
                                   : dev.copy(address(host), address(*dst), host->nbytes(), **stream);
  // Done before `src` can go back to the allocator, where another stream may take it.
  if (s.ok()) s = (*stream)->synchronize();
  if (!s.ok()) return s;
  return dst;
}

// COPY nodes reachable from `outputs` and not yet bound, sources before users.
void unbound_copies(const UOpRef& node, const Bindings& bound, std::unordered_map<const UOp*, bool>& seen,
                    std::vector<UOpRef>& out) {
  // Iterative: graphs can be deep.
  std::vector<std::pair<UOpRef, size_t>> stack{{node, 0}};
  if (!seen.emplace(node.get(), true).second) return;
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (!bound.count(n.get()) && next < n->src.size()) {
      UOpRef s = n->src[next++];
      if (seen.emplace(s.get(), true).second) stack.push_back({s, 0});
      continue;
    }
    if (n->op == Ops::COPY && !bound.count(n.get())) out.push_back(n);
    stack.pop_back();
  }
}

}  // namespace

absl::Status cuda_device_usable(int64_t code) {
  const CudaAvailability& cuda = cuda_availability();
  if (!cuda.available) return absl::FailedPreconditionError(absl::StrCat(device_name(code), " is not available: ", cuda.detail));
  if (code - 1 >= static_cast<int64_t>(cuda.devices.size()))
    return absl::FailedPreconditionError(
        absl::StrCat(device_name(code), " is not available: the driver sees ", cuda.devices.size(), " CUDA device(s)"));
  return absl::OkStatus();
}

absl::StatusOr<BufferPtr> host_copy(const BufferPtr& buffer) {
  if (buffer->on_host()) return buffer;
  auto code = buffer_device_code(*buffer);
  if (!code.ok()) return code.status();
  auto dev = cuda_device(*code);
  if (!dev.ok()) return dev.status();
  auto stream = CudaStream::create(**dev);
  if (!stream.ok()) return stream.status();
  BufferPtr host = Buffer::allocate_host(buffer->dtype(), buffer->shape(), Buffer::Fill::None);
  if (!host) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", buffer->nbytes(), " bytes of host memory"));
  if (absl::Status s = (*dev)->download(address(buffer), host->data(), buffer->nbytes(), **stream); !s.ok()) return s;
  return host;
}

absl::StatusOr<RealizeResult> realize_placed(Engine& engine, Engine::Impl& impl, const std::vector<UOpRef>& outputs,
                                             const Bindings& bound, const RealizeOptions& options) {
  // Refuse mixed kernels before any work is done.
  if (auto placed = place(outputs, bound); !placed.ok()) return placed.status();

  RealizeResult result;
  auto add_stats = [&](const RealizeStats& s) {
    result.stats.kernels += s.kernels;
    result.stats.compiled += s.compiled;
    result.stats.cache_hits += s.cache_hits;
  };
  Streams streams;
  Bindings b = bound;
  // The devices where each group of nodes runs, once the COPYs below them are bound.
  RealizeOptions on_cpu = options;
  on_cpu.default_device = kCpuDevice;  // the CPU part needs no placement: no recursion back here
  auto run_on = [&](int64_t code, const std::vector<UOpRef>& outs) -> absl::StatusOr<RealizeResult> {
    if (code == kAnyDevice) code = options.default_device;
    if (code == kCpuDevice) return engine.realize(outs, b, on_cpu);
    auto stream = streams.on(code);
    if (!stream.ok()) return stream.status();
    return realize_on_cuda(impl, **stream, outs, b, options);
  };

  // Each transfer in order, sources first: its source is realized where it lives, then copied.
  std::unordered_map<const UOp*, bool> seen;
  std::vector<UOpRef> copies;
  for (const UOpRef& o : outputs) unbound_copies(o, b, seen, copies);
  for (const UOpRef& c : copies) {
    const UOpRef& src = c->src[0];
    auto where = place({src}, b);
    if (!where.ok()) return where.status();
    auto r = run_on(where->at(src.get()), {src});
    if (!r.ok()) return r.status();
    add_stats(r->stats);
    auto moved = transfer(r->outputs[0], c->arg_int(), streams);
    if (!moved.ok()) return moved.status();
    b[c.get()] = *moved;  // c is kept alive by `outputs`
  }

  // The outputs, grouped by device.
  auto placed = place(outputs, b);
  if (!placed.ok()) return placed.status();
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < outputs.size(); ++i) {
    int64_t d = placed->at(outputs[i].get());
    groups[d == kAnyDevice ? options.default_device : d].push_back(i);
  }
  result.outputs.resize(outputs.size());
  for (const auto& [code, idx] : groups) {
    std::vector<UOpRef> outs;
    for (size_t i : idx) outs.push_back(outputs[i]);
    auto r = run_on(code, outs);
    if (!r.ok()) return r.status();
    add_stats(r->stats);
    for (size_t j = 0; j < idx.size(); ++j) result.outputs[idx[j]] = r->outputs[j];
  }
  return result;
}

}  // namespace polygrad
