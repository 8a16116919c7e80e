#include "server/execute_stream.h"

#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/call_helpers.h"
#include "server/status.h"
#include "server/step_service.h"

namespace polygrad::server {
namespace {

using SessionPtr = std::shared_ptr<Session>;

// ---- Execute: one bidirectional stream carrying a session's commands ----------------------
//
// Commands are handled one at a time, in order. Exactly one thing drives the stream at any
// moment: an outstanding read, the writes of the current responses, or a realize on the
// worker pool; when it completes it starts the next (pump). So the reactor's state needs no
// lock; only `cancelled_` is touched from outside that chain.
class ExecuteReactor final : public grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse> {
 public:
  ExecuteReactor(const ServiceDeps& deps, std::string tenant, std::string request_id)
      : deps_(deps), start_(Clock::now()), tenant_(std::move(tenant)), request_id_(std::move(request_id)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return finish(absl::OkStatus());  // the client closed its side, or went away
    handle(request_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return finish(absl::CancelledError("the client stopped reading the stream"));
    pump();
  }

  void OnCancel() override { cancelled_.store(true); }

  void OnDone() override {
    if (session_) {
      session_->detach();
      if (owned_) (void)deps_.sessions.close_any(session_->id(), "stream ended");
    }
    delete this;
  }

 private:
  // A response waiting to be written; a download produces its chunks one write at a time.
  struct Outgoing {
    v1::ExecuteResponse message;
    BufferPtr download;
    uint64_t offset = 0;
    uint64_t chunk_bytes = 0;
  };

  std::string session_id() const { return session_ ? session_->id() : std::string(); }

  void handle(v1::ExecuteRequest& req) {
    const Clock::time_point start = Clock::now();
    const uint64_t rid = req.request_id();
    switch (req.command_case()) {
      case v1::ExecuteRequest::kOpen: return done("Execute.open", rid, start, open(req.open(), rid));
      case v1::ExecuteRequest::kRealize: return realize(req, rid, start);
      case v1::ExecuteRequest::kRelease: {
        absl::Status s = require_session();
        if (s.ok()) s = session_->release(req.release());
        if (s.ok()) reply(rid).mutable_released();
        return done("Execute.release", rid, start, s);
      }
      case v1::ExecuteRequest::kUpload: return upload(req.upload(), rid, start);
      case v1::ExecuteRequest::kDownload: {
        absl::Status s = require_session();
        absl::StatusOr<BufferPtr> b = s.ok() ? session_->buffer(req.download().handle()) : s;
        if (b.ok()) b = deps_.engine.to_host(*b);  // a device buffer is sent from a host copy
        if (b.ok()) {
          std::lock_guard lock(queue_mu_);
          queue_.push_back(Outgoing{response(rid), *std::move(b), 0, chunk_size(req.download().chunk_bytes(), deps_.limits)});
        }
        return done("Execute.download", rid, start, b.status());
      }
      case v1::ExecuteRequest::kClose: {
        absl::Status s = require_session();
        if (s.ok()) {
          session_->detach();
          s = deps_.sessions.close(session_->id(), tenant_, "closed by client");
          session_.reset();
          owned_ = false;
          uploads_.clear();
        }
        if (s.ok()) reply(rid).mutable_closed();
        return done("Execute.close", rid, start, s);
      }
      case v1::ExecuteRequest::kCompileStep:
      case v1::ExecuteRequest::kRunStep:
      case v1::ExecuteRequest::kReleaseStep: return step_command(req, rid, start);
      case v1::ExecuteRequest::COMMAND_NOT_SET: break;
    }
    done("Execute.unknown", rid, start, absl::InvalidArgumentError("the request carries no command"));
  }

  absl::Status open(const v1::OpenSession& open, uint64_t rid) {
    if (session_) return absl::FailedPreconditionError(absl::StrCat("this stream already has session ", session_->id()));
    absl::StatusOr<SessionPtr> s = open.attach_session_id().empty()
                                        ? deps_.sessions.create(tenant_)
                                        : deps_.sessions.find(open.attach_session_id(), tenant_);
    if (!s.ok()) return s.status();
    session_ = *std::move(s);
    owned_ = open.attach_session_id().empty();
    session_->attach();  // a session held by a live stream never idles out
    if (owned_) deps_.logger.info("session opened", {{"session", session_->id()}, {"by", "Execute"}});
    reply(rid).mutable_opened()->set_session_id(session_->id());
    return absl::OkStatus();
  }

  void realize(v1::ExecuteRequest& req, uint64_t rid, Clock::time_point start) {
    if (absl::Status s = require_session(); !s.ok()) return done("Execute.realize", rid, start, s);
    absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps_.admit();
    if (!ticket.ok()) return done("Execute.realize", rid, start, ticket.status());
    if (auto now = realize_now(deps_, *session_, req.realize(), [this] { return cancelled_.load(); })) {
      ticket->reset();
      if (now->ok()) *reply(rid).mutable_realized() = **std::move(now);
      return done("Execute.realize", rid, start, now->status());
    }
    // The heavy part runs on the pool; it resumes the stream when its answer is queued.
    deps_.submit("Execute.realize", [this, rid, start, session = session_, request = std::move(*req.mutable_realize()),
                       ticket = *std::move(ticket)]() mutable {
      absl::StatusOr<v1::RealizeResponse> r =
          run_realize(deps_, *session, request, [this] { return cancelled_.load(); });
      ticket.reset();
      if (r.ok()) *reply(rid).mutable_realized() = *std::move(r);
      done("Execute.realize", rid, start, r.status());
    });
  }

  // Compiled steps: compiling and running go to the pool like a realize; releasing is quick.
  void step_command(v1::ExecuteRequest& req, uint64_t rid, Clock::time_point start) {
    const auto c = req.command_case();
    const char* method = c == v1::ExecuteRequest::kCompileStep ? "Execute.compile_step"
                         : c == v1::ExecuteRequest::kRunStep   ? "Execute.run_step"
                                                               : "Execute.release_step";
    if (absl::Status s = require_session(); !s.ok()) return done(method, rid, start, s);
    if (c == v1::ExecuteRequest::kReleaseStep) {
      absl::Status s = session_->release_step(req.release_step());
      if (s.ok()) reply(rid).mutable_step_released();
      return done(method, rid, start, s);
    }
    absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps_.admit();
    if (!ticket.ok()) return done(method, rid, start, ticket.status());
    deps_.submit(method, [this, rid, start, method, session = session_, req = std::move(req),
                       ticket = *std::move(ticket)]() mutable {
      const auto stop = [this] { return cancelled_.load(); };
      absl::Status status;
      if (req.command_case() == v1::ExecuteRequest::kCompileStep) {
        auto r = compile_step(deps_, *session, req.compile_step(), stop);
        if (r.ok()) *reply(rid).mutable_step_compiled() = *std::move(r);
        status = r.status();
      } else {
        auto r = run_step(deps_, *session, req.run_step(), stop);
        if (r.ok()) *reply(rid).mutable_step_ran() = *std::move(r);
        status = r.status();
      }
      ticket.reset();
      done(method, rid, start, status);
    });
  }

  void upload(const v1::UploadChunk& chunk, uint64_t rid, Clock::time_point start) {
    absl::Status s = require_session();
    auto it = uploads_.find(chunk.upload_id());
    if (s.ok() && chunk.has_header()) {
      if (it != uploads_.end()) {
        s = absl::InvalidArgumentError(absl::StrCat("upload ", chunk.upload_id(), " was already started"));
      } else if (uploads_.size() >= deps_.limits.max_pending_uploads) {
        s = absl::ResourceExhaustedError(absl::StrCat("too many interleaved uploads: max_pending_uploads (",
                                                      deps_.limits.max_pending_uploads, ")"));
      } else {
        absl::StatusOr<PendingUpload> p = session_->begin_upload(chunk.header());
        if (p.ok()) it = uploads_.emplace(chunk.upload_id(), *std::move(p)).first;
        s = p.status();
      }
    } else if (s.ok() && it == uploads_.end()) {
      s = absl::InvalidArgumentError(
          absl::StrCat("upload ", chunk.upload_id(), " has no header: its first chunk must carry one"));
    }
    if (s.ok()) {
      s = it->second.append(chunk.data());
      deps_.metrics.add_upload_bytes(chunk.data().size());
    }
    if (!s.ok()) {
      if (it != uploads_.end()) uploads_.erase(it);
      return done("Execute.upload", rid, start, s);
    }
    if (!chunk.last()) return pump();  // more chunks to come: no answer yet
    absl::StatusOr<v1::UploadResponse> r = session_->finish_upload(std::move(it->second));
    uploads_.erase(it);
    if (r.ok()) *reply(rid).mutable_uploaded() = *std::move(r);
    done("Execute.upload", rid, start, r.status());
  }

  absl::Status require_session() const {
    if (!session_) return absl::FailedPreconditionError("no session on this stream: the first command must be open");
    return absl::OkStatus();
  }

  static v1::ExecuteResponse response(uint64_t rid) {
    v1::ExecuteResponse r;
    r.set_request_id(rid);
    return r;
  }

  // Queues a response to request `rid`; the caller fills in its result.
  v1::ExecuteResponse& reply(uint64_t rid) {
    std::lock_guard lock(queue_mu_);
    queue_.push_back(Outgoing{response(rid), nullptr, 0, 0});
    return queue_.back().message;  // deque: stays put while later responses are queued
  }

  // A command finished: count it, answer a failure with an Error (the stream stays open), go on.
  void done(std::string_view method, uint64_t rid, Clock::time_point start, const absl::Status& status) {
    deps_.record(method, session_id(), start, status, absl::StrCat(request_id_, "/", rid));
    if (!status.ok()) {
      v1::Error* e = reply(rid).mutable_error();
      e->set_code(static_cast<int32_t>(to_grpc_code(status.code())));
      e->set_message(std::string(status.message()));
    }
    pump();
  }

  // Writes the next queued response, or reads the next command when none is left.
  void pump() {
    bool write = false;
    {
      std::lock_guard lock(queue_mu_);
      if (!queue_.empty()) {
        write = true;
        Outgoing& front = queue_.front();
        if (front.download) {
          current_.Clear();
          current_.set_request_id(front.message.request_id());
          front.offset = fill_chunk(*current_.mutable_chunk(), *front.download, front.offset, front.chunk_bytes);
          deps_.metrics.add_download_bytes(current_.chunk().data().size());
          if (current_.chunk().last()) queue_.pop_front();
        } else {
          current_ = std::move(front.message);
          queue_.pop_front();
        }
      }
    }
    // Outside the lock: gRPC may run the next reaction on another thread before these return.
    if (write) {
      StartWrite(&current_);
    } else {
      StartRead(&request_);
    }
  }

  void finish(const absl::Status& status) {
    {
      std::lock_guard lock(queue_mu_);
      queue_.clear();
    }
    uploads_.clear();
    deps_.record("Execute", session_id(), start_, status, request_id_);
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  const Clock::time_point start_;
  const std::string tenant_;
  const std::string request_id_;
  std::atomic<bool> cancelled_{false};
  v1::ExecuteRequest request_;
  // The stream runs one command at a time, but its turns move between gRPC's threads and the
  // worker pool's through gRPC's own (uninstrumented) queues; this lock orders them where
  // ThreadSanitizer can see it (a worker queueing an answer after another worker wrote the last).
  std::mutex queue_mu_;
  v1::ExecuteResponse current_;      // guarded by queue_mu_ until handed to StartWrite
  std::deque<Outgoing> queue_;       // guarded by queue_mu_
  SessionPtr session_;
  bool owned_ = false;  // opened by this stream: closed when the stream ends (else only detached)
  absl::flat_hash_map<uint64_t, PendingUpload> uploads_;
};

}  // namespace

grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* new_execute_stream(const ServiceDeps& deps,
                                                                                    std::string tenant,
                                                                                    std::string request_id) {
  return new ExecuteReactor(deps, std::move(tenant), std::move(request_id));
}

}  // namespace polygrad::server
