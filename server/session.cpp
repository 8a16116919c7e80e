#include "server/session.h"

#include "core/engine/placement.h"

#include "core/frontend/tensor_ops.h"

#include <cstring>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/bounded.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

uint64_t random_u64() {
  thread_local std::random_device rd;
  return (uint64_t{rd()} << 32) ^ uint64_t{rd()};
}

void normalize_bools(const BufferPtr& buf) {
  if (buf->dtype() != DType::Bool) return;
  auto* p = static_cast<unsigned char*>(buf->data());
  for (size_t i = 0; i < buf->nbytes(); ++i) p[i] = p[i] != 0;
}

}  // namespace

std::string new_session_id() { return absl::StrFormat("%016x%016x", random_u64(), random_u64()); }

// ---- PendingUpload -------------------------------------------------------------------------

absl::Status PendingUpload::append(std::string_view data) {
  const uint64_t size = buffer_->nbytes();
  if (data.size() > size - offset_) {
    return absl::InvalidArgumentError(absl::StrCat("upload sent more than the ", size, " bytes that shape [",
                                                   absl::StrJoin(buffer_->shape(), ","), "] of ",
                                                   av(dtype_name(buffer_->dtype())), " holds"));
  }
  if (!data.empty()) std::memcpy(static_cast<char*>(buffer_->data()) + offset_, data.data(), data.size());
  offset_ += data.size();
  return absl::OkStatus();
}

// ---- Session -------------------------------------------------------------------------------

// Lets the decoder see this session's tables (called with mu_ held).
class Session::Resolver final : public NodeResolver {
 public:
  explicit Resolver(const Session& s) : s_(s) {}
  const UOpRef* find_node(uint64_t id) const override {
    auto it = s_.nodes_.find(id);
    return it == s_.nodes_.end() ? nullptr : &it->second.current();
  }
  absl::StatusOr<BufferPtr> find_handle(uint64_t handle) const override {
    auto it = s_.handles_.find(handle);
    if (it == s_.handles_.end()) {
      return absl::NotFoundError(absl::StrCat("handle ", handle, " is not a buffer of this session"));
    }
    return it->second.buffer;
  }
  const absl::Status* failed_node(uint64_t id) const override { return s_.failed_.find(id); }

 private:
  const Session& s_;
};

// Marks the session in use for the duration of a call, so the reaper leaves it alone.
class Session::BusyGuard {
 public:
  explicit BusyGuard(Session& s) : s_(s) {
    s_.busy_.fetch_add(1);
    s_.touch();
  }
  ~BusyGuard() {
    s_.touch();
    s_.busy_.fetch_sub(1);
  }
  BusyGuard(const BusyGuard&) = delete;
  BusyGuard& operator=(const BusyGuard&) = delete;

 private:
  Session& s_;
};

Session::Session(std::string id, Engine& engine, const Limits& limits, uint64_t first_handle, std::string tenant,
                 const Quotas* quotas, std::shared_ptr<Usage> tenant_usage)
    : id_(std::move(id)), tenant_(std::move(tenant)), engine_(engine), limits_(limits), quotas_(quotas),
      next_handle_(first_handle), next_step_(first_handle ^ 0x5bd1e995u), held_(quotas, std::move(tenant_usage)) {
  touch();
}

Session::~Session() { close(); }

absl::Status Session::stopped(absl::Status engine_status, const char* what,
                              const std::function<bool()>& should_stop) const {
  if (engine_status.code() == absl::StatusCode::kCancelled && closed_.load() && !(should_stop && should_stop())) {
    return absl::AbortedError(absl::StrCat("session ", id_, " was closed during the ", what));
  }
  return engine_status;
}

absl::Status Session::check_open() const {
  if (closed_.load()) return absl::NotFoundError(absl::StrCat("session ", id_, " is closed"));
  return absl::OkStatus();
}

void Session::bind(const UOpRef& uop, const BufferPtr& buffer) {
  Binding& b = bindings_[uop.get()];
  // An orphan taken up again by a node already holds its buffer (a BUFFER UOp names its buffer).
  if (b.refs++ == 0 && !orphans_.erase(uop.get())) {
    b.uop = uop;
    b.buffer = buffer;
    held_.hold(buffer);
  }
}

void Session::unbind(const UOp* uop) {
  auto it = bindings_.find(uop);
  if (it == bindings_.end() || --it->second.refs > 0) return;
  if (uop->op == Ops::BUFFER) {
    orphans_.insert(uop);  // sweep_orphans decides once the caller's changes are done
    return;
  }
  held_.drop(it->second.buffer.get());
  bindings_.erase(it);
}

