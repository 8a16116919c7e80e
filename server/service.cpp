#include "server/service.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/auth.h"
#include "server/request_id.h"
#include "server/status.h"
#include "server/call_helpers.h"
#include "server/execute_stream.h"

namespace polygrad::server {
namespace {

using SessionPtr = std::shared_ptr<Session>;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

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

grpc::ServerUnaryReactor* PolygradService::OpenUpload(grpc::CallbackServerContext* ctx,
                                                      const v1::UploadHeader* request,
                                                      v1::OpenUploadResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<SessionPtr> s = deps_.sessions.find(request->session_id(), tenant_of(*ctx));
  absl::StatusOr<uint64_t> id = s.ok() ? (*s)->open_upload(*request) : absl::StatusOr<uint64_t>(s.status());
  if (id.ok()) response->set_upload_id(*id);
  return finish(ctx, "OpenUpload", request->session_id(), start, id.status());
}

grpc::ServerUnaryReactor* PolygradService::UploadPart(grpc::CallbackServerContext* ctx,
                                                      const v1::UploadPartRequest* request,
                                                      v1::UploadResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps_.admit();
  if (!ticket.ok()) return finish(ctx, "UploadPart", request->session_id(), start, ticket.status());
  absl::StatusOr<SessionPtr> s = deps_.sessions.find(request->session_id(), tenant_of(*ctx));
  absl::StatusOr<v1::UploadResponse> r =
      s.ok() ? (*s)->upload_part(*request) : absl::StatusOr<v1::UploadResponse>(s.status());
  if (r.ok()) {
    deps_.metrics.add_upload_bytes(request->data().size());
    *response = *std::move(r);
  }
  return finish(ctx, "UploadPart", request->session_id(), start, r.status());
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
  return new_execute_stream(deps_, tenant_of(*ctx), request_id_of(*ctx));
}

}  // namespace polygrad::server
