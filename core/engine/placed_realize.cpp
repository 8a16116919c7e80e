#include "core/engine/placed_realize.h"

#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/cuda_backend.h"
#include "core/engine/engine_impl.h"
#include "core/engine/pipeline.h"
#include "core/engine/placement.h"
#include "core/engine/transfers.h"
#include "core/frontend/tensor_ops.h"
#include "core/runtime/cuda/discovery.h"

namespace polygrad {
namespace {

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

absl::StatusOr<RealizeResult> realize_placed(Engine& engine, Engine::Impl& impl, const std::vector<UOpRef>& outputs,
                                             const Bindings& bound, const RealizeOptions& options) {
  // Refuse mixed kernels before any work is done.
  if (auto placed = place(outputs, bound); !placed.ok()) return placed.status();

  RealizeResult result;
  // The parts' stats together; the schedule cache "hit" when every part did.
  bool parts = false;
  auto add_stats = [&](const RealizeStats& s) {
    result.stats.kernels += s.kernels;
    result.stats.compiled += s.compiled;
    result.stats.cache_hits += s.cache_hits;
    result.stats.schedule_cache_hit = (result.stats.schedule_cache_hit || !parts) && s.schedule_cache_hit;
    parts = true;
  };
  // The session's streams, or a set for this realize alone.
  std::shared_ptr<DeviceStreams> streams = options.streams ? options.streams : std::make_shared<DeviceStreams>();
  Bindings b = bound;
  // The devices where each group of nodes runs, once the COPYs below them are bound.
  RealizeOptions on_cpu = options;
  on_cpu.default_device = kCpuDevice;  // the CPU part needs no placement: no recursion back here
  auto run_on = [&](int64_t code, const std::vector<UOpRef>& outs) -> absl::StatusOr<RealizeResult> {
    if (code == kAnyDevice) code = options.default_device;
    if (code == kCpuDevice) return engine.realize(outs, b, on_cpu);
    auto stream = streams->on(code);
    if (!stream.ok()) return stream.status();
    return realize_on(impl, *make_cuda_backend(impl, **stream), outs, b, options);
  };

  // Each transfer in order, sources first: its source is realized where it lives, then copied.
  std::unordered_map<const UOp*, bool> seen;
  std::vector<UOpRef> copies;
  for (const UOpRef& o : outputs) unbound_copies(o, b, seen, copies);
  for (const UOpRef& c : copies) {
    const UOpRef& src = c->src[0];
    auto where = place({src}, b);
    if (!where.ok()) return where.status();
    const int64_t from = where->at(src.get());
    auto r = run_on(from, {src});
    if (!r.ok()) return r.status();
    add_stats(r->stats);
    // A copy back to a source's device: where that source lives (nowhere in particular: stay).
    int64_t to = c->arg_int();
    if (to == frontend::kCopyToSourceDevice) {
      auto target = place({c}, b);
      if (!target.ok()) return target.status();
      to = target->at(c.get());
      if (to == kAnyDevice) to = from == kAnyDevice ? options.default_device : from;
    }
    auto moved = transfer(r->outputs[0], to, *streams);
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
