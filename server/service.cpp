#include "server/service.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/auth.h"
#include "server/request_id.h"
#include "server/status.h"
#include "server/step_service.h"

namespace polygrad::server {
namespace {

using SessionPtr = std::shared_ptr<Session>;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A download's chunks are at least 64 KiB (or the default chunk, if smaller): a client asking
// for 1-byte chunks would otherwise cost the daemon a message per byte.
constexpr uint64_t kMinChunkBytes = 64 << 10;

uint64_t chunk_size(uint64_t requested, const Limits& limits) {
  if (requested == 0) return limits.chunk_bytes;
  return std::clamp(requested, std::min(kMinChunkBytes, limits.chunk_bytes), limits.max_message_bytes);
}

// Fills `c` with the bytes of `buf` from `offset`; the first chunk carries dtype and shape.
// Returns the offset after this chunk.
uint64_t fill_chunk(v1::DownloadChunk& c, const Buffer& buf, uint64_t offset, uint64_t chunk_bytes) {
  c.Clear();
  const uint64_t n = std::min<uint64_t>(chunk_bytes, buf.nbytes() - offset);
  c.set_offset(offset);
  c.set_data(static_cast<const char*>(buf.data()) + offset, n);
  if (offset == 0) {
    c.set_dtype(to_wire(buf.dtype()));
    for (int64_t d : buf.shape()) c.add_shape(d);
  }
  c.set_last(offset + n == buf.nbytes());
  return offset + n;
}

absl::StatusOr<v1::RealizeResponse> run_realize(const ServiceDeps& deps, Session& session,
                                                const v1::RealizeRequest& request,
                                                const std::function<bool()>& should_stop) {
  Transfer transfer;
  absl::StatusOr<v1::RealizeResponse> r = session.realize(request, should_stop, transfer);
  deps.metrics.add_upload_bytes(transfer.upload);
  deps.metrics.add_download_bytes(transfer.download);
  return r;
}

// A realize the engine can answer from its schedule cache with little work is answered on the
// calling gRPC thread: handing it to the worker pool (a thread wake-up each way) would cost more
// than the work. The bounds keep that thread from blocking: a request's bytes are decoded twice
// when it is deferred, and the kernels may iterate this much in all (a few microseconds; a CPU
// launch is split across threads from 2^15 iterations on).
constexpr size_t kInlineRequestBytes = 16 << 10;
constexpr int64_t kInlineWorkLimit = 1 << 14;

// The response when the realize could be answered at once, else nullopt (it had no effect).
std::optional<absl::StatusOr<v1::RealizeResponse>> realize_now(const ServiceDeps& deps, Session& session,
                                                                const v1::RealizeRequest& request,
                                                                const std::function<bool()>& should_stop) {
  if (request.ByteSizeLong() > kInlineRequestBytes) return std::nullopt;
  Transfer transfer;
  std::optional<absl::StatusOr<v1::RealizeResponse>> r =
      session.realize_now(request, should_stop, transfer, kInlineWorkLimit);
  if (r) {
    deps.metrics.add_upload_bytes(transfer.upload);
    deps.metrics.add_download_bytes(transfer.download);
  }
  return r;
}

// ---- Upload: client stream of chunks, the first with the header -----------------------------

class UploadReactor final : public grpc::ServerReadReactor<v1::UploadChunk> {
 public:
  UploadReactor(const ServiceDeps& deps, v1::UploadResponse* response, std::string tenant, std::string request_id)
      : deps_(deps), response_(response), start_(Clock::now()), tenant_(std::move(tenant)),
        request_id_(std::move(request_id)) {
    absl::StatusOr<std::shared_ptr<Quotas::Ticket>> t = deps_.admit();
    if (!t.ok()) {
      finish(t.status());
      return;
    }
    ticket_ = *std::move(t);
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished sending (or went away)
      if (!pending_) return finish(absl::InvalidArgumentError("upload stream ended before its first chunk (none was sent, or it did not parse)"));
      absl::StatusOr<v1::UploadResponse> r = session_->finish_upload(*std::move(pending_));
      pending_.reset();
      if (r.ok()) *response_ = *std::move(r);
      return finish(r.status());
    }
    if (!pending_) {
      if (!chunk_.has_header()) return finish(absl::InvalidArgumentError("the first upload chunk must carry the header"));
      session_id_ = chunk_.header().session_id();
      absl::StatusOr<SessionPtr> s = deps_.sessions.find(session_id_, tenant_);
      if (!s.ok()) return finish(s.status());
      session_ = *std::move(s);
      absl::StatusOr<PendingUpload> p = session_->begin_upload(chunk_.header());
      if (!p.ok()) return finish(p.status());
      pending_.emplace(*std::move(p));
    } else if (chunk_.has_header()) {
      return finish(absl::InvalidArgumentError("only the first upload chunk may carry a header"));
    }
    if (absl::Status s = pending_->append(chunk_.data()); !s.ok()) return finish(s);
    deps_.metrics.add_upload_bytes(chunk_.data().size());
    StartRead(&chunk_);
  }

