#include "server/request_id.h"

#include <random>

#include "absl/strings/str_format.h"

namespace polygrad::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Replaces whatever the client sent under the key (a client must not choose the id its
// errors are logged under), and adds the id to the trailing metadata.
class RequestIdInterceptor final : public grpc::experimental::Interceptor {
 public:
  RequestIdInterceptor() : id_(new_request_id()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      if (auto* md = methods->GetRecvInitialMetadata(); md != nullptr) {
        md->erase(kRequestIdKey);
        md->emplace(grpc::string_ref(kRequestIdKey), grpc::string_ref(id_));
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      if (auto* md = methods->GetSendTrailingMetadata(); md != nullptr) md->emplace(kRequestIdKey, id_);
    }
    methods->Proceed();
  }

 private:
  const std::string id_;  // outlives the metadata views that point into it: one per call
};

}  // namespace

std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x", rng());
}

grpc::experimental::Interceptor* RequestIdInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo*) {
  return new RequestIdInterceptor();
}

std::string request_id_of(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kRequestIdKey);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace polygrad::server
