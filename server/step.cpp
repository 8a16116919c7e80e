// Session's compiled-step calls: CompileStep, RunStep, ReleaseStep (see server/session.h).
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/random.h"
#include "core/frontend/tensor_ops.h"
#include "server/bounded.h"
#include "server/session.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// Marks the session in use for a call (as Session::BusyGuard does for the other calls).
template <typename S>
class InUse {
 public:
  InUse(std::atomic<int>& busy, S& session) : busy_(busy), session_(session) {
    busy_.fetch_add(1);
    session_.touch();
  }
  ~InUse() {
    session_.touch();
    busy_.fetch_sub(1);
  }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

 private:
  std::atomic<int>& busy_;
  S& session_;
};

// The wire nodes of a request by id, and the begin buffers of its SHRINKs with a symbolic begin.
struct SentNodes {
  absl::flat_hash_map<uint64_t, const v1::Node*> by_id;
  absl::flat_hash_map<uint64_t, UOpRef> shrink_begin;
};

// An assign of `write` = WRITE_VIEW(target, SHRINK(target), part), all sent in this request, with at most one
// symbolic begin and no symbolic end: the box the shrink reads, which the step writes from `part`
// alone (StepRegion). Null for any other value, which is computed and copied whole.
std::shared_ptr<const StepRegion> region_of(const SentNodes& sent, uint64_t target, const v1::Node& write,
                                            const UOpRef& part) {
  if (write.src(0) != target) return nullptr;
  auto view = sent.by_id.find(write.src(1));
  if (view == sent.by_id.end() || view->second->op() != v1::SHRINK || view->second->src_size() != 1 ||
      view->second->src(0) != target || view->second->symbolic_size() > 1)
    return nullptr;
  const v1::Node& shrink = *view->second;
  auto region = std::make_shared<StepRegion>();
  region->part = part;
  for (int d = 0; d < shrink.pairs().begin_size() && d < shrink.pairs().end_size(); ++d) {
    region->begin.push_back(shrink.pairs().begin(d));
    region->count.push_back(shrink.pairs().end(d) - shrink.pairs().begin(d));
  }
  if (shrink.symbolic_size() == 1) {
    auto begin = sent.shrink_begin.find(shrink.id());
    if (!shrink.symbolic(0).begin() || begin == sent.shrink_begin.end()) return nullptr;
    region->dynamic_axis = shrink.symbolic(0).axis();
    region->dynamic_begin = begin->second;
  }
  return region;
}

std::string describe(const Buffer& b) {
  return absl::StrCat(dtype_name(b.dtype()), "[", absl::StrJoin(b.shape(), ","), "]");
}

void normalize_bools(std::string& bytes) {
  for (char& c : bytes) c = c != 0;
}

}  // namespace

absl::StatusOr<BufferPtr> Session::step_buffer_of(uint64_t node_id, std::string_view role) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(av(role), " node ", node_id, " is not defined in this session"));
  }
  if (!it->second.realized) {
    return absl::InvalidArgumentError(absl::StrCat(av(role), " node ", node_id, " (", op_name(it->second.lazy->op),
                                                   ") has no buffer: it must be a BUFFER node or realized first"));
  }
  return it->second.realized;
}

