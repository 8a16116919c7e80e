#include "server/undecodable.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/bounded.h"

namespace polygrad::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UndecodableRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit UndecodableRequestInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // A unary or server-streaming request is parsed before the handler runs: no message here
    // means the bytes did not parse.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      undecodable_ = true;
    }
    if (undecodable_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request to ", bounded(method_), " could not be parsed as its protobuf message")));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool undecodable_ = false;
};

}  // namespace

grpc::experimental::Interceptor* UndecodableRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new UndecodableRequestInterceptor(info);
}

}  // namespace polygrad::server