void Session::sweep_orphans() {
  if (orphans_.empty()) return;
  // What a later realize can still reach: the graphs of unrealized nodes, down to bound UOps
  // (the engine stops there too). Realized nodes are read through their buffers.
  absl::flat_hash_set<const UOp*> reached;
  std::vector<const UOp*> stack;
  for (const auto& [id, e] : nodes_) {
    if (!e.realized) stack.push_back(e.lazy.get());
  }
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!reached.insert(u).second || bindings_.contains(u)) continue;
    for (const UOpRef& s : u->src) stack.push_back(s.get());
  }
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    if (reached.contains(*it)) {
      ++it;
      continue;
    }
    auto b = bindings_.find(*it);
    held_.drop(b->second.buffer.get());
    bindings_.erase(b);
    orphans_.erase(it++);
  }
}

absl::Status Session::commit_nodes(DecodedNodes& decoded, std::vector<uint64_t>& added, Transfer& transfer) {
  // Inline data becomes buffers the session holds: they must fit its quotas.
  std::vector<BufferPtr> leaves;
  for (const DecodedNode& n : decoded.nodes) {
    if (n.leaf) leaves.push_back(n.leaf);
    for (const DecodedNode::RandomKey& k : n.random_keys) leaves.push_back(k.buffer);
    for (const DecodedNode::Extent& x : n.extents) leaves.push_back(x.buffer);
  }
  absl::StatusOr<Reservation> room = held_.reserve(leaves);
  if (!room.ok()) return room.status();
  for (DecodedNode& n : decoded.nodes) {
    if (nodes_.contains(n.id)) continue;  // decode rejects redefinitions; keep the old entry regardless
    added.push_back(n.id);
    NodeEntry& e = nodes_[n.id];
    e.lazy = std::move(n.uop);
    if (n.leaf) {
      e.realized = std::move(n.leaf);
      bind(e.lazy, e.realized);
    }
    // A random key is no node's: bound as an orphan, it stays while an unrealized graph reads it.
    for (const DecodedNode::RandomKey& k : n.random_keys) {
      bind(k.uop, k.buffer);
      bindings_[k.uop.get()].random_words = k.words;
      unbind(k.uop.get());
    }
    // So is a symbolic dim's extent.
    for (const DecodedNode::Extent& x : n.extents) {
      bind(x.uop, x.buffer);
      bindings_[x.uop.get()].variable = x.term;
      unbind(x.uop.get());
    }
  }
  transfer.upload += decoded.inline_bytes;
  return absl::OkStatus();
}

void Session::erase_node(uint64_t id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  if (it->second.realized && !it->second.lazy_stale) unbind(it->second.lazy.get());
  if (it->second.leaf) unbind(it->second.leaf.get());
  if (it->second.handle != 0) {
    if (auto h = handles_.find(it->second.handle); h != handles_.end()) {
      held_.drop(h->second.buffer.get());
      handles_.erase(h);
    }
  }
  nodes_.erase(it);
}

void Session::erase_nodes(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) erase_node(id);
  sweep_orphans();
}

absl::StatusOr<DecodedNodes> Session::decode(const google::protobuf::RepeatedPtrField<v1::Node>& nodes) const {
  return decode_nodes(nodes, Resolver(*this), engine_, limits_);
}

uint64_t Session::new_handle(const BufferPtr& buffer, uint64_t node_id, bool from_node) {
  uint64_t h = next_handle_++;
  if (h == 0) h = next_handle_++;  // 0 means "no handle" on the wire
  handles_[h] = HandleEntry{buffer, node_id, from_node};
  held_.hold(buffer);
  return h;
}

absl::StatusOr<v1::RealizeResponse> Session::realize(const v1::RealizeRequest& request,
                                                     const std::function<bool()>& should_stop,
                                                     Transfer& transfer, QuickTier quick, bool tune_search) {
  bool deferred = false;
  absl::StatusOr<v1::RealizeResponse> r = realize_with(request, should_stop, transfer, 0, quick, tune_search, deferred);
  if (!r.ok()) remember_failure(request, r.status());
  return r;
}

void Session::remember_failure(const v1::RealizeRequest& request, const absl::Status& why) {
  std::lock_guard lock(mu_);
  failed_.record(request.nodes(), why);
}

