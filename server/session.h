// Sessions: everything one client holds on the daemon. A session owns a node table (client node
// id -> lazy UOp and, once realized, its buffer) and a handle table (opaque handle -> buffer).
// Handles belong to one session: another session's handle is simply NOT_FOUND there. Closing a
// session (explicitly, by idle expiry or when its stream drops) frees everything it held.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/engine/device_streams.h"
#include "core/engine/engine.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/decode.h"
#include "server/failed_nodes.h"
#include "server/options.h"
#include "server/periodic.h"
#include "server/quota.h"
#include "server/step.h"

namespace polygrad::server {

using Clock = std::chrono::steady_clock;

// Byte counts a session operation moved, for the transfer metric.
struct Transfer {
  uint64_t upload = 0;
  uint64_t download = 0;
};

// An upload being assembled, chunk by chunk, into a buffer allocated from its header.
class PendingUpload {
 public:
  // `room` is the quota reserved for the buffer until the upload is finished or abandoned.
  explicit PendingUpload(BufferPtr buffer, Reservation room = {}) : buffer_(std::move(buffer)), room_(std::move(room)) {}
  // Appends the next bytes; INVALID_ARGUMENT when they run past the tensor's size.
  absl::Status append(std::string_view data);
  uint64_t received() const { return offset_; }
  const BufferPtr& buffer() const { return buffer_; }

