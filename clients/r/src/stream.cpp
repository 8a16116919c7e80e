// The Execute stream of asynchronous dispatch (docs/PROTOCOL.md, "Asynchronous dispatch"): R
// queues realizes, releases and step runs without waiting (the writer thread writes them), and
// takes each answer by request id when it needs it (R/dispatch.R). Only R's thread calls these.
#include <Rcpp.h>

#include <chrono>
#include <string>

#include "client.h"
#include "wire.h"

namespace pb = polygrad::v1;
using namespace polygrad_r;

namespace {

void read_answers(ExecuteStream* s) {
  pb::ExecuteResponse r;
  while (s->rw->Read(&r)) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->answers[r.request_id()] = std::move(r);
    s->cv.notify_all();
  }
  grpc::Status st = s->rw->Finish();
  std::lock_guard<std::mutex> lock(s->mu);
  s->ended = true;
  s->status = st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the Execute stream ended") : st;
  s->cv.notify_all();
}

// Writes the queued commands in order until the stream closes. A failed write means the stream
// has ended; the reader then records why and every outstanding id is answered by that.
void write_commands(ExecuteStream* s) {
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->outbox_cv.wait(lock, [s] { return s->closing || !s->outbox.empty(); });
    if (s->closing) return;
    pb::ExecuteRequest req = std::move(s->outbox.front());
    s->outbox.pop_front();
    lock.unlock();
    s->rw->Write(req);
    lock.lock();
  }
}

// The answer to `rid` as R's outcome: the command's response message as a list, or its error.
Rcpp::List answer_outcome(const pb::ExecuteResponse& r) {
  if (r.has_error()) {
    return outcome(grpc::Status(static_cast<grpc::StatusCode>(r.error().code()), r.error().message()), R_NilValue,
                   false);
  }
  const google::protobuf::Message* m = nullptr;
  switch (r.result_case()) {
    case pb::ExecuteResponse::kOpened: m = &r.opened(); break;
    case pb::ExecuteResponse::kRealized: m = &r.realized(); break;
    case pb::ExecuteResponse::kReleased: m = &r.released(); break;
    case pb::ExecuteResponse::kStepRan: m = &r.step_ran(); break;
    default:
      return outcome(grpc::Status(grpc::StatusCode::INTERNAL, "an Execute answer of an unexpected kind"), R_NilValue,
                     false);
  }
  return outcome(grpc::Status::OK, polygrad_r::message_to_list(*m), false);
}

// Waits for the answer to `rid` (or the stream's end); nullptr when `block` is false and it has
// not come. A user interrupt cancels the stream: everything outstanding fails with CANCELLED.
SEXP take(ExecuteStream* s, uint64_t rid, bool block) {
  bool interrupted = false;
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    auto it = s->answers.find(rid);
    if (it != s->answers.end()) {
      pb::ExecuteResponse r = std::move(it->second);
      s->answers.erase(it);
      lock.unlock();
      Rcpp::List out = answer_outcome(r);
      out["interrupted"] = interrupted;
      return out;
    }
    if (s->ended) {
      grpc::Status st = s->status;
      lock.unlock();
      return outcome(st, R_NilValue, interrupted);
    }
    if (!block) return R_NilValue;
    s->cv.wait_for(lock, std::chrono::milliseconds(50));
    lock.unlock();
    if (!interrupted && user_interrupted()) {
      s->ctx.TryCancel();
      interrupted = true;
    }
    lock.lock();
  }
}

}  // namespace

// [[export]] pg_c_stream_open(xp, session): opens the session's Execute stream; the outcome of
// its `open` (code 0: open).
extern "C" SEXP pg_c_stream_open(SEXP xp, SEXP session) {
  BEGIN_RCPP
  ClientPtr c(xp);
  c->stream.reset();
  auto s = std::make_unique<ExecuteStream>();
  prepare(*c, &s->ctx, 0);
  s->rw = c->stub->Execute(&s->ctx);
  pb::ExecuteRequest open;
  open.set_request_id(0);
  open.mutable_open()->set_attach_session_id(Rcpp::as<std::string>(session));
  s->rw->Write(open);  // a failure shows as the stream's end
  s->reader = std::thread(read_answers, s.get());
  s->writer = std::thread(write_commands, s.get());
  SEXP out = take(s.get(), 0, true);
  Rcpp::List res(out);
  if (Rcpp::as<int>(res["code"]) == 0) c->stream = std::move(s);
  return res;
  END_RCPP
}

// [[export]] pg_c_stream_submit(xp, kind, request): writes one command ("realize", "release" or
// "run_step", the request as a list); its request id (a double: ids stay far below 2^53).
extern "C" SEXP pg_c_stream_submit(SEXP xp, SEXP kind, SEXP request) {
  BEGIN_RCPP
  ClientPtr c(xp);
  ExecuteStream* s = c->stream.get();
  if (s == nullptr) Rcpp::stop("polygrad: no Execute stream is open");
  pb::ExecuteRequest req;
  const std::string k = Rcpp::as<std::string>(kind);
  if (k == "realize") polygrad_r::list_to_message(request, req.mutable_realize());
  else if (k == "release") polygrad_r::list_to_message(request, req.mutable_release());
  else if (k == "run_step") polygrad_r::list_to_message(request, req.mutable_run_step());
  else Rcpp::stop("polygrad: unknown Execute command " + k);
  const uint64_t rid = s->next++;
  req.set_request_id(rid);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->outbox.push_back(std::move(req));
  }
  s->outbox_cv.notify_one();
  return Rcpp::wrap(static_cast<double>(rid));
  END_RCPP
}

// [[export]] pg_c_stream_take(xp, rid, block): the outcome of command `rid`; NULL when `block`
// is FALSE and its answer has not come yet.
extern "C" SEXP pg_c_stream_take(SEXP xp, SEXP rid, SEXP block) {
  BEGIN_RCPP
  ClientPtr c(xp);
  ExecuteStream* s = c->stream.get();
  if (s == nullptr) {
    return outcome(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the Execute stream was closed"), R_NilValue, false);
  }
  return take(s, static_cast<uint64_t>(Rcpp::as<double>(rid)), Rcpp::as<bool>(block));
  END_RCPP
}

// [[export]] pg_c_stream_close(xp): ends the stream (what is outstanding fails CANCELLED).
extern "C" SEXP pg_c_stream_close(SEXP xp) {
  BEGIN_RCPP
  ClientPtr c(xp);
  c->stream.reset();
  return R_NilValue;
  END_RCPP
}