std::optional<absl::StatusOr<v1::RealizeResponse>> Session::realize_now(const v1::RealizeRequest& request,
                                                                        const std::function<bool()>& should_stop,
                                                                        Transfer& transfer, int64_t work_limit) {
  bool deferred = false;
  absl::StatusOr<v1::RealizeResponse> r = realize_with(request, should_stop, transfer, work_limit, QuickTier::kAllowed, false, deferred);
  if (deferred) return std::nullopt;
  if (!r.ok()) remember_failure(request, r.status());
  return r;
}

absl::StatusOr<v1::RealizeResponse> Session::realize_with(const v1::RealizeRequest& request,
                                                          const std::function<bool()>& should_stop,
                                                          Transfer& transfer, int64_t work_limit, QuickTier quick,
                                                          bool tune_search, bool& deferred) {
  BusyGuard busy(*this);
  const Clock::time_point start = Clock::now();
  RealizeOptions options;
  options.streams = streams_;
  options.inline_work_limit = work_limit;
  options.quick_compile = quick == QuickTier::kAllowed;
  options.tune_search = tune_search;
  if (!request.default_device().empty()) {
    // Parsed to a code here; the client's text goes no further.
    absl::StatusOr<int64_t> code = device_code(request.default_device());
    if (!code.ok()) return absl::InvalidArgumentError(absl::StrCat("default_device: ", code.status().message()));
    if (absl::Status s = engine_.check_device(*code); !s.ok()) return s;
    options.default_device = *code;
  }
  std::vector<UOpRef> outputs;
  std::vector<UOpRef> keep_alive;  // the bound UOps, alive while the engine looks at them
  Bindings bound;
  std::vector<uint64_t> added;  // the ids this request defined, undone if the realize fails
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_open(); !s.ok()) return s;
    absl::StatusOr<DecodedNodes> decoded = decode_nodes(request.nodes(), Resolver(*this), engine_, limits_);
    if (!decoded.ok()) return decoded.status();
    absl::flat_hash_set<uint64_t> new_ids;
    for (const DecodedNode& n : decoded->nodes) new_ids.insert(n.id);
    const auto defined = [&](uint64_t id) { return nodes_.contains(id) || new_ids.contains(id); };
    for (uint64_t id : request.outputs()) {
      if (!defined(id)) {
        return absl::InvalidArgumentError(absl::StrCat("output ", id, " is not defined in this session"));
      }
    }
    for (uint64_t id : request.release_nodes()) {
      if (!defined(id) && !failed_.find(id)) {
        return absl::NotFoundError(absl::StrCat("release_nodes: node ", id, " is not defined in this session"));
      }
    }
    // Everything checked: commit the nodes.
    if (absl::Status s = commit_nodes(*decoded, added, transfer); !s.ok()) return s;
    outputs.reserve(request.outputs_size());
    for (uint64_t id : request.outputs()) outputs.push_back(nodes_.at(id).current());
    for (int i = 0; i < request.outputs_size(); ++i) {
      if (absl::Status s = check_concrete(request.outputs(i), outputs[i]); !s.ok()) {
        erase_nodes(added);
        return s;
      }
    }
    if (quotas_ != nullptr) {
      if (absl::Status s = quotas_->check_depth(outputs); !s.ok()) {
        erase_nodes(added);
        return s;
      }
    }
    keep_alive.reserve(bindings_.size());
    bound.reserve(bindings_.size());
    for (const auto& [ptr, b] : bindings_) {
      keep_alive.push_back(b.uop);
      bound.emplace(ptr, b.buffer);
    }
  }

  // The engine runs without the session lock: Release, Download and Close stay responsive,
  // and closing the session stops the realize between kernels.
  options.should_stop = [this, &should_stop] { return closed_.load() || (should_stop && should_stop()); };
  absl::StatusOr<RealizeResult> result = engine_.realize(outputs, bound, options);
  if (result.ok() && result->deferred) {
    // Not run: undone as a failed request is, for the worker that takes it to do it whole.
    deferred = true;
    std::lock_guard lock(mu_);
    erase_nodes(added);
    return v1::RealizeResponse();
  }
  if (!result.ok()) {
    // A failed request has no effect: the nodes it defined go again, so a retry can resend them.
    std::lock_guard lock(mu_);
    erase_nodes(added);
    return stopped(result.status(), "realize", should_stop);
  }
  if (result->outputs.size() != outputs.size()) {
    return absl::InternalError(absl::StrCat("engine returned ", result->outputs.size(), " buffers for ",
                                            outputs.size(), " outputs"));
  }

  v1::RealizeResponse response;
  std::lock_guard lock(mu_);
  if (closed_.load()) return absl::AbortedError(absl::StrCat("session ", id_, " was closed during the realize"));
  // The results are about to be held: the request fails (and its temporaries go) if they do not fit.
  absl::StatusOr<Reservation> room = held_.reserve(result->outputs);
  if (!room.ok()) {
    erase_nodes(added);
    return room.status();
  }
  uint64_t inline_budget = limits_.max_inline_bytes;
  for (int i = 0; i < request.outputs_size(); ++i) {
    const uint64_t id = request.outputs(i);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) {
      return absl::AbortedError(absl::StrCat("node ", id, " was released while it was being realized"));
    }
    NodeEntry& e = it->second;
    if (!e.realized) {
      e.realized = result->outputs[i];
      bind(e.lazy, e.realized);
      if (absl::StatusOr<UOpRef> leaf = frontend::buffer(e.realized->id(), e.realized->dtype(), e.realized->shape());
          leaf.ok()) {
        e.leaf = *std::move(leaf);
        bind(e.leaf, e.realized);
      }
    }
    if (e.handle == 0) e.handle = new_handle(e.realized, id, true);
    v1::TensorResult* r = response.add_results();
    r->set_node_id(id);
    r->set_handle(e.handle);
    r->set_dtype(to_wire(e.realized->dtype()));
    for (int64_t d : e.realized->shape()) r->add_shape(d);
    const uint64_t nbytes = e.realized->nbytes();
    if (request.want_data() && nbytes <= inline_budget) {
      absl::StatusOr<BufferPtr> host = engine_.to_host(e.realized, streams_.get());  // device buffers: a host copy
      if (!host.ok()) return host.status();
      r->set_has_data(true);
      r->set_data(static_cast<const char*>((*host)->data()), nbytes);
      inline_budget -= nbytes;
      transfer.download += nbytes;
    }
  }
  for (uint64_t id : request.release_nodes()) {
    erase_node(id);
    failed_.forget(id);
  }
  sweep_orphans();  // the outputs are realized now: leaves only they read can go

  v1::RealizeStats* stats = response.mutable_stats();
  stats->set_kernels(result->stats.kernels);
  stats->set_compiled(result->stats.compiled);
  stats->set_cache_hits(result->stats.cache_hits);
  stats->set_schedule_cache_hit(result->stats.schedule_cache_hit);
  stats->set_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  return response;
}

