#include "core/engine/step_program.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/schedule/buffer_arena.h"
#include "core/engine/cuda_backend.h"
#include "core/engine/device_streams.h"
#include "core/engine/engine_impl.h"
#include "core/engine/pipeline.h"
#include "core/engine/placement.h"
#include "core/engine/transfers.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

std::string describe(DType dtype, const Shape& shape) {
  return absl::StrCat(dtype_name(dtype), "[", absl::StrJoin(shape, ","), "]");
}

// Where a step runs: the one device of every node it computes (constants and random numbers
// alone: the default device), and its COPY nodes, each of which must read a tensor with a buffer
// (a transfer before every run). A COPY of a computed value, or kernels on two devices, is
// UNIMPLEMENTED: a compiled step has one stream and one allocator.
struct StepPlace {
  int64_t device = kCpuDevice;
  std::vector<const UOp*> copies;
};

absl::StatusOr<StepPlace> step_place(const std::vector<UOpRef>& roots, const Bindings& bound,
                                     const RealizeOptions& options) {
  if (options.default_device == kCpuDevice && !needs_placement(roots, bound)) return StepPlace{};
  auto placed = place(roots, bound);
  if (!placed.ok()) return placed.status();
  StepPlace out;
  int64_t device = kAnyDevice;
  const UOp* first = nullptr;
  for (const auto& [node, code] : *placed) {
    if (bound.count(node)) continue;  // read where it is (a kernel's sources share its device)
    if (node->op == Ops::COPY) {
      if (!bound.count(node->src[0].get()))
        return absl::UnimplementedError(absl::StrCat(
            "compiled steps move only tensors that have a buffer between devices: node ", describe_node(*node),
            " copies a computed ", describe_node(*node->src[0]), " to ", device_name(code),
            "; realize it before compiling, or compute it on ", device_name(code)));
      out.copies.push_back(node);
    }
    if (code == kAnyDevice || code == device) continue;
    if (device != kAnyDevice)
      return absl::UnimplementedError(absl::StrCat("a compiled step runs on one device: node ", describe_node(*first),
                                                   " is on ", device_name(device), " and node ", describe_node(*node),
                                                   " on ", device_name(code)));
    device = code;
    first = node;
  }
  out.device = device == kAnyDevice ? options.default_device : device;
  return out;
}

// An extent (a 0-d int32 expression of bound buffers and constants, core/ir/symbolic_dims.h) as a
// function that reads its buffers when called.
absl::StatusOr<std::function<int64_t()>> extent_reader(const UOp& e, const Bindings& bound) {
  switch (e.op) {
    case Ops::CONST: {
      const int64_t v = e.arg_int();
      return std::function<int64_t()>([v] { return v; });
    }
    case Ops::BUFFER: {
      auto it = bound.find(&e);
      if (it == bound.end() || it->second->device() != "CPU")
        return absl::InternalError("a symbolic dim's extent is not a host buffer of the step");
      BufferPtr buf = it->second;
      return std::function<int64_t()>([buf] {
        int32_t v;
        std::memcpy(&v, buf->data(), sizeof v);
        return int64_t{v};
      });
    }
    case Ops::ADD:
    case Ops::MUL: {
      auto a = extent_reader(*e.src[0], bound);
      if (!a.ok()) return a.status();
      auto b = extent_reader(*e.src[1], bound);
      if (!b.ok()) return b.status();
      const bool add = e.op == Ops::ADD;
      return std::function<int64_t()>([a = *std::move(a), b = *std::move(b), add] { return add ? a() + b() : a() * b(); });
    }
    default:
      return absl::InternalError(absl::StrCat("a symbolic dim's extent computed by ", op_name(e.op)));
  }
}

}  // namespace

struct StepProgram::Launch {
  CompiledKernel kernel;
  std::vector<void*> args;
};

StepProgram::~StepProgram() = default;

absl::StatusOr<std::shared_ptr<const StepProgram::Copy::Prefix>> StepProgram::valid_prefix(const UOp& value,
                                                                                           const Bindings& bound, size_t i) {
  std::vector<size_t> marked;
  for (size_t a = 0; a < value.extents.size(); ++a)
    if (value.extents[a]) marked.push_back(a);
  if (marked.size() != 1)
    return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": a value with ", marked.size(),
                                                   " symbolic dims (one is written as its valid part)"));
  const size_t axis = marked[0];
  absl::StatusOr<std::function<int64_t()>> extent = extent_reader(*value.extents[axis], bound);
  if (!extent.ok()) return extent.status();
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= value.shape[a];
  for (size_t a = axis + 1; a < value.shape.size(); ++a) inner *= value.shape[a];
  return std::make_shared<const StepProgram::Copy::Prefix>(StepProgram::Copy::Prefix{
      outer, value.shape[axis], static_cast<size_t>(inner) * dtype_itemsize(value.dtype), *std::move(extent)});
}

