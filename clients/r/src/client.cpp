// The gRPC side: a channel per connection and calls made by method name. Each call runs on a
// completion queue that R's main thread polls every 50 ms, checking for a user interrupt in
// between; on Ctrl-C the call is cancelled, and R is told once the call has really ended. gRPC's
// own threads never touch the R API: everything that builds R objects runs here, on R's thread.
#include <Rcpp.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "polygrad/v1/polygrad.grpc.pb.h"
#include "client.h"
#include "wire.h"

namespace pb = polygrad::v1;
using google::protobuf::Message;

namespace polygrad_r {

// Called under R_ToplevelExec: an interrupt longjmps out of here and only sets `false`.
void check_interrupt(void*) { R_CheckUserInterrupt(); }
bool user_interrupted() { return R_ToplevelExec(check_interrupt, nullptr) == FALSE; }

void prepare(const Client& c, grpc::ClientContext* ctx, double timeout_s) {
  if (!c.token.empty()) ctx->AddMetadata("authorization", "Bearer " + c.token);
  if (timeout_s > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6)));
  }
}

// The outcome R turns into a value or a classed condition.
Rcpp::List outcome(const grpc::Status& st, SEXP value, bool interrupted) {
  return Rcpp::List::create(Rcpp::Named("code") = static_cast<int>(st.error_code()),
                            Rcpp::Named("message") = st.error_message(), Rcpp::Named("value") = value,
                            Rcpp::Named("interrupted") = interrupted);
}

const google::protobuf::MethodDescriptor* find_method(const std::string& name) {
  const auto* svc = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("polygrad.v1.Polygrad");
  const auto* m = svc == nullptr ? nullptr : svc->FindMethodByName(name);
  if (m == nullptr || m->client_streaming() || m->server_streaming()) {
    Rcpp::stop("polygrad: no unary method Polygrad." + name);
  }
  return m;
}

std::unique_ptr<Message> new_message(const google::protobuf::Descriptor* d) {
  return std::unique_ptr<Message>(google::protobuf::MessageFactory::generated_factory()->GetPrototype(d)->New());
}

// Waits for the one event of `cq`, cancelling the call on a user interrupt.
bool wait_interruptibly(grpc::CompletionQueue* cq, grpc::ClientContext* ctx) {
  bool interrupted = false;
  void* tag = nullptr;
  bool ok = false;
  for (;;) {
    auto when = std::chrono::system_clock::now() + std::chrono::milliseconds(50);
    if (cq->AsyncNext(&tag, &ok, when) == grpc::CompletionQueue::GOT_EVENT) break;
    if (!interrupted && user_interrupted()) {
      ctx->TryCancel();  // the call still completes (CANCELLED); wait for that, then report
      interrupted = true;
    }
  }
  return interrupted;
}

}  // namespace polygrad_r

using namespace polygrad_r;

// [[export]] pg_c_connect(address, token, tls_ca_pem): a channel (not yet connected).
extern "C" SEXP pg_c_connect(SEXP address, SEXP token, SEXP tls_ca) {
  BEGIN_RCPP
  std::string addr = Rcpp::as<std::string>(address);
  std::string ca = Rcpp::as<std::string>(tls_ca);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!ca.empty() && addr.rfind("unix:", 0) != 0) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = ca;
    creds = grpc::SslCredentials(opts);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // results are bounded by the daemon's max_inline_bytes
  auto* c = new Client;
  c->channel = grpc::CreateCustomChannel(addr, creds, args);
  c->generic = std::make_unique<grpc::GenericStub>(c->channel);
  c->stub = pb::Polygrad::NewStub(c->channel);
  c->token = Rcpp::as<std::string>(token);
  return ClientPtr(c, true);
  END_RCPP
}

// Starts renewing `session` every `interval_s` seconds until the client is collected.
extern "C" SEXP pg_c_keepalive(SEXP xp, SEXP session, SEXP interval_s) {
  BEGIN_RCPP
  ClientPtr c(xp);
  if (c->keepalive.joinable()) Rcpp::stop("polygrad: keepalive already running");
  Client* raw = c.get();
  std::string sid = Rcpp::as<std::string>(session);
  auto every = std::chrono::milliseconds(static_cast<int64_t>(Rcpp::as<double>(interval_s) * 1000));
  raw->keepalive = std::thread([raw, sid, every] {
    std::unique_lock<std::mutex> lock(raw->mu);
    while (!raw->cv.wait_for(lock, every, [raw] { return raw->stopping; })) {
      lock.unlock();
      grpc::ClientContext ctx;
      prepare(*raw, &ctx, 10);
      pb::ReleaseRequest req;
      req.set_session_id(sid);
      pb::ReleaseResponse resp;
      (void)raw->stub->Release(&ctx, req, &resp);  // a failure is retried next time
      lock.lock();
    }
  });
  return R_NilValue;
  END_RCPP
}