absl::Status Session::release(const v1::ReleaseRequest& request) {
  BusyGuard busy(*this);
  std::lock_guard lock(mu_);
  if (absl::Status s = check_open(); !s.ok()) return s;
  for (uint64_t id : request.node_ids()) {
    if (!nodes_.contains(id) && !failed_.find(id)) {
      return absl::NotFoundError(absl::StrCat("node ", id, " is not defined in this session"));
    }
  }
  for (uint64_t h : request.handles()) {
    if (!handles_.contains(h)) return absl::NotFoundError(absl::StrCat("handle ", h, " is not a buffer of this session"));
  }
  for (uint64_t id : request.node_ids()) {
    erase_node(id);
    failed_.forget(id);
  }
  for (uint64_t h : request.handles()) {
    auto it = handles_.find(h);
    if (it == handles_.end()) continue;  // went with its node above
    if (it->second.from_node) {
      if (auto n = nodes_.find(it->second.node_id); n != nodes_.end()) n->second.handle = 0;
    }
    held_.drop(it->second.buffer.get());
    handles_.erase(it);
  }
  sweep_orphans();
  return absl::OkStatus();
}

absl::StatusOr<PendingUpload> Session::begin_upload(const v1::UploadHeader& header) {
  BusyGuard busy(*this);
  if (absl::Status s = check_open(); !s.ok()) return s;
  std::optional<DType> dt = from_wire(header.dtype());
  if (!dt) {
    return absl::InvalidArgumentError(header.dtype() == v1::DTYPE_UNSPECIFIED
                                          ? std::string("upload header: dtype is required")
                                          : absl::StrCat("upload header: unknown dtype ", static_cast<int>(header.dtype())));
  }
  Shape shape(header.shape().begin(), header.shape().end());
  if (absl::Status s = check_shape(shape, limits_, "upload shape"); !s.ok()) return s;
  uint64_t nbytes = dtype_itemsize(*dt);
  for (int64_t d : shape) nbytes *= static_cast<uint64_t>(d);
  absl::StatusOr<Reservation> room;
  {
    std::lock_guard lock(mu_);
    room = held_.reserve_bytes(1, nbytes);
  }
  if (!room.ok()) return room.status();
  // Not zeroed: finish_upload refuses a buffer unless every byte arrived.
  absl::StatusOr<BufferPtr> buf = engine_.allocate(*dt, std::move(shape), Buffer::Fill::None);
  if (!buf.ok()) return buf.status();
  return PendingUpload(*std::move(buf), *std::move(room));
}

