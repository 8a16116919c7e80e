#include "core/engine/plan.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/engine/engine_impl.h"
#include "core/engine/placement.h"
#include "core/schedule/schedule.h"

namespace polygrad {
namespace {

std::string describe(DType dtype, const Shape& shape) {
  return absl::StrCat(dtype_name(dtype), "[", absl::StrJoin(shape, ","), "]");
}

absl::StatusOr<BufferPtr> fresh(DType dtype, const Shape& shape) {
  BufferPtr b = Buffer::allocate_host(dtype, shape);
  if (!b) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a ", describe(dtype, shape), " buffer"));
  return b;
}

// Intermediate buffers, shared between values whose lifetimes do not overlap. Kernels see only
// pointers, so a buffer is reused for any value that fits in it.
class Arena {
 public:
  absl::StatusOr<BufferPtr> take(DType dtype, const Shape& shape) {
    const size_t need = static_cast<size_t>(shape_numel(shape)) * dtype_itemsize(dtype);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->nbytes() >= need && (best == free_.end() || (*it)->nbytes() < (*best)->nbytes())) best = it;
    }
    if (best != free_.end()) {
      BufferPtr b = *best;
      free_.erase(best);
      return b;
    }
    absl::StatusOr<BufferPtr> b = fresh(dtype, shape);
    if (b.ok()) all_.push_back(*b);
    return b;
  }
  void give_back(BufferPtr b) { free_.push_back(std::move(b)); }
  const std::vector<BufferPtr>& all() const { return all_; }

 private:
  static int64_t shape_numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::vector<BufferPtr> all_;
  std::vector<BufferPtr> free_;
};

}  // namespace

struct ExecutionPlan::Step {
  CompiledKernel kernel;
  std::vector<void*> args;
};

ExecutionPlan::~ExecutionPlan() = default;

absl::Status ExecutionPlan::run(const std::function<bool()>& should_stop) {
  std::lock_guard lock(run_mu_);
  for (const Copy& c : snapshots_) std::memcpy(c.to, c.from, c.bytes);
  for (const Step& s : steps_) {
    if (should_stop && should_stop()) return absl::CancelledError("step cancelled between kernels");
    engine_->launch(s.kernel, s.args.data());
  }
  for (const Copy& c : copies_) std::memcpy(c.to, c.from, c.bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Engine::plan(const PlanSpec& spec, const RealizeOptions& options) {
  std::unordered_set<const Buffer*> targets;
  for (size_t i = 0; i < spec.assigns.size(); ++i) {
    const PlanAssign& a = spec.assigns[i];
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
  for (const PlanAssign& a : spec.assigns) roots.push_back(a.value);
  roots.insert(roots.end(), spec.materialize.begin(), spec.materialize.end());
  if (needs_placement(roots, spec.bound))
    return absl::UnimplementedError(
        "compiled steps run on the CPU only so far: this step reads a device buffer or has a COPY (Tensor.to); "
        "run it without compiling, or keep its tensors on the CPU");
  RealizeStats build_stats;
  auto compiled = impl_->compile(roots, [&](const UOp* n) { return spec.bound.count(n) > 0; }, options, "step compile",
                                 build_stats);
  if (!compiled.ok()) return compiled.status();
  const Schedule& sched = compiled->schedule;
  std::vector<CompiledKernel>& kernels = compiled->kernels;

  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->engine_ = impl_.get();
  plan->stats_.compiled = build_stats.compiled;
  plan->stats_.cache_hits = build_stats.cache_hits;

  // Values that outlive the kernels (outputs and assigned values) get buffers of their own; the
  // others share an arena, each buffer going back after its last reader.
  std::unordered_set<const UOp*> finals;
  for (size_t i = 0; i < spec.outputs.size() + spec.assigns.size(); ++i) finals.insert(sched.outputs[i].get());
  std::unordered_map<const UOp*, size_t> last_use;
  for (size_t i = 0; i < kernels.size(); ++i)
    for (const UOp* p : kernels[i].params) last_use[p] = i;

  std::unordered_map<const UOp*, BufferPtr> buffers;
  for (const auto& [node, buf] : spec.bound) buffers.emplace(node, buf);
  Arena arena;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const UOp* out = kernels[i].params[0];
    absl::StatusOr<BufferPtr> buf = finals.count(out) || !kernels[i].program ? fresh(out->dtype, out->shape)
                                                                            : arena.take(out->dtype, out->shape);
    if (!buf.ok()) return buf.status();
    buffers[out] = *buf;
    if (finals.count(out) || !kernels[i].program) plan->held_.push_back(*buf);
    const std::vector<const UOp*> params = kernels[i].params;
    if (kernels[i].program) {
      ExecutionPlan::Step step{std::move(kernels[i]), {}};
      for (const UOp* p : params) step.args.push_back(buffers.at(p)->data());
      plan->steps_.push_back(std::move(step));
    }
    // Sources read here for the last time return to the arena for the next kernels.
    for (size_t j = 1; j < params.size(); ++j) {
      const UOp* p = params[j];
      if (last_use[p] == i && !finals.count(p) && !spec.bound.count(p) && p != out) arena.give_back(buffers.at(p));
    }
  }
  for (const BufferPtr& b : arena.all()) {
    plan->held_.push_back(b);
    ++plan->stats_.intermediates;
    plan->stats_.intermediate_bytes += b->nbytes();
  }
  plan->stats_.kernels = static_cast<uint32_t>(plan->steps_.size());
  // Of the bound buffers, the plan keeps those its kernels, outputs and assigns use.
  std::unordered_set<const Buffer*> used;
  for (const ExecutionPlan::Step& s : plan->steps_)
    for (const UOp* p : s.kernel.params)
      if (auto it = spec.bound.find(p); it != spec.bound.end() && used.insert(it->second.get()).second)
        plan->held_.push_back(it->second);
  for (const UOp* r : finals)
    if (auto it = spec.bound.find(r); it != spec.bound.end() && used.insert(it->second.get()).second)
      plan->held_.push_back(it->second);
  for (const PlanAssign& a : spec.assigns)
    if (used.insert(a.target.get()).second) plan->held_.push_back(a.target);
  // The graph goes when planning ends; launches need only the pointers.
  for (ExecutionPlan::Step& s : plan->steps_) s.kernel.params.clear();

  for (size_t i = 0; i < spec.outputs.size(); ++i) plan->outputs_.push_back(buffers.at(sched.outputs[i].get()));
  for (size_t i = 0; i < spec.assigns.size(); ++i) {
    const PlanAssign& a = spec.assigns[i];
    BufferPtr value = buffers.at(sched.outputs[spec.outputs.size() + i].get());
    if (value.get() == a.target.get()) continue;  // assigned its own value: nothing to write
    if (targets.count(value.get())) {
      // The value is another target's buffer, which this run overwrites: read it first.
      absl::StatusOr<BufferPtr> snap = fresh(value->dtype(), value->shape());
      if (!snap.ok()) return snap.status();
      plan->held_.push_back(*snap);
      plan->snapshots_.push_back(ExecutionPlan::Copy{value->data(), (*snap)->data(), value->nbytes()});
      value = *snap;
    }
    plan->copies_.push_back(ExecutionPlan::Copy{value->data(), a.target->data(), a.target->nbytes()});
  }
  return plan;
}

}  // namespace polygrad
