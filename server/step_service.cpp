#include "server/step_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "server/request_id.h"
#include "server/status.h"

namespace polygrad::server {

absl::StatusOr<v1::CompileStepResponse> compile_step(const ServiceDeps& deps, Session& session,
                                                     const v1::CompileStepRequest& request,
                                                     const std::function<bool()>& should_stop) {
  Transfer transfer;
  auto r = session.compile_step(request, should_stop, transfer);
  deps.metrics.add_upload_bytes(transfer.upload);
  deps.metrics.add_download_bytes(transfer.download);
  return r;
}

absl::StatusOr<v1::RunStepResponse> run_step(const ServiceDeps& deps, Session& session,
                                             const v1::RunStepRequest& request,
                                             const std::function<bool()>& should_stop) {
  Transfer transfer;
  auto r = session.run_step(request, should_stop, transfer);
  deps.metrics.add_upload_bytes(transfer.upload);
  deps.metrics.add_download_bytes(transfer.download);
  return r;
}

namespace {

// Runs `work` on the worker pool (compiles and kernels are heavy), stopping it when the call is
// cancelled or past its deadline, and finishes the call with its status.
template <typename Response, typename Work>
grpc::ServerUnaryReactor* on_pool(const ServiceDeps& deps, grpc::CallbackServerContext* ctx, std::string_view method,
                                  const std::string& session_id, Response* response, Work work) {
  const Clock::time_point start = Clock::now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const std::string request_id = request_id_of(*ctx);
  absl::StatusOr<std::shared_ptr<Quotas::Ticket>> ticket = deps.admit();
  absl::StatusOr<std::shared_ptr<Session>> s =
      ticket.ok() ? deps.sessions.find(session_id, tenant_of(*ctx)) : ticket.status();
  if (!s.ok()) {
    deps.record(method, session_id, start, s.status(), request_id);
    reactor->Finish(to_grpc_status(s.status()));
    return reactor;
  }
  deps.submit(method, [&deps, ctx, response, reactor, start, method, work, request_id, ticket = *std::move(ticket),
                    session = *std::move(s)] {
    const auto past_deadline = [ctx] { return std::chrono::system_clock::now() > ctx->deadline(); };
    absl::StatusOr<Response> r = work(*session, [&] { return ctx->IsCancelled() || past_deadline(); });
    absl::Status status = r.status();
    if (r.ok()) {
      *response = *std::move(r);
    } else if (status.code() == absl::StatusCode::kCancelled && past_deadline()) {
      status = absl::DeadlineExceededError(absl::StrCat("deadline exceeded: ", status.message()));
    }
    deps.record(method, session->id(), start, status, request_id);
    reactor->Finish(to_grpc_status(status));
  });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* PolygradService::CompileStep(grpc::CallbackServerContext* ctx,
                                                       const v1::CompileStepRequest* request,
                                                       v1::CompileStepResponse* response) {
  return on_pool(deps_, ctx, "CompileStep", request->session_id(), response,
                 [this, request](Session& s, const std::function<bool()>& stop) {
                   return compile_step(deps_, s, *request, stop);
                 });
}

grpc::ServerUnaryReactor* PolygradService::RunStep(grpc::CallbackServerContext* ctx, const v1::RunStepRequest* request,
                                                   v1::RunStepResponse* response) {
  return on_pool(deps_, ctx, "RunStep", request->session_id(), response,
                 [this, request](Session& s, const std::function<bool()>& stop) {
                   return run_step(deps_, s, *request, stop);
                 });
}

grpc::ServerUnaryReactor* PolygradService::ReleaseStep(grpc::CallbackServerContext* ctx,
                                                       const v1::ReleaseStepRequest* request,
                                                       v1::ReleaseStepResponse*) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<Session>> s = deps_.sessions.find(request->session_id(), tenant_of(*ctx));
  absl::Status status = s.ok() ? (*s)->release_step(*request) : s.status();
  return finish(ctx, "ReleaseStep", request->session_id(), start, status);
}

}  // namespace polygrad::server