absl::StatusOr<v1::UploadResponse> Session::finish_upload(PendingUpload upload) {
  BusyGuard busy(*this);
  const BufferPtr& buf = upload.buffer();
  if (upload.received() != buf->nbytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload ended after ", upload.received(), " of ", buf->nbytes(),
                     " bytes (the stream closed, or a chunk did not parse)"));
  }
  normalize_bools(buf);
  std::lock_guard lock(mu_);
  if (absl::Status s = check_open(); !s.ok()) return s;
  v1::UploadResponse response;
  response.set_handle(new_handle(buf, 0, false));
  response.set_bytes(buf->nbytes());
  return response;
}

absl::StatusOr<uint64_t> Session::open_upload(const v1::UploadHeader& header) {
  const auto too_many = [] {
    return absl::ResourceExhaustedError(absl::StrCat("this session has ", kMaxOpenUploads,
                                                     " uploads open, the most it may: finish or abandon one first"));
  };
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_open(); !s.ok()) return s;
    if (uploads_.size() >= kMaxOpenUploads) return too_many();
  }
  absl::StatusOr<PendingUpload> upload = begin_upload(header);
  if (!upload.ok()) return upload.status();
  std::lock_guard lock(mu_);
  if (absl::Status s = check_open(); !s.ok()) return s;
  if (uploads_.size() >= kMaxOpenUploads) return too_many();
  const uint64_t id = next_upload_++;
  uploads_.emplace(id, *std::move(upload));
  return id;
}

absl::StatusOr<v1::UploadResponse> Session::upload_part(const v1::UploadPartRequest& part) {
  BusyGuard busy(*this);
  const uint64_t id = part.upload_id();
  std::optional<PendingUpload> upload;
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_open(); !s.ok()) return s;
    auto it = uploads_.find(id);
    if (it == uploads_.end()) {
      return absl::NotFoundError(absl::StrCat("upload ", id, " is not open in this session (finished, abandoned "
                                              "after a failed part, or never opened)"));
    }
    if (!it->second) {
      return absl::FailedPreconditionError(absl::StrCat("upload ", id, " is taking another part: send its parts one "
                                                        "after another"));
    }
    upload.swap(it->second);  // the slot stays, empty: busy
  }
  // The copy runs outside the lock; a failure abandons the upload (its buffer and quota go).
  const auto abandon = [&](absl::Status why) {
    std::lock_guard lock(mu_);
    uploads_.erase(id);
    return why;
  };
  if (part.offset() != upload->received()) {
    return abandon(absl::InvalidArgumentError(absl::StrCat("upload ", id, ": a part at offset ", part.offset(),
                                                           " after ", upload->received(),
                                                           " bytes: parts go in order, each where the last ended")));
  }
  if (absl::Status s = upload->append(part.data()); !s.ok()) return abandon(s);
  if (!part.last()) {
    std::lock_guard lock(mu_);
    auto it = uploads_.find(id);
    if (it == uploads_.end()) {  // the session closed meanwhile
      if (absl::Status s = check_open(); !s.ok()) return s;
      return absl::NotFoundError(absl::StrCat("upload ", id, " was abandoned"));
    }
    v1::UploadResponse response;
    response.set_bytes(upload->received());
    it->second.swap(upload);
    return response;
  }
  {
    std::lock_guard lock(mu_);
    uploads_.erase(id);
  }
  return finish_upload(*std::move(upload));
}

absl::StatusOr<BufferPtr> Session::buffer(uint64_t handle) const {
  const_cast<Session*>(this)->touch();
  std::lock_guard lock(mu_);
  if (absl::Status s = check_open(); !s.ok()) return s;
  return Resolver(*this).find_handle(handle);
}

