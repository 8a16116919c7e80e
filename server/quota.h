// Quotas (DESIGN §4): what sessions and tenants may hold, and how many requests run at once.
// Every refusal is RESOURCE_EXHAUSTED naming the limit and the value, and is counted by limit
// (polygradd_quota_rejections_total). Limits of 0 are unlimited (except the global ones that
// validate() requires positive).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"
#include "server/options.h"

namespace polygrad::server {

// What one session or one tenant holds.
struct Usage {
  std::atomic<uint64_t> buffers{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> sessions{0};  // tenants only
};

class Quotas;

// Room taken ahead of a commit, given back when it goes out of scope (the commit has charged
// the real holdings by then, so nothing is counted twice for long).
class Reservation {
 public:
  Reservation() = default;
  Reservation(std::shared_ptr<Usage> session, std::shared_ptr<Usage> tenant, uint64_t buffers, uint64_t bytes);
  ~Reservation() { reset(); }
  Reservation(Reservation&& o) noexcept { *this = std::move(o); }
  Reservation& operator=(Reservation&& o) noexcept;
  void reset();

 private:
  std::shared_ptr<Usage> session_, tenant_;
  uint64_t buffers_ = 0, bytes_ = 0;
};

// The buffers one session holds (each counted once however many nodes and handles name it),
// charged to the session and its tenant. Not thread-safe: the session calls it under its lock.
class HeldBuffers {
 public:
  HeldBuffers(const Quotas* quotas, std::shared_ptr<Usage> tenant);
  ~HeldBuffers() { clear(); }
  HeldBuffers(const HeldBuffers&) = delete;
  HeldBuffers& operator=(const HeldBuffers&) = delete;

  // Checks that also holding those of `candidates` not held yet stays within the session and
  // tenant limits, and reserves the room. RESOURCE_EXHAUSTED names the limit otherwise.
  absl::StatusOr<Reservation> reserve(const std::vector<BufferPtr>& candidates);
  absl::StatusOr<Reservation> reserve_bytes(uint64_t buffers, uint64_t bytes);  // a buffer not allocated yet

  void hold(const BufferPtr& buffer);  // one more reference from the session's tables
  void drop(const Buffer* buffer);     // one reference fewer; the last one refunds the buffer
  void clear();                        // refunds everything

  uint64_t buffers() const { return session_->buffers.load(); }
  uint64_t bytes() const { return session_->bytes.load(); }

 private:
  const Quotas* quotas_;
  std::shared_ptr<Usage> session_;
  std::shared_ptr<Usage> tenant_;
  absl::flat_hash_map<const Buffer*, std::pair<int, uint64_t>> refs_;  // buffer -> (references, bytes)
};

class Quotas {
 public:
  using RejectCallback = std::function<void(std::string_view limit)>;
  Quotas(const Limits& limits, RejectCallback on_reject);

  const Limits& limits() const { return limits_; }

  // The usage record of a tenant, created on first use (tenants come from the tokens file).
  std::shared_ptr<Usage> tenant(std::string_view name);

  // A new session of `tenant`: RESOURCE_EXHAUSTED at max_tenant_sessions. end_session undoes it.
  absl::Status begin_session(Usage& tenant) const;
  void end_session(Usage& tenant) const;

  // Checks and adds `buffers`/`bytes` to both records atomically per record.
  absl::Status charge(Usage& session, Usage& tenant, uint64_t buffers, uint64_t bytes) const;

  // A request being handled; RESOURCE_EXHAUSTED at max_requests_in_flight. Ends with the ticket.
  class Ticket {
   public:
    explicit Ticket(std::atomic<uint64_t>* counter = nullptr) : counter_(counter) {}
    ~Ticket() {
      if (counter_ != nullptr) counter_->fetch_sub(1);
    }
    Ticket(Ticket&& o) noexcept : counter_(std::exchange(o.counter_, nullptr)) {}
    Ticket& operator=(Ticket&&) = delete;

   private:
    std::atomic<uint64_t>* counter_;
  };
  absl::StatusOr<Ticket> admit_request();
  uint64_t in_flight() const { return in_flight_.load(); }

  // The longest src chain of the graphs rooted at `roots` must stay within max_graph_depth.
  absl::Status check_depth(const std::vector<UOpRef>& roots) const;

  // Counts a refusal of `limit` made elsewhere (e.g. max_sessions).
  void count_rejection(std::string_view limit) const {
    if (on_reject_) on_reject_(limit);
  }

  // Counts a refusal of `limit` and builds its error: "<what> limit <limit> exceeded: <detail>".
  absl::Status reject(std::string_view limit, std::string_view what, uint64_t value, std::string_view detail) const;

 private:
  const Limits& limits_;
  RejectCallback on_reject_;
  std::atomic<uint64_t> in_flight_{0};
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Usage>> tenants_;
};

}  // namespace polygrad::server