// Writing a node's buffer in place must not change other nodes that merely share it (equal
// values are hash-consed into one buffer, e.g. two zero tensors). Such a node gets a private
// copy and a new leaf; BUFFER nodes naming the same handle are views of it and keep sharing.
absl::Status Session::privatize(uint64_t node_id) {
  NodeEntry& e = nodes_.at(node_id);
  const Buffer* shared = e.realized.get();
  bool other = false;
  for (const auto& [id, n] : nodes_) {
    if (id != node_id && n.realized.get() == shared && n.lazy->op != Ops::BUFFER) other = true;
  }
  if (e.lazy->op == Ops::BUFFER && !other) return absl::OkStatus();
  if (e.lazy->op != Ops::BUFFER) {
    for (const auto& [id, n] : nodes_) {
      if (id != node_id && n.realized.get() == shared) other = true;
    }
  }
  if (!other) return absl::OkStatus();
  absl::StatusOr<BufferPtr> copy = engine_.clone(e.realized, streams_.get());
  if (!copy.ok()) return copy.status();
  absl::StatusOr<UOpRef> leaf = frontend::buffer((*copy)->id(), (*copy)->dtype(), (*copy)->shape());
  if (!leaf.ok()) return leaf.status();
  if (e.lazy->op == Ops::BUFFER) {
    unbind(e.lazy.get());
    e.lazy = *leaf;
  } else {
    if (e.leaf) unbind(e.leaf.get());
    e.leaf = *leaf;
  }
  e.realized = *copy;
  bind(*leaf, e.realized);
  if (e.handle != 0) handles_[e.handle].buffer = e.realized;
  return absl::OkStatus();
}

// After a run wrote `buffer_ids` in place, a realized node computed from them (or into one of
// them) no longer equals its graph: drop the graph's binding so an equal graph sent later is
// computed afresh.
void Session::invalidate_readers(const absl::flat_hash_set<uint64_t>& buffer_ids,
                                 absl::flat_hash_map<uint64_t, const UOp*>& clean) {
  for (auto& [id, e] : nodes_) {
    if (!e.realized || e.lazy_stale || e.lazy->op == Ops::BUFFER) continue;
    if (auto c = clean.find(id); c != clean.end() && c->second == e.lazy.get()) continue;
    // A target computed by a graph (e.g. zeros) no longer holds that graph's value either.
    bool hit = buffer_ids.contains(e.realized->id());
    for (const UOp* u : toposort({e.lazy})) {
      if (u->op == Ops::BUFFER && buffer_ids.contains(static_cast<uint64_t>(u->arg_int()))) {
        hit = true;
        break;
      }
    }
    if (!hit) {
      clean[id] = e.lazy.get();  // checked once: a node's graph never changes
      continue;
    }
    unbind(e.lazy.get());
    e.lazy_stale = true;
  }
}