 private:
  BufferPtr buffer_;
  uint64_t offset_ = 0;
  Reservation room_;
};

class Session {
 public:
  // `quotas` (may be null: no quotas) charges what the session holds to it and to `tenant_usage`.
  Session(std::string id, Engine& engine, const Limits& limits, uint64_t first_handle, std::string tenant = {},
          const Quotas* quotas = nullptr, std::shared_ptr<Usage> tenant_usage = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  const std::string& tenant() const { return tenant_; }  // "" without a tokens file
  // Distinct buffers the session's nodes and handles hold, and their bytes (the quota's view).
  uint64_t held_buffers() const;
  uint64_t held_bytes() const;

  // Adds the request's nodes (all or none), realizes its outputs, then applies release_nodes.
  // `should_stop` is polled between kernels (client gone, deadline, shutdown).
  // `quick`: whether new CPU kernels may first run a quick build (RealizeOptions::quick_compile);
  // prewarm refuses it. `tune_search`: RealizeOptions::tune_search (a prewarm manifest's `tune`).
  enum class QuickTier { kAllowed, kRefused };
  absl::StatusOr<v1::RealizeResponse> realize(const v1::RealizeRequest& request,
                                              const std::function<bool()>& should_stop, Transfer& transfer,
                                              QuickTier quick = QuickTier::kAllowed, bool tune_search = false);
  // The same, only when it can be answered at once: the engine holds the request's program in its
  // schedule cache and its kernels iterate at most `work_limit` times (RealizeOptions::
  // inline_work_limit). Otherwise nullopt, and the request had no effect: give it to realize().
  // For a thread that must not block, such as a gRPC callback.
  std::optional<absl::StatusOr<v1::RealizeResponse>> realize_now(const v1::RealizeRequest& request,
                                                                 const std::function<bool()>& should_stop,
                                                                 Transfer& transfer, int64_t work_limit);
  // Forgets node ids (with the handles given for them) and explicit handles. All or nothing:
  // an unknown id or handle is NOT_FOUND and nothing is released.
  absl::Status release(const v1::ReleaseRequest& request);

  // Upload: a buffer from the header (dtype and shape checked against the limits), then the
  // chunks, then a handle once every byte arrived.
  absl::StatusOr<PendingUpload> begin_upload(const v1::UploadHeader& header);
  absl::StatusOr<v1::UploadResponse> finish_upload(PendingUpload upload);

  // The same in parts (OpenUpload, UploadPart): the upload is kept by the session under an id
  // between calls, at most kMaxOpenUploads at once. A part must start where the last one ended;
  // a failed part abandons the upload, and close() frees the open ones. A part of an upload whose
  // previous part is still being copied is FAILED_PRECONDITION.
  static constexpr size_t kMaxOpenUploads = 16;
  absl::StatusOr<uint64_t> open_upload(const v1::UploadHeader& header);
  absl::StatusOr<v1::UploadResponse> upload_part(const v1::UploadPartRequest& part);

  absl::StatusOr<BufferPtr> buffer(uint64_t handle) const;

  // Compiled steps (defined in server/step.cpp; wire contract in polygrad.proto). CompileStep adds
  // the request's nodes (kept only when the compile succeeds) and compiles the step; RunStep feeds
  // inputs, runs it and updates the assign targets in place; another session's step id is
  // NOT_FOUND. Targets and inputs that share a buffer with other nodes get a private copy first.
  absl::StatusOr<v1::CompileStepResponse> compile_step(const v1::CompileStepRequest& request,
                                                       const std::function<bool()>& should_stop, Transfer& transfer);
  absl::StatusOr<v1::RunStepResponse> run_step(const v1::RunStepRequest& request,
                                               const std::function<bool()>& should_stop, Transfer& transfer);
  absl::Status release_step(const v1::ReleaseStepRequest& request);

  // Frees every node and handle; later calls fail with NOT_FOUND. Idempotent.
  void close();

  // Idle-expiry bookkeeping: a session in use (a call running, or a stream attached) never expires.
  void touch() { last_used_.store(Clock::now().time_since_epoch().count()); }
  bool idle_since(Clock::time_point cutoff) const;
  void attach() { attached_.fetch_add(1); }
  void detach() { attached_.fetch_sub(1); }

  size_t node_count() const;
  size_t handle_count() const;
  size_t step_count() const;

 private:
  struct NodeEntry {
    UOpRef lazy;
    BufferPtr realized;   // null until realized; BUFFER leaves are realized from the start
    // Once a computed node is realized, the graph leaf that stands for its buffer: nodes decoded
    // later reference this instead of `lazy`, so a training loop's history is not chained from
    // step to step (`lazy` stays bound only for nodes decoded before the realize).
    UOpRef leaf;
    uint64_t handle = 0;  // the handle given out for this node's result, 0 when none
    // A step wrote into `realized` in place, so `lazy` no longer computes its contents: its
    // binding was dropped (so hash-consed equal graphs are recomputed).
    bool lazy_stale = false;
    const UOpRef& current() const { return leaf ? leaf : lazy; }
  };
  struct HandleEntry {
    BufferPtr buffer;
    uint64_t node_id = 0;
    bool from_node = false;
  };
  // A realized UOp bound to its buffer. Hash-consing makes equal graphs one UOp, so several
  // nodes may share a binding: it goes when the last of them does, unless it is a BUFFER leaf
  // that an unrealized node's graph still reads (see orphans_).
  struct Binding {
    UOpRef uop;
    BufferPtr buffer;
    int refs = 0;
    // A random op's key (its words as decoded): a compiled step may draw from others per run.
    std::optional<std::array<uint32_t, 3>> random_words;
    // A symbolic dim's extent that named its variable: a compiled step may set it per run.
    std::optional<VariableTerm> variable;
  };
  class Resolver;
  class BusyGuard;

  absl::Status check_open() const;
  // The engine's answer for a call that stopped: when the stop was this session closing under
  // it, and not the caller's own `should_stop` (cancel, deadline, shutdown), the caller learns
  // that (ABORTED naming the session and `what` ran) instead of a bare CANCELLED it never asked for.
  absl::Status stopped(absl::Status engine_status, const char* what, const std::function<bool()>& should_stop) const;
  void bind(const UOpRef& uop, const BufferPtr& buffer);
  void unbind(const UOp* uop);
  // realize() and realize_now(): a deferred realize (work_limit > 0) returns OK with `deferred` set.
  absl::StatusOr<v1::RealizeResponse> realize_with(const v1::RealizeRequest& request,
                                                   const std::function<bool()>& should_stop, Transfer& transfer,
                                                   int64_t work_limit, QuickTier quick, bool tune_search,
                                                   bool& deferred);
  // Drops the orphaned bindings no unrealized node's graph reaches any more (mu_ held).
  void sweep_orphans();
  void erase_node(uint64_t id);
  // A realize failed: its node ids are remembered with why (failed_nodes.h), for the requests
  // sent behind it.
  void remember_failure(const v1::RealizeRequest& request, const absl::Status& why);
  // Undoes a failed request: erases the nodes it added, then sweeps the orphans they left.
  void erase_nodes(const std::vector<uint64_t>& ids);
  // Adds decoded nodes to the tables (mu_ held), after reserving quota room for their inline data;
  // the ids added go to `added` so a failing request can erase them again.
  absl::Status commit_nodes(DecodedNodes& decoded, std::vector<uint64_t>& added, Transfer& transfer);
  uint64_t new_handle(const BufferPtr& buffer, uint64_t node_id, bool from_node);
  // Decodes wire nodes against this session's tables (mu_ held); adds nothing.
  absl::StatusOr<DecodedNodes> decode(const google::protobuf::RepeatedPtrField<v1::Node>& nodes) const;
  // Compiled-step helpers (server/step.cpp), called with mu_ held.
  absl::StatusOr<BufferPtr> step_buffer_of(uint64_t node_id, std::string_view role);
  // Into `step`: the key buffers of the random nodes `spec` computes whose streams the trace drew
  // (`traced`, may be null), and the extents of its symbolic dims that named their variable.
  absl::Status find_step_keys(const v1::StepRandom* traced, const StepSpec& spec, CompiledStep& step) const;
  absl::Status privatize(uint64_t node_id);
  // `clean`: nodes already found not to read them (skipped next time).
  void invalidate_readers(const absl::flat_hash_set<uint64_t>& buffer_ids,
                          absl::flat_hash_map<uint64_t, const UOp*>& clean);

  const std::string id_;
  const std::string tenant_;
  Engine& engine_;
  const Limits& limits_;
  const Quotas* quotas_;
  // The session's GPU streams: its realizes, steps and transfers queue in order on them.
  const std::shared_ptr<DeviceStreams> streams_ = std::make_shared<DeviceStreams>();

  std::atomic<bool> closed_{false};
  std::atomic<int> attached_{0};
  std::atomic<int> busy_{0};
  std::atomic<Clock::rep> last_used_;

  mutable std::mutex mu_;
  absl::flat_hash_map<uint64_t, NodeEntry> nodes_;
  FailedNodes failed_;  // ids of failed realizes, so the requests pipelined behind them say why
  absl::flat_hash_map<uint64_t, HandleEntry> handles_;
  absl::flat_hash_map<const UOp*, Binding> bindings_;
  // BUFFER bindings whose last node was released (refs 0): a lazy node built on a released leaf
  // must still find its data when it is realized later, so the binding and its buffer stay until
  // sweep_orphans finds no unrealized graph reaching it.
  absl::flat_hash_set<const UOp*> orphans_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<CompiledStep>> steps_;
  // Uploads in parts between their calls; empty while a part is being copied into it.
  absl::flat_hash_map<uint64_t, std::optional<PendingUpload>> uploads_;
  uint64_t next_upload_ = 1;
  // One step run at a time per session: steps of one model write the same buffers.
  std::mutex step_run_mu_;
  uint64_t next_handle_;
  uint64_t next_step_;
  HeldBuffers held_;  // guarded by mu_
};

// All live sessions, their ids, the max_sessions limit and the idle reaper.
class SessionManager {
 public:
  using ClosedCallback = std::function<void(const std::string& id, std::string_view reason)>;