absl::StatusOr<std::shared_ptr<const StepProgram::Copy::Box>> StepProgram::region_box(const StepAssign& a,
                                                                                       const Bindings& bound, size_t i) {
  const StepRegion& r = *a.region;
  const std::vector<int64_t>& shape = a.target->shape();
  const size_t rank = shape.size();
  if (r.begin.size() != rank || r.count.size() != rank || r.part->shape != r.count || r.part->dtype != a.target->dtype() ||
      r.dynamic_axis < -1 || r.dynamic_axis >= static_cast<int64_t>(rank) || (r.dynamic_axis >= 0) != bool(r.dynamic_begin))
    return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": its region does not describe a box of the target"));
  for (size_t d = 0; d < rank; ++d)
    if (r.count[d] < 0 || r.count[d] > shape[d] ||
        (static_cast<int64_t>(d) != r.dynamic_axis && (r.begin[d] < 0 || r.begin[d] + r.count[d] > shape[d])))
      return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": its region's axis ", d, " does not fit the target"));
  auto box = std::make_shared<Copy::Box>(Copy::Box{shape, r.begin, r.count, dtype_itemsize(a.target->dtype()), r.dynamic_axis, {}});
  if (r.dynamic_axis >= 0) {
    absl::StatusOr<std::function<int64_t()>> at = extent_reader(*r.dynamic_begin, bound);
    if (!at.ok()) return at.status();
    box->dynamic_begin = *std::move(at);
  }
  return std::shared_ptr<const Copy::Box>(std::move(box));
}

absl::Status StepProgram::copy_box(Backend& backend, const Copy& c) {
  const Copy::Box& b = *c.box;
  std::vector<int64_t> begin = b.begin, count = b.count;
  if (b.dynamic_axis >= 0) {
    const size_t d = static_cast<size_t>(b.dynamic_axis);
    begin[d] = b.dynamic_begin();
    // Past the axis nothing is written (a begin read as data never writes out of bounds).
    count[d] = std::clamp<int64_t>(b.shape[d] - begin[d], 0, b.count[d]);
    if (begin[d] < 0) return absl::OkStatus();
  }
  const size_t rank = b.shape.size();
  for (int64_t n : count)
    if (n == 0) return absl::OkStatus();
  // Rows along the last axis, each a contiguous run in both buffers; `part` keeps its own count.
  std::vector<int64_t> at(rank, 0);
  const size_t row_bytes = static_cast<size_t>(count.empty() ? 1 : count.back()) * b.itemsize;
  while (true) {
    int64_t to = 0, from = 0;
    for (size_t d = 0; d < rank; ++d) {
      to = to * b.shape[d] + begin[d] + at[d];
      from = from * b.count[d] + at[d];
    }
    if (absl::Status s = backend.copy(static_cast<const char*>(c.from) + static_cast<size_t>(from) * b.itemsize,
                                      static_cast<char*>(c.to) + static_cast<size_t>(to) * b.itemsize, row_bytes);
        !s.ok())
      return s;
    size_t d = rank == 0 ? 0 : rank - 1;  // the next row: count up the axes before the last
    while (d > 0 && ++at[d - 1] == count[d - 1]) at[--d] = 0;
    if (d == 0) return absl::OkStatus();
  }
}

absl::Status StepProgram::run(const std::function<bool()>& should_stop) {
  std::lock_guard lock(run_mu_);
  // Each transfer returns when its bytes have arrived (GPU steps: queued on the step's stream,
  // so before its kernels either way).
  for (const Transfer& t : transfers_)
    if (absl::Status s = copy_contents(*t.to, *t.from, *streams_); !s.ok()) return s;
  Backend& backend = *backend_;
  // Everything is queued, then waited for once; on an early return, the queued work still
  // finishes before the caller may touch a buffer. A failed launch leaves the targets as they
  // were: the assigns are copied only after every kernel.
  auto finish = [&](absl::Status s) {
    absl::Status synced = backend.synchronize();
    return s.ok() ? synced : s;
  };
  for (const Copy& c : snapshots_)
    if (absl::Status s = backend.copy(c.from, c.to, c.bytes); !s.ok()) return finish(s);
  for (const Launch& s : launches_) {
    if (should_stop && should_stop()) return finish(absl::CancelledError("step cancelled between kernels"));
    if (absl::Status st = backend.launch(s.kernel, s.args.data(), s.args.size()); !st.ok()) return finish(st);
  }
  for (const Copy& c : copies_) {
    if (c.box) {
      if (absl::Status s = copy_box(backend, c); !s.ok()) return finish(s);
      continue;
    }
    if (!c.prefix) {
      if (absl::Status s = backend.copy(c.from, c.to, c.bytes); !s.ok()) return finish(s);
      continue;
    }
    const Copy::Prefix& p = *c.prefix;
    const auto valid = static_cast<size_t>(std::clamp<int64_t>(p.extent(), 0, p.size)) * p.unit;
    const size_t block = static_cast<size_t>(p.size) * p.unit;
    for (int64_t o = 0; o < p.outer && valid > 0; ++o) {
      const size_t at = static_cast<size_t>(o) * block;
      if (absl::Status s = backend.copy(static_cast<const char*>(c.from) + at, static_cast<char*>(c.to) + at, valid); !s.ok())
        return finish(s);
    }
  }
  return finish(absl::OkStatus());
}