absl::StatusOr<v1::CompileStepResponse> Session::compile_step(const v1::CompileStepRequest& request,
                                                              const std::function<bool()>& should_stop,
                                                              Transfer& transfer) {
  InUse busy(busy_, *this);
  const Clock::time_point start = Clock::now();
  StepSpec spec;
  std::vector<UOpRef> keep_alive;
  std::vector<uint64_t> added;
  auto step = std::make_shared<CompiledStep>();
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_open(); !s.ok()) return s;
    // Inputs and node targets defined before this request get private buffers first, so the
    // nodes decoded below read the buffers the step will write.
    for (uint64_t id : request.inputs()) {
      if (nodes_.contains(id) && nodes_.at(id).realized) {
        if (absl::Status s = privatize(id); !s.ok()) return s;
      }
    }
    for (const v1::StepAssign& a : request.assigns()) {
      if (a.target_case() == v1::StepAssign::kTargetNode && nodes_.contains(a.target_node()) &&
          nodes_.at(a.target_node()).realized) {
        if (absl::Status s = privatize(a.target_node()); !s.ok()) return s;
      }
    }
    absl::StatusOr<DecodedNodes> decoded = decode(request.nodes());
    if (!decoded.ok()) return decoded.status();
    SentNodes sent;
    for (const v1::Node& n : request.nodes()) sent.by_id[n.id()] = &n;
    for (const DecodedNode& n : decoded->nodes)
      if (sent.by_id.at(n.id)->op() == v1::SHRINK && n.extents.size() == 1) sent.shrink_begin[n.id] = n.extents[0].uop;
    if (absl::Status s = commit_nodes(*decoded, added, transfer); !s.ok()) return s;
    auto fail = [&](absl::Status s) {
      erase_nodes(added);
      return s;
    };

    absl::flat_hash_set<const Buffer*> written;
    for (uint64_t id : request.inputs()) {
      absl::StatusOr<BufferPtr> b = step_buffer_of(id, "input");
      if (!b.ok()) return fail(b.status());
      if (!written.insert(b->get()).second) {
        return fail(absl::InvalidArgumentError(absl::StrCat("input node ", id, " is listed twice or shares its buffer with another input")));
      }
      step->inputs.push_back(CompiledStep::Input{id, *b});
      step->written_ids.insert((*b)->id());
    }
    for (uint64_t id : request.outputs()) {
      auto it = nodes_.find(id);
      if (it == nodes_.end()) return fail(absl::InvalidArgumentError(absl::StrCat("output ", id, " is not defined in this session")));
      if (absl::Status s = check_concrete(id, it->second.current()); !s.ok()) return fail(s);
      spec.outputs.push_back(it->second.current());
      step->output_ids.push_back(id);
    }
    for (uint64_t id : request.materialize()) {
      auto it = nodes_.find(id);
      if (it == nodes_.end()) {
        return fail(absl::InvalidArgumentError(absl::StrCat("materialize: node ", id, " is not defined in this session")));
      }
      if (absl::Status s = check_concrete(id, it->second.current()); !s.ok()) return fail(s);
      spec.materialize.push_back(it->second.current());
    }
    for (int i = 0; i < request.assigns_size(); ++i) {
      const v1::StepAssign& a = request.assigns(i);
      absl::StatusOr<BufferPtr> target;
      std::string name;
      if (a.target_case() == v1::StepAssign::kTargetNode) {
        name = absl::StrCat("assign ", i, ": target node ", a.target_node());
        target = step_buffer_of(a.target_node(), absl::StrCat("assign ", i, ": target"));
      } else if (a.target_case() == v1::StepAssign::kTargetHandle) {
        name = absl::StrCat("assign ", i, ": target handle ", a.target_handle());
        auto h = handles_.find(a.target_handle());
        target = h == handles_.end() ? absl::StatusOr<BufferPtr>(absl::NotFoundError(absl::StrCat(
                                           name, " is not a buffer of this session")))
                                     : absl::StatusOr<BufferPtr>(h->second.buffer);
      } else {
        return fail(absl::InvalidArgumentError(absl::StrCat("assign ", i, ": has no target")));
      }
      if (!target.ok()) return fail(target.status());
      auto v = nodes_.find(a.value());
      if (v == nodes_.end()) {
        return fail(absl::InvalidArgumentError(absl::StrCat("assign ", i, ": value node ", a.value(), " is not defined in this session")));
      }
      const UOpRef& value = v->second.current();
      if (value->dtype != (*target)->dtype() || value->shape != (*target)->shape()) {
        return fail(absl::InvalidArgumentError(absl::StrCat(name, " is ", describe(**target), " but value node ", a.value(), " is ",
                                                            dtype_name(value->dtype), "[", absl::StrJoin(value->shape, ","), "]")));
      }
      if (!written.insert(target->get()).second) {
        return fail(absl::InvalidArgumentError(absl::StrCat(name, " is also an input or another assign's target")));
      }
      std::shared_ptr<const StepRegion> region;
      if (a.target_case() == v1::StepAssign::kTargetNode) {
        const v1::Node* w = sent.by_id.contains(a.value()) ? sent.by_id.at(a.value()) : nullptr;
        if (w != nullptr && w->op() == v1::WRITE_VIEW && w->src_size() == 3 && nodes_.contains(w->src(2)))
          region = region_of(sent, a.target_node(), *w, nodes_.at(w->src(2)).current());
      }
      spec.assigns.push_back(StepAssign{*target, value, std::move(region)});
      step->written_ids.insert((*target)->id());
    }
    if (quotas_ != nullptr) {
      std::vector<UOpRef> roots = spec.outputs;
      roots.insert(roots.end(), spec.materialize.begin(), spec.materialize.end());
      for (const StepAssign& a : spec.assigns) roots.push_back(a.value);
      if (absl::Status s = quotas_->check_depth(roots); !s.ok()) return fail(s);
    }
    const v1::StepRandom* traced = request.has_random() && request.random().count() > 0 ? &request.random() : nullptr;
    if (absl::Status s = find_step_keys(traced, spec, *step); !s.ok()) return fail(s);
    keep_alive.reserve(bindings_.size());
    for (const auto& [ptr, b] : bindings_) {
      keep_alive.push_back(b.uop);
      spec.bound.emplace(ptr, b.buffer);
    }
  }

  RealizeOptions options;
  options.should_stop = [this, &should_stop] { return closed_.load() || (should_stop && should_stop()); };
  options.streams = streams_;
  absl::StatusOr<std::unique_ptr<StepProgram>> compiled = engine_.compile_step(spec, options);
  std::lock_guard lock(mu_);
  if (!compiled.ok()) {
    erase_nodes(added);
    return stopped(compiled.status(), "step's compile", should_stop);
  }
  if (absl::Status s = check_open(); !s.ok()) return s;
  // A step's buffers count against the session's and tenant's quotas like any others it holds.
  absl::StatusOr<Reservation> room = held_.reserve((*compiled)->buffers());
  if (!room.ok()) {
    erase_nodes(added);
    return room.status();
  }
  for (const BufferPtr& b : (*compiled)->buffers()) held_.hold(b);
  step->program = *std::move(compiled);
  uint64_t id = next_step_++;
  if (id == 0) id = next_step_++;
  steps_[id] = step;
  // The targets are written from now on: bindings computed from them are stale at the first run.
  invalidate_readers(step->written_ids, step->clean);
  sweep_orphans();  // leaves the targets' private copies replaced

  v1::CompileStepResponse response;
  response.set_step_id(id);
  absl::flat_hash_set<std::string> named;
  for (const CompiledStep::VariableExtent& x : step->variable_extents)
    if (named.insert(x.term.variable).second) response.add_variables(x.term.variable);
  const StepStats& st = step->program->stats();
  v1::StepStats* stats = response.mutable_stats();
  stats->set_kernels(st.kernels);
  stats->set_intermediates(st.intermediates);
  stats->set_intermediate_bytes(st.intermediate_bytes);
  stats->set_box_assigns(st.box_assigns);
  stats->set_compiled(st.compiled);
  stats->set_cache_hits(st.cache_hits);
  stats->set_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  return response;
}

