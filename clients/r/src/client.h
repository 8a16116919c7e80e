// What the native calls share: a connection's channel and stubs (an external pointer R holds),
// its keepalive thread and its Execute stream (stream.cpp), and the helpers every call uses.
#pragma once

#include <Rcpp.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "polygrad/v1/polygrad.grpc.pb.h"

namespace polygrad_r {

// The session's Execute stream (asynchronous dispatch): R's thread queues commands, a writer
// thread writes them in order, a reader thread files each answer under its request id until R
// asks for it. A synchronous Write waits for gRPC to take the message (a completion-queue round
// trip of a few hundred microseconds on a busy machine), which R's thread must not pay per call.
// Neither thread touches the R API.
struct ExecuteStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<polygrad::v1::ExecuteRequest, polygrad::v1::ExecuteResponse>> rw;
  std::thread reader, writer;
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, polygrad::v1::ExecuteResponse> answers;  // by request id, until taken
  bool ended = false;
  grpc::Status status;  // why it ended
  uint64_t next = 1;
  std::deque<polygrad::v1::ExecuteRequest> outbox;  // queued by R, not yet written (under mu)
  std::condition_variable outbox_cv;
  bool closing = false;

  ~ExecuteStream() {
    {
      std::lock_guard<std::mutex> lock(mu);
      closing = true;
    }
    outbox_cv.notify_all();
    ctx.TryCancel();
    if (writer.joinable()) writer.join();
    if (reader.joinable()) reader.join();
  }
};

struct Client {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> generic;
  std::unique_ptr<polygrad::v1::Polygrad::Stub> stub;
  std::string token;
  // The keepalive thread: the daemon expires idle sessions, and an R user may sit idle for long,
  // so a live client renews its lease with an empty Release now and then (as the Python client
  // does). It only uses gRPC and these fields, never the R API.
  std::thread keepalive;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::unique_ptr<ExecuteStream> stream;

  ~Client() {
    stream.reset();
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_all();
    if (keepalive.joinable()) keepalive.join();
  }
};

inline void client_finalize(Client* c) { delete c; }
using ClientPtr = Rcpp::XPtr<Client, Rcpp::PreserveStorage, client_finalize, true>;


void prepare(const Client& c, grpc::ClientContext* ctx, double timeout_s);
// The outcome R turns into a value or a classed condition.
Rcpp::List outcome(const grpc::Status& st, SEXP value, bool interrupted);
// Whether the user pressed Ctrl-C (checked without longjmp-ing out of C++).
bool user_interrupted();

}  // namespace polygrad_r