absl::StatusOr<std::unique_ptr<StepProgram>> Engine::compile_step(const StepSpec& spec, const RealizeOptions& options) {
  std::unordered_set<const Buffer*> targets;
  for (size_t i = 0; i < spec.assigns.size(); ++i) {
    const StepAssign& a = spec.assigns[i];
    if (!a.target || !a.value) return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": missing target or value"));
    if (a.value->dtype != a.target->dtype() || a.value->shape != a.target->shape()) {
      return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": value is ", describe(a.value->dtype, a.value->shape),
                                                     " but its target buffer is ",
                                                     describe(a.target->dtype(), a.target->shape())));
    }
    if (!targets.insert(a.target.get()).second) {
      return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": its target buffer is assigned twice"));
    }
  }

  std::vector<UOpRef> roots = spec.outputs;
  for (const StepAssign& a : spec.assigns) roots.push_back(a.region ? a.region->part : a.value);
  roots.insert(roots.end(), spec.materialize.begin(), spec.materialize.end());
  auto where = step_place(roots, spec.bound, options);
  if (!where.ok()) return where.status();
  const int64_t device = where->device;
  std::unique_ptr<StepProgram> step(new StepProgram());
  step->engine_ = impl_.get();
  step->device_ = device_name(device);
  for (size_t i = 0; i < spec.assigns.size(); ++i)
    if (spec.assigns[i].target->device() != step->device_)
      return absl::InvalidArgumentError(absl::StrCat("assign ", i, ": the target buffer is on ",
                                                     spec.assigns[i].target->device(), " but the step runs on ",
                                                     step->device_));

  // The spec's buffers, and each COPY's destination (filled before every run).
  Bindings bound = spec.bound;
  auto is_bound = [&](const UOp* n) { return bound.count(n) > 0; };
  // Transfers read and write across devices through the session's streams.
  if (device != kCpuDevice || !where->copies.empty())
    step->streams_ = options.streams ? options.streams : std::make_shared<DeviceStreams>();
  if (device == kCpuDevice) {
    step->backend_ = impl_->cpu.get();
  } else {
    if (absl::Status s = check_device(device); !s.ok()) return s;
    auto stream = step->streams_->on(device);
    if (!stream.ok()) return stream.status();
    step->own_backend_ = make_cuda_backend(*impl_, **stream);
    step->backend_ = step->own_backend_.get();
  }
  Backend& backend = *step->backend_;
  auto fresh = [&](DType dtype, const Shape& shape) { return backend.allocate(dtype, shape, Buffer::Fill::Zero); };
  std::vector<BufferPtr> transfer_ends;  // kept by the step
  for (const UOp* c : where->copies) {
    absl::StatusOr<BufferPtr> to = fresh(c->dtype, c->shape);
    if (!to.ok()) return to.status();
    const BufferPtr& from = bound.at(c->src[0].get());
    step->transfers_.push_back(StepProgram::Transfer{from.get(), to->get()});
    transfer_ends.push_back(from);
    transfer_ends.push_back(*to);
    bound[c] = *to;
  }
  // The kernels, in order, as (output and parameters, launchable or not) on the step's device.
  RealizeStats build_stats;
  auto compiled = compile_schedule(*impl_, backend, roots, is_bound, options, "step compile", build_stats);
  if (!compiled.ok()) return compiled.status();
  const Schedule& sched = compiled->schedule;
  std::vector<StepProgram::Launch> built;
  std::vector<std::vector<const UOp*>> params;
  for (CompiledKernel& k : compiled->kernels) {
    params.push_back(k.params);
    built.push_back(StepProgram::Launch{std::move(k), {}});
  }
  auto launchable = [&](size_t i) { return built[i].kernel.program != nullptr; };
  step->stats_.compiled = build_stats.compiled;
  step->stats_.cache_hits = build_stats.cache_hits;

  // plan_memory: values that outlive the kernels (outputs and assigned values) get buffers of
  // their own; the others share an arena, each buffer going back after its last reader.
  PassLog log(impl_->observer());
  const auto memory_t0 = std::chrono::steady_clock::now();
  std::unordered_set<const UOp*> finals;
  for (size_t i = 0; i < spec.outputs.size() + spec.assigns.size(); ++i) finals.insert(sched.outputs[i].get());
  std::unordered_map<const UOp*, size_t> last_use;
  for (size_t i = 0; i < params.size(); ++i)
    for (const UOp* p : params[i]) last_use[p] = i;

  std::unordered_map<const UOp*, BufferPtr> buffers;
  for (const auto& [node, buf] : bound) buffers.emplace(node, buf);
  BufferArena arena(fresh);
  for (size_t i = 0; i < built.size(); ++i) {
    const UOp* out = params[i][0];
    const bool own = finals.count(out) || !launchable(i);
    absl::StatusOr<BufferPtr> buf = own ? fresh(out->dtype, out->shape) : arena.take(out->dtype, out->shape);
    if (!buf.ok()) return buf.status();
    buffers[out] = *buf;
    if (own) step->held_.push_back(*buf);
    if (launchable(i)) {
      StepProgram::Launch launch = std::move(built[i]);
      for (const UOp* p : params[i]) launch.args.push_back(buffers.at(p)->data());
      step->launches_.push_back(std::move(launch));
    }
    // Sources read here for the last time return to the arena for the next kernels.
    for (size_t j = 1; j < params[i].size(); ++j) {
      const UOp* p = params[i][j];
      if (last_use[p] == i && !finals.count(p) && !bound.count(p) && p != out) arena.give_back(buffers.at(p));
    }
  }
  for (const BufferPtr& b : arena.all()) {
    step->held_.push_back(b);
    ++step->stats_.intermediates;
    step->stats_.intermediate_bytes += b->nbytes();
  }
  step->stats_.kernels = static_cast<uint32_t>(step->launches_.size());
  // Of the bound buffers, the step keeps those its kernels, outputs and assigns use.
  std::unordered_set<const Buffer*> used;
  for (size_t i = 0; i < built.size(); ++i)
    for (const UOp* p : params[i])
      if (auto it = bound.find(p); it != bound.end() && used.insert(it->second.get()).second)
        step->held_.push_back(it->second);
  for (const UOp* r : finals)
    if (auto it = bound.find(r); it != bound.end() && used.insert(it->second.get()).second)
      step->held_.push_back(it->second);
  for (const StepAssign& a : spec.assigns)
    if (used.insert(a.target.get()).second) step->held_.push_back(a.target);
  for (const BufferPtr& b : transfer_ends)
    if (used.insert(b.get()).second) step->held_.push_back(b);
  // The graph goes when compiling ends; launches need only the pointers.
  for (StepProgram::Launch& l : step->launches_) l.kernel.params.clear();

  for (size_t i = 0; i < spec.outputs.size(); ++i) step->outputs_.push_back(buffers.at(sched.outputs[i].get()));
  for (size_t i = 0; i < spec.assigns.size(); ++i) {
    const StepAssign& a = spec.assigns[i];
    BufferPtr value = buffers.at(sched.outputs[spec.outputs.size() + i].get());
    if (value.get() == a.target.get()) continue;  // assigned its own value: nothing to write
    if (targets.count(value.get())) {
      // The value is another target's buffer, which this run overwrites: read it first.
      absl::StatusOr<BufferPtr> snap = fresh(value->dtype(), value->shape());  // on the step's device
      if (!snap.ok()) return snap.status();
      step->held_.push_back(*snap);
      step->snapshots_.push_back(StepProgram::Copy{value->data(), (*snap)->data(), value->nbytes()});
      value = *snap;
    }
    StepProgram::Copy copy{value->data(), a.target->data(), a.target->nbytes(), nullptr, nullptr};
    if (a.region) {
      auto box = StepProgram::region_box(a, spec.bound, i);
      if (!box.ok()) return box.status();
      copy.box = *std::move(box);
      ++step->stats_.box_assigns;
    } else if (!a.value->extents.empty()) {
      auto prefix = StepProgram::valid_prefix(*a.value, spec.bound, i);
      if (!prefix.ok()) return prefix.status();
      copy.prefix = *std::move(prefix);
    }
    step->copies_.push_back(std::move(copy));
  }
  log.done("plan_memory", memory_t0);
  return step;
}

}  // namespace polygrad