void Session::close() {
  closed_.store(true);
  absl::flat_hash_map<uint64_t, NodeEntry> nodes;
  absl::flat_hash_map<uint64_t, HandleEntry> handles;
  absl::flat_hash_map<const UOp*, Binding> bindings;
  absl::flat_hash_map<uint64_t, std::shared_ptr<CompiledStep>> steps;
  absl::flat_hash_map<uint64_t, std::optional<PendingUpload>> uploads;
  {
    std::lock_guard lock(mu_);
    uploads.swap(uploads_);
    nodes.swap(nodes_);
    handles.swap(handles_);
    bindings.swap(bindings_);
    orphans_.clear();
    steps.swap(steps_);
    held_.clear();
  }
  // Buffers and graphs are freed here, outside the lock.
}

bool Session::idle_since(Clock::time_point cutoff) const {
  return attached_.load() == 0 && busy_.load() == 0 && last_used_.load() < cutoff.time_since_epoch().count();
}

uint64_t Session::held_buffers() const {
  std::lock_guard lock(mu_);
  return held_.buffers();
}

uint64_t Session::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_.bytes();
}

size_t Session::node_count() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

size_t Session::handle_count() const {
  std::lock_guard lock(mu_);
  return handles_.size();
}

// ---- SessionManager ------------------------------------------------------------------------

SessionManager::SessionManager(Engine& engine, const Limits& limits, std::chrono::seconds idle_timeout,
                               std::chrono::milliseconds reaper_interval, ClosedCallback on_closed,
                               Quotas* quotas)
    : engine_(engine), limits_(limits), idle_timeout_(idle_timeout), reaper_interval_(reaper_interval),
      on_closed_(std::move(on_closed)), quotas_(quotas) {
  if (idle_timeout_.count() > 0) {
    reaper_ = std::make_unique<Periodic>(reaper_interval_, [this] { reap(Clock::now() - idle_timeout_); });
  }
}

SessionManager::~SessionManager() {
  reaper_.reset();
  close_all("shutdown");
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::create(std::string_view tenant) {
  std::lock_guard lock(mu_);
  if (sessions_.size() >= limits_.max_sessions) {
    if (quotas_ != nullptr) quotas_->count_rejection("sessions");
    return absl::ResourceExhaustedError(
        absl::StrCat("too many sessions: max_sessions (", limits_.max_sessions, ") are open"));
  }
  std::shared_ptr<Usage> usage;
  if (quotas_ != nullptr) {
    usage = quotas_->tenant(tenant);
    if (absl::Status s = quotas_->begin_session(*usage); !s.ok()) return s;
  }
  std::string id = new_session_id();
  // Handles start at a random offset so they are not guessable counters shared across sessions.
  auto session = std::make_shared<Session>(id, engine_, limits_, (random_u64() >> 2) + 1, std::string(tenant),
                                           quotas_, std::move(usage));
  sessions_.emplace(std::move(id), session);
  created_.fetch_add(1);
  return session;
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::find(std::string_view id, std::string_view tenant) const {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(absl::string_view(id.data(), id.size()));
    if (it != sessions_.end() && it->second->tenant() == tenant) s = it->second;
  }
  if (!s) return absl::NotFoundError(absl::StrCat("session \"", bounded(id), "\" not found (closed, expired or never opened)"));
  s->touch();
  return s;
}

absl::Status SessionManager::close(std::string_view id, std::string_view tenant, std::string_view reason) {
  if (absl::StatusOr<std::shared_ptr<Session>> s = find(id, tenant); !s.ok()) return s.status();
  return close_any(id, reason);
}

absl::Status SessionManager::close_any(std::string_view id, std::string_view reason) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(absl::string_view(id.data(), id.size()));
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("session \"", bounded(id), "\" not found (closed, expired or never opened)"));
    }
    s = std::move(it->second);
    sessions_.erase(it);
  }
  s->close();
  if (quotas_ != nullptr) quotas_->end_session(*quotas_->tenant(s->tenant()));
  closed_.fetch_add(1);
  if (on_closed_) on_closed_(s->id(), reason);
  return absl::OkStatus();
}

void SessionManager::close_all(std::string_view reason) {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) ids.push_back(id);
  }
  for (const std::string& id : ids) (void)close_any(id, reason);
}

size_t SessionManager::reap(Clock::time_point cutoff) {
  std::vector<std::string> expired;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->idle_since(cutoff)) expired.push_back(id);
    }
  }
  size_t n = 0;
  for (const std::string& id : expired) n += close_any(id, "idle timeout").ok() ? 1 : 0;
  return n;
}

size_t SessionManager::live() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace polygrad::server
