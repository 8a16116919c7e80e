#include "server/quota.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// Adds `n` to `counter` unless that passes `limit` (0: no limit); false and unchanged if it would.
bool try_add(std::atomic<uint64_t>& counter, uint64_t n, uint64_t limit, uint64_t* would_be) {
  uint64_t cur = counter.load();
  for (;;) {
    const uint64_t next = cur + n;
    if (limit != 0 && next > limit) {
      *would_be = next;
      return false;
    }
    if (counter.compare_exchange_weak(cur, next)) return true;
  }
}

}  // namespace

// ---- Reservation ---------------------------------------------------------------------------

Reservation::Reservation(std::shared_ptr<Usage> session, std::shared_ptr<Usage> tenant, uint64_t buffers,
                         uint64_t bytes)
    : session_(std::move(session)), tenant_(std::move(tenant)), buffers_(buffers), bytes_(bytes) {}

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    reset();
    session_ = std::move(o.session_);
    tenant_ = std::move(o.tenant_);
    buffers_ = std::exchange(o.buffers_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Reservation::reset() {
  for (Usage* u : {session_.get(), tenant_.get()}) {
    if (u == nullptr) continue;
    u->buffers.fetch_sub(buffers_);
    u->bytes.fetch_sub(bytes_);
  }
  session_.reset();
  tenant_.reset();
  buffers_ = bytes_ = 0;
}

// ---- HeldBuffers ---------------------------------------------------------------------------

HeldBuffers::HeldBuffers(const Quotas* quotas, std::shared_ptr<Usage> tenant)
    : quotas_(quotas), session_(std::make_shared<Usage>()),
      tenant_(tenant ? std::move(tenant) : std::make_shared<Usage>()) {}

absl::StatusOr<Reservation> HeldBuffers::reserve(const std::vector<BufferPtr>& candidates) {
  uint64_t buffers = 0, bytes = 0;
  std::vector<const Buffer*> seen;
  for (const BufferPtr& b : candidates) {
    if (!b || refs_.contains(b.get()) || std::find(seen.begin(), seen.end(), b.get()) != seen.end()) continue;
    seen.push_back(b.get());
    ++buffers;
    bytes += b->nbytes();
  }
  return reserve_bytes(buffers, bytes);
}

absl::StatusOr<Reservation> HeldBuffers::reserve_bytes(uint64_t buffers, uint64_t bytes) {
  if (buffers == 0 && bytes == 0) return Reservation();
  if (quotas_ != nullptr) {
    if (absl::Status s = quotas_->charge(*session_, *tenant_, buffers, bytes); !s.ok()) return s;
  } else {
    session_->buffers += buffers, session_->bytes += bytes, tenant_->buffers += buffers, tenant_->bytes += bytes;
  }
  return Reservation(session_, tenant_, buffers, bytes);
}

void HeldBuffers::hold(const BufferPtr& buffer) {
  if (!buffer) return;
  auto [it, fresh] = refs_.try_emplace(buffer.get(), 0, buffer->nbytes());
  if (it->second.first++ > 0) return;
  (void)fresh;
  for (Usage* u : {session_.get(), tenant_.get()}) {
    u->buffers.fetch_add(1);
    u->bytes.fetch_add(buffer->nbytes());
  }
}

void HeldBuffers::drop(const Buffer* buffer) {
  auto it = refs_.find(buffer);
  if (it == refs_.end() || --it->second.first > 0) return;
  for (Usage* u : {session_.get(), tenant_.get()}) {
    u->buffers.fetch_sub(1);
    u->bytes.fetch_sub(it->second.second);
  }
  refs_.erase(it);
}

void HeldBuffers::clear() {
  for (const auto& [buffer, entry] : refs_) {
    for (Usage* u : {session_.get(), tenant_.get()}) {
      u->buffers.fetch_sub(1);
      u->bytes.fetch_sub(entry.second);
    }
  }
  refs_.clear();
}

// ---- Quotas --------------------------------------------------------------------------------

Quotas::Quotas(const Limits& limits, RejectCallback on_reject) : limits_(limits), on_reject_(std::move(on_reject)) {}

std::shared_ptr<Usage> Quotas::tenant(std::string_view name) {
  std::lock_guard lock(mu_);
  std::shared_ptr<Usage>& u = tenants_[absl::string_view(name.data(), name.size())];
  if (!u) u = std::make_shared<Usage>();
  return u;
}

absl::Status Quotas::reject(std::string_view limit, std::string_view what, uint64_t value,
                            std::string_view detail) const {
  if (on_reject_) on_reject_(limit);
  return absl::ResourceExhaustedError(absl::StrCat(av(what), " limit ", value, " exceeded: ", av(detail)));
}

absl::Status Quotas::begin_session(Usage& tenant) const {
  uint64_t would_be = 0;
  if (!try_add(tenant.sessions, 1, limits_.max_tenant_sessions, &would_be)) {
    return reject("tenant_sessions", "tenant sessions", limits_.max_tenant_sessions,
                  absl::StrCat("would have ", would_be, " open (--max-tenant-sessions)"));
  }
  return absl::OkStatus();
}

void Quotas::end_session(Usage& tenant) const { tenant.sessions.fetch_sub(1); }

absl::Status Quotas::charge(Usage& session, Usage& tenant, uint64_t buffers, uint64_t bytes) const {
  struct Step {
    Usage& usage;
    std::atomic<uint64_t> Usage::*field;
    uint64_t n;
    uint64_t limit;
    const char* label;
    const char* what;
    const char* flag;
  };
  const Step steps[] = {
      {session, &Usage::buffers, buffers, limits_.max_session_buffers, "session_buffers", "session buffers",
       "--max-session-buffers"},
      {session, &Usage::bytes, bytes, limits_.max_session_bytes, "session_bytes", "session buffer bytes",
       "--max-session-bytes"},
      {tenant, &Usage::buffers, buffers, limits_.max_tenant_buffers, "tenant_buffers", "tenant buffers",
       "--max-tenant-buffers"},
      {tenant, &Usage::bytes, bytes, limits_.max_tenant_bytes, "tenant_bytes", "tenant buffer bytes",
       "--max-tenant-bytes"},
  };
  size_t done = 0;
  for (const Step& s : steps) {
    uint64_t would_be = 0;
    if (!try_add(s.usage.*s.field, s.n, s.limit, &would_be)) {
      for (size_t i = 0; i < done; ++i) (steps[i].usage.*steps[i].field).fetch_sub(steps[i].n);
      return reject(s.label, s.what, s.limit, absl::StrCat("would hold ", would_be, " (", s.flag, ")"));
    }
    ++done;
  }
  return absl::OkStatus();
}

absl::StatusOr<Quotas::Ticket> Quotas::admit_request() {
  uint64_t would_be = 0;
  if (!try_add(in_flight_, 1, limits_.max_requests_in_flight, &would_be)) {
    return reject("requests_in_flight", "requests in flight", limits_.max_requests_in_flight,
                  absl::StrCat("would have ", would_be, " at once (--max-requests-in-flight); retry later"));
  }
  return Ticket(&in_flight_);
}

absl::Status Quotas::check_depth(const std::vector<UOpRef>& roots) const {
  // Longest path by an explicit post-order walk: a deep graph must not overflow our stack here.
  absl::flat_hash_map<const UOp*, uint64_t> depth;
  std::vector<std::pair<const UOp*, size_t>> stack;
  uint64_t deepest = 0;
  for (const UOpRef& root : roots) {
    if (!root || depth.contains(root.get())) continue;
    stack.emplace_back(root.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->src.size()) {
        const UOp* child = node->src[next++].get();
        if (child != nullptr && !depth.contains(child)) stack.emplace_back(child, 0);
        continue;
      }
      uint64_t d = 1;
      for (const UOpRef& s : node->src) d = std::max(d, depth[s.get()] + 1);
      depth[node] = d;
      deepest = std::max(deepest, d);
      stack.pop_back();
      if (d > limits_.max_graph_depth) {
        return reject("graph_depth", "graph depth", limits_.max_graph_depth,
                      absl::StrCat("the graph is at least ", d, " nodes deep (--max-graph-depth)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace polygrad::server