// One unary call by method name: list(code, message, value = response as a list, interrupted).
extern "C" SEXP pg_c_call(SEXP xp, SEXP method, SEXP request, SEXP timeout_s) {
  BEGIN_RCPP
  ClientPtr c(xp);
  const auto* m = find_method(Rcpp::as<std::string>(method));
  auto req = new_message(m->input_type());
  polygrad_r::list_to_message(request, req.get());
  std::string bytes;
  req->SerializeToString(&bytes);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req_buf(&slice, 1);

  grpc::ClientContext ctx;
  prepare(*c, &ctx, Rcpp::as<double>(timeout_s));
  grpc::CompletionQueue cq;
  std::string path = "/" + m->service()->full_name() + "/" + m->name();
  auto call = c->generic->PrepareUnaryCall(&ctx, path, req_buf, &cq);
  call->StartCall();
  grpc::ByteBuffer resp_buf;
  grpc::Status st;
  call->Finish(&resp_buf, &st, reinterpret_cast<void*>(1));
  bool interrupted = wait_interruptibly(&cq, &ctx);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (!st.ok()) return outcome(st, R_NilValue, interrupted);
  std::vector<grpc::Slice> slices;
  resp_buf.Dump(&slices);
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  auto resp = new_message(m->output_type());
  if (!resp->ParseFromString(out)) {
    return outcome(grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the " + m->name() + " response"),
                   R_NilValue, interrupted);
  }
  return outcome(st, polygrad_r::message_to_list(*resp), interrupted);
  END_RCPP
}

// Upload(session, dtype, shape, data): chunks of `chunk` bytes; value = the UploadResponse.
extern "C" SEXP pg_c_upload(SEXP xp, SEXP session, SEXP dtype, SEXP shape, SEXP data, SEXP chunk) {
  BEGIN_RCPP
  ClientPtr c(xp);
  grpc::ClientContext ctx;
  prepare(*c, &ctx, 0);
  pb::UploadResponse resp;
  auto writer = c->stub->Upload(&ctx, &resp);
  const char* p = reinterpret_cast<const char*>(RAW(data));
  size_t n = static_cast<size_t>(Rf_xlength(data));
  size_t step = static_cast<size_t>(Rcpp::as<double>(chunk));
  Rcpp::NumericVector dims(shape);
  size_t off = 0;
  do {
    pb::UploadChunk ch;
    if (off == 0) {
      auto* h = ch.mutable_header();
      h->set_session_id(Rcpp::as<std::string>(session));
      h->set_dtype(static_cast<pb::DType>(Rcpp::as<int>(dtype)));
      for (double d : dims) h->add_shape(static_cast<int64_t>(d));
    }
    size_t len = std::min(step, n - off);
    ch.set_data(p + off, len);
    off += len;
    if (!writer->Write(ch)) break;  // the daemon ended the call: Finish says why
  } while (off < n);
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  return outcome(st, st.ok() ? polygrad_r::message_to_list(resp) : R_NilValue, false);
  END_RCPP
}

// Download(session, handle): value = list(dtype, shape, data) with every chunk joined.
extern "C" SEXP pg_c_download(SEXP xp, SEXP session, SEXP handle) {
  BEGIN_RCPP
  ClientPtr c(xp);
  grpc::ClientContext ctx;
  prepare(*c, &ctx, 0);
  pb::DownloadRequest req;
  req.set_session_id(Rcpp::as<std::string>(session));
  req.set_handle(std::stoull(Rcpp::as<std::string>(handle)));
  auto reader = c->stub->Download(&ctx, req);
  pb::DownloadChunk ch;
  std::string data;
  int dtype = 0;
  std::vector<double> shape;
  bool first = true;
  while (reader->Read(&ch)) {
    if (first) {
      dtype = ch.dtype();
      for (auto d : ch.shape()) shape.push_back(static_cast<double>(d));
      first = false;
    }
    data += ch.data();
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return outcome(st, R_NilValue, false);
  Rcpp::RawVector raw(data.size());
  if (!data.empty()) memcpy(&raw[0], data.data(), data.size());
  return outcome(st, Rcpp::List::create(Rcpp::Named("dtype") = dtype, Rcpp::Named("shape") = Rcpp::wrap(shape),
                                        Rcpp::Named("data") = raw), false);
  END_RCPP
}