  void OnDone() override { delete this; }

 private:
  void finish(const absl::Status& status) {
    pending_.reset();  // an abandoned upload frees its buffer now
    ticket_.reset();
    deps_.record("Upload", session_id_, start_, status, request_id_);
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  v1::UploadResponse* response_;
  const Clock::time_point start_;
  const std::string tenant_;
  const std::string request_id_;
  std::shared_ptr<Quotas::Ticket> ticket_;
  v1::UploadChunk chunk_;
  std::string session_id_;
  SessionPtr session_;
  std::optional<PendingUpload> pending_;
};

// ---- Download: server stream of chunks ------------------------------------------------------

class DownloadReactor final : public grpc::ServerWriteReactor<v1::DownloadChunk> {
 public:
  DownloadReactor(const ServiceDeps& deps, const v1::DownloadRequest& request, const std::string& tenant,
                  std::string request_id)
      : deps_(deps), start_(Clock::now()), session_id_(request.session_id()),
        chunk_bytes_(chunk_size(request.chunk_bytes(), deps.limits)), request_id_(std::move(request_id)) {
    absl::StatusOr<std::shared_ptr<Quotas::Ticket>> t = deps_.admit();
    if (!t.ok()) {
      finish(t.status());
      return;
    }
    ticket_ = *std::move(t);
    absl::StatusOr<SessionPtr> s = deps_.sessions.find(session_id_, tenant);
    if (!s.ok()) {
      finish(s.status());
      return;
    }
    absl::StatusOr<BufferPtr> b = (*s)->buffer(request.handle());
    if (b.ok()) b = deps_.engine.to_host(*b);  // a device buffer is sent from a host copy
    if (!b.ok()) {
      finish(b.status());
      return;
    }
    buffer_ = *std::move(b);
    next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return finish(absl::CancelledError("the client stopped reading the download"));
    if (chunk_.last()) return finish(absl::OkStatus());
    next();
  }

  void OnDone() override { delete this; }

 private:
  void next() {
    offset_ = fill_chunk(chunk_, *buffer_, offset_, chunk_bytes_);
    deps_.metrics.add_download_bytes(chunk_.data().size());
    StartWrite(&chunk_);
  }

  void finish(const absl::Status& status) {
    buffer_.reset();
    ticket_.reset();
    deps_.record("Download", session_id_, start_, status, request_id_);
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  const Clock::time_point start_;
  const std::string session_id_;
  const uint64_t chunk_bytes_;
  const std::string request_id_;
  std::shared_ptr<Quotas::Ticket> ticket_;
  BufferPtr buffer_;
  uint64_t offset_ = 0;
  v1::DownloadChunk chunk_;
};

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
    queue_.push_back(Outgoing{response(rid), nullptr, 0, 0});
    return queue_.back().message;
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
    if (queue_.empty()) {
      StartRead(&request_);
      return;
    }
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
    StartWrite(&current_);
  }