absl::Status Session::find_step_keys(const v1::StepRandom* traced, const StepSpec& spec, CompiledStep& step) const {
  if (traced != nullptr &&
      (traced->counter_base() > std::numeric_limits<uint32_t>::max() || traced->count() > (uint64_t{1} << 32))) {
    return absl::InvalidArgumentError(absl::StrCat("random: counter_base ", traced->counter_base(), " and count ",
                                                   traced->count(), " must fit in 32 bits"));
  }
  // The step computes what is reachable from its roots without passing through a bound value
  // (which it reads); the random keys (of the traced streams) and the variables' extents met on
  // the way are its own.
  std::vector<const UOp*> stack;
  for (const UOpRef& r : spec.outputs) stack.push_back(r.get());
  for (const UOpRef& r : spec.materialize) stack.push_back(r.get());
  for (const StepAssign& a : spec.assigns) stack.push_back(a.value.get());
  absl::flat_hash_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    if (auto b = bindings_.find(u); b != bindings_.end()) {
      if (const auto& w = b->second.random_words; w && traced != nullptr) {
        const uint64_t seed = (*w)[0] | (uint64_t{(*w)[1]} << 32);
        const uint32_t delta = (*w)[2] - static_cast<uint32_t>(traced->counter_base());
        if (seed == traced->seed() && delta < traced->count()) step.random_keys.push_back({b->second.buffer, delta});
      }
      if (const auto& v = b->second.variable) step.variable_extents.push_back({b->second.buffer, *v});
      continue;
    }
    for (const UOpRef& s : u->src) stack.push_back(s.get());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RunStepResponse> Session::run_step(const v1::RunStepRequest& request,
                                                      const std::function<bool()>& should_stop, Transfer& transfer) {
  InUse busy(busy_, *this);
  const Clock::time_point start = Clock::now();
  std::shared_ptr<CompiledStep> step;
  // New input data: (destination, bytes or a source buffer), checked before anything is written.
  struct Feed {
    Buffer* into;
    std::string_view bytes;
    BufferPtr from;
  };
  std::vector<Feed> feeds;
  std::vector<std::pair<Buffer*, int32_t>> extents;  // variables' new values, as their dims' extents
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_open(); !s.ok()) return s;
    auto it = steps_.find(request.step_id());
    if (it == steps_.end()) {
      return absl::NotFoundError(absl::StrCat("step ", request.step_id(), " is not a step of this session"));
    }
    step = it->second;
    if (request.has_random() && request.random().counter_base() > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("random: counter_base ", request.random().counter_base(), " does not fit in 32 bits"));
    }
    for (const v1::VariableValue& v : request.variables()) {
      bool found = false;
      for (const CompiledStep::VariableExtent& x : step->variable_extents) {
        if (x.term.variable != v.name()) continue;
        found = true;
        // Values and terms are bounded (decode.cpp), so this cannot overflow; any value is safe to
        // run with (an extent only limits what reductions read), the clamp keeps it an int32.
        const int64_t e = std::clamp<int64_t>(v.value(), -(int64_t{1} << 32), int64_t{1} << 32) * x.term.mul + x.term.add;
        extents.emplace_back(x.buffer.get(), static_cast<int32_t>(std::clamp<int64_t>(e, 0, std::numeric_limits<int32_t>::max())));
      }
      if (!found) {
        return absl::InvalidArgumentError(absl::StrCat("variable ", bounded(v.name(), kMaxVariableName),
                                                       " has no symbolic dim in step ", request.step_id()));
      }
    }
    for (const v1::StepInput& in : request.inputs()) {
      const CompiledStep::Input* slot = nullptr;
      for (const CompiledStep::Input& s : step->inputs) {
        if (s.node_id == in.node_id()) slot = &s;
      }
      if (!slot) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", in.node_id(), " is not an input of step ", request.step_id()));
      }
      Buffer& dst = *slot->buffer;
      if (in.source_case() == v1::StepInput::kData) {
        if (in.data().size() != dst.nbytes()) {
          return absl::InvalidArgumentError(absl::StrCat("input node ", in.node_id(), ": got ", in.data().size(),
                                                         " bytes, ", describe(dst), " needs ", dst.nbytes()));
        }
        feeds.push_back(Feed{&dst, in.data(), nullptr});
      } else if (in.source_case() == v1::StepInput::kHandle) {
        auto h = handles_.find(in.handle());
        if (h == handles_.end()) {
          return absl::NotFoundError(
              absl::StrCat("input node ", in.node_id(), ": handle ", in.handle(), " is not a buffer of this session"));
        }
        const Buffer& src = *h->second.buffer;
        if (src.dtype() != dst.dtype() || src.shape() != dst.shape()) {
          return absl::InvalidArgumentError(absl::StrCat("input node ", in.node_id(), " is ", describe(dst),
                                                         " but handle ", in.handle(), " is ", describe(src)));
        }
        feeds.push_back(Feed{&dst, {}, h->second.buffer});
      } else {
        return absl::InvalidArgumentError(absl::StrCat("input node ", in.node_id(), ": neither data nor handle given"));
      }
    }
  }

  v1::RunStepResponse response;
  std::vector<std::pair<int, BufferPtr>> large;  // outputs too big to inline: copies to hand out
  {
    std::lock_guard run_lock(step_run_mu_);
    for (const auto& [extent, value] : extents) {
      if (absl::Status s = engine_.write(*extent, &value, sizeof value, streams_.get()); !s.ok()) return s;
    }
    if (request.has_random()) {
      for (const CompiledStep::RandomKey& k : step->random_keys) {
        const uint32_t counter = static_cast<uint32_t>(request.random().counter_base()) + k.counter_delta;
        absl::StatusOr<std::array<uint32_t, 3>> words = frontend::random_key_words(request.random().seed(), counter);
        if (!words.ok()) return words.status();
        if (absl::Status s = engine_.write(*k.buffer, words->data(), sizeof(*words), streams_.get()); !s.ok()) return s;
      }
    }
    for (const Feed& f : feeds) {
      if (f.from) {
        if (f.from.get() != f.into)
          if (absl::Status s = engine_.copy(*f.into, *f.from, streams_.get()); !s.ok()) return s;
      } else if (f.into->dtype() == DType::Bool) {
        std::string bools(f.bytes);  // a client's bool bytes may be any nonzero value
        normalize_bools(bools);
        if (absl::Status s = engine_.write(*f.into, bools.data(), bools.size(), streams_.get()); !s.ok()) return s;
      } else {
        if (absl::Status s = engine_.write(*f.into, f.bytes.data(), f.bytes.size(), streams_.get()); !s.ok()) return s;
      }
      if (!f.from) transfer.upload += f.bytes.size();
    }
    absl::Status ran =
        step->program->run([this, &should_stop] { return closed_.load() || (should_stop && should_stop()); });
    if (!ran.ok()) return stopped(ran, "step", should_stop);
    uint64_t inline_budget = limits_.max_inline_bytes;
    const std::vector<BufferPtr>& outs = step->program->outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const Buffer& b = *outs[i];
      // A GPU output is read through a host copy, which is new (the program overwrites its output
      // buffers on every run) and so can be handed out as it is.
      absl::StatusOr<BufferPtr> host = request.want_data() ? engine_.to_host(outs[i], streams_.get()) : outs[i];
      if (!host.ok()) return host.status();
      v1::TensorResult* r = response.add_outputs();
      r->set_node_id(step->output_ids[i]);
      r->set_dtype(to_wire(b.dtype()));
      for (int64_t d : b.shape()) r->add_shape(d);
      if (!request.want_data()) continue;
      if (b.nbytes() <= inline_budget) {
        r->set_has_data(true);
        r->set_data(static_cast<const char*>((*host)->data()), b.nbytes());
        inline_budget -= b.nbytes();
        transfer.download += b.nbytes();
      } else if (*host != outs[i]) {
        large.emplace_back(static_cast<int>(i), *std::move(host));
      } else {
        absl::StatusOr<BufferPtr> copy = engine_.clone(outs[i], streams_.get());
        if (!copy.ok()) return copy.status();
        large.emplace_back(static_cast<int>(i), *std::move(copy));
      }
    }
  }
  std::lock_guard lock(mu_);
  if (closed_.load()) return absl::AbortedError(absl::StrCat("session ", id_, " was closed during the step"));
  for (auto& [i, buf] : large) response.mutable_outputs(i)->set_handle(new_handle(buf, 0, false));
  invalidate_readers(step->written_ids, step->clean);
  response.set_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  return response;
}

absl::Status Session::release_step(const v1::ReleaseStepRequest& request) {
  InUse busy(busy_, *this);
  std::shared_ptr<CompiledStep> step;  // freed outside the lock
  std::lock_guard lock(mu_);
  if (absl::Status s = check_open(); !s.ok()) return s;
  auto it = steps_.find(request.step_id());
  if (it == steps_.end()) return absl::NotFoundError(absl::StrCat("step ", request.step_id(), " is not a step of this session"));
  step = std::move(it->second);
  steps_.erase(it);
  for (const BufferPtr& b : step->program->buffers()) held_.drop(b.get());
  return absl::OkStatus();
}

size_t Session::step_count() const {
  std::lock_guard lock(mu_);
  return steps_.size();
}

}  // namespace polygrad::server