  // `quotas`, when not null, enforces the per-tenant session count and buffer quotas.
  SessionManager(Engine& engine, const Limits& limits, std::chrono::seconds idle_timeout,
                 std::chrono::milliseconds reaper_interval, ClosedCallback on_closed = {},
                 Quotas* quotas = nullptr);
  ~SessionManager();  // stops the reaper and closes every session

  // A new session of `tenant` ("" when the daemon has no tokens file).
  absl::StatusOr<std::shared_ptr<Session>> create(std::string_view tenant);
  // NOT_FOUND naming the id when there is no such live session of `tenant`: another tenant's
  // session is indistinguishable from one that does not exist. Touches the session.
  absl::StatusOr<std::shared_ptr<Session>> find(std::string_view id, std::string_view tenant) const;
  // Like find, closing needs the session's tenant. close_any is for the daemon itself (reaper, drain).
  absl::Status close(std::string_view id, std::string_view tenant, std::string_view reason);
  absl::Status close_any(std::string_view id, std::string_view reason);
  void close_all(std::string_view reason);
  // Closes sessions idle since before `cutoff`; returns how many. The reaper calls this.
  size_t reap(Clock::time_point cutoff);

  size_t live() const;
  uint64_t created_total() const { return created_.load(); }
  uint64_t closed_total() const { return closed_.load(); }

 private:
  Engine& engine_;
  const Limits& limits_;
  const std::chrono::seconds idle_timeout_;
  const std::chrono::milliseconds reaper_interval_;
  ClosedCallback on_closed_;
  Quotas* quotas_;

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_;
  std::atomic<uint64_t> created_{0};
  std::atomic<uint64_t> closed_{0};

  std::unique_ptr<Periodic> reaper_;  // last: stopped first; null without an idle timeout
};

// A random 128-bit id as 32 hex digits.
std::string new_session_id();

}  // namespace polygrad::server