  void finish(const absl::Status& status) {
    queue_.clear();
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
  v1::ExecuteResponse current_;
  std::deque<Outgoing> queue_;
  SessionPtr session_;
  bool owned_ = false;  // opened by this stream: closed when the stream ends (else only detached)
  absl::flat_hash_map<uint64_t, PendingUpload> uploads_;
};

}  // namespace

// ---- shared bookkeeping ---------------------------------------------------------------------

void ServiceDeps::submit(std::string_view method, std::function<void()> task) const {
  pool.submit([this, method = std::string(method), queued = Clock::now(), task = std::move(task)] {
    metrics.observe_queue(method, std::chrono::duration<double>(Clock::now() - queued).count());
    task();
  });
}

absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ServiceDeps::admit() const {
  if (quotas == nullptr) return std::shared_ptr<Quotas::Ticket>();
  absl::StatusOr<Quotas::Ticket> t = quotas->admit_request();
  if (!t.ok()) return t.status();
  return std::make_shared<Quotas::Ticket>(*std::move(t));
}

void ServiceDeps::record(std::string_view method, std::string_view session_id, Clock::time_point start,
                         const absl::Status& status, std::string_view request_id) const {
  const double secs = seconds_since(start);
  metrics.observe_request(method, status.code(), secs);
  if (status.ok()) {
    if (logger.enabled(LogLevel::Debug)) {
      logger.debug("request", {{"method", std::string(method)},
                               {"session", std::string(session_id)},
                               {"request_id", std::string(request_id)},
                               {"seconds", absl::StrFormat("%.6f", secs)}});
    }
    return;
  }
  const bool internal = status.code() == absl::StatusCode::kInternal ||
                        status.code() == absl::StatusCode::kUnknown || status.code() == absl::StatusCode::kDataLoss;
  logger.log(internal ? LogLevel::Error : LogLevel::Warning, "request failed",
             {{"method", std::string(method)},
              {"session", std::string(session_id)},
              {"request_id", std::string(request_id)},
              {"code", code_name(status.code())},
              {"error", std::string(status.message())}});
}

grpc::ServerUnaryReactor* PolygradService::finish(grpc::CallbackServerContext* ctx, std::string_view method,
                                                  std::string_view session_id, Clock::time_point start,
                                                  const absl::Status& status) {
  deps_.record(method, session_id, start, status, request_id_of(*ctx));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(to_grpc_status(status));
  return reactor;
}

// ---- unary RPCs -----------------------------------------------------------------------------

grpc::ServerUnaryReactor* PolygradService::CreateSession(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateSessionRequest*,
                                                         v1::CreateSessionResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps_.admit();
  if (!ticket.ok()) return finish(ctx, "CreateSession", "", start, ticket.status());
  absl::StatusOr<SessionPtr> s = deps_.sessions.create(tenant_of(*ctx));
  if (s.ok()) {
    response->set_session_id((*s)->id());
    deps_.logger.info("session opened", {{"session", (*s)->id()},
                                         {"tenant", (*s)->tenant()},
                                         {"request_id", request_id_of(*ctx)},
                                         {"by", "CreateSession"}});
  }
  return finish(ctx, "CreateSession", s.ok() ? (*s)->id() : "", start, s.status());
}

grpc::ServerUnaryReactor* PolygradService::CloseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::CloseSessionResponse*) {
  const Clock::time_point start = Clock::now();
  return finish(ctx, "CloseSession", request->session_id(), start,
                deps_.sessions.close(request->session_id(), tenant_of(*ctx), "closed by client"));
}

grpc::ServerUnaryReactor* PolygradService::Realize(grpc::CallbackServerContext* ctx,
                                                   const v1::RealizeRequest* request, v1::RealizeResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps_.admit();
  if (!ticket.ok()) return finish(ctx, "Realize", request->session_id(), start, ticket.status());
  absl::StatusOr<SessionPtr> s = deps_.sessions.find(request->session_id(), tenant_of(*ctx));
  if (!s.ok()) return finish(ctx, "Realize", request->session_id(), start, s.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const auto answer = [this, ctx, response, reactor, start](Session& session, absl::StatusOr<v1::RealizeResponse> r,
                                                           bool past_deadline) {
    absl::Status status = r.status();
    if (r.ok()) {
      *response = *std::move(r);
    } else if (status.code() == absl::StatusCode::kCancelled && past_deadline) {
      status = absl::DeadlineExceededError(absl::StrCat("deadline exceeded during realize: ", status.message()));
    }
    deps_.record("Realize", session.id(), start, status, request_id_of(*ctx));
    reactor->Finish(to_grpc_status(status));
  };
  const auto past_deadline = [ctx] { return std::chrono::system_clock::now() > ctx->deadline(); };
  if (auto now = realize_now(deps_, **s, *request, [&] { return ctx->IsCancelled() || past_deadline(); })) {
    ticket->reset();
    answer(**s, *std::move(now), past_deadline());
    return reactor;
  }
  deps_.submit("Realize", [this, ctx, request, answer, past_deadline, session = *std::move(s),
                           ticket = *std::move(ticket)]() mutable {
    absl::StatusOr<v1::RealizeResponse> r =
        run_realize(deps_, *session, *request, [&] { return ctx->IsCancelled() || past_deadline(); });
    ticket.reset();
    answer(*session, std::move(r), past_deadline());
  });
  return reactor;
}

grpc::ServerUnaryReactor* PolygradService::Release(grpc::CallbackServerContext* ctx,
                                                   const v1::ReleaseRequest* request, v1::ReleaseResponse*) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<SessionPtr> s = deps_.sessions.find(request->session_id(), tenant_of(*ctx));
  absl::Status status = s.ok() ? (*s)->release(*request) : s.status();
  return finish(ctx, "Release", request->session_id(), start, status);
}

grpc::ServerUnaryReactor* PolygradService::GetInfo(grpc::CallbackServerContext* ctx, const v1::GetInfoRequest*,
                                                   v1::ServerInfo* response) {
  const Clock::time_point start = Clock::now();
  response->set_version(deps_.version);
  for (const DeviceInfo& d : deps_.engine.devices()) {
    v1::Device* out = response->add_devices();
    out->set_name(d.name);
    out->set_available(d.available);
    out->set_detail(d.detail);
  }
  const Limits& l = deps_.limits;
  response->set_max_inline_bytes(l.max_inline_bytes);
  response->set_max_nodes_per_request(l.max_nodes_per_request);
  response->set_max_rank(l.max_rank);
  response->set_max_elements(l.max_elements);
  response->set_chunk_bytes(l.chunk_bytes);
  return finish(ctx, "GetInfo", "", start, absl::OkStatus());
}

// ---- streaming RPCs -------------------------------------------------------------------------

grpc::ServerReadReactor<v1::UploadChunk>* PolygradService::Upload(grpc::CallbackServerContext* ctx,
                                                                  v1::UploadResponse* response) {
  return new UploadReactor(deps_, response, tenant_of(*ctx), request_id_of(*ctx));
}

grpc::ServerWriteReactor<v1::DownloadChunk>* PolygradService::Download(grpc::CallbackServerContext* ctx,
                                                                       const v1::DownloadRequest* request) {
  return new DownloadReactor(deps_, *request, tenant_of(*ctx), request_id_of(*ctx));
}

grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* PolygradService::Execute(
    grpc::CallbackServerContext* ctx) {
  return new ExecuteReactor(deps_, tenant_of(*ctx), request_id_of(*ctx));
}

}  // namespace polygrad::server
