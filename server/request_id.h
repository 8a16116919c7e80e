// A request id for every RPC, of every service: a server interceptor makes one when the call
// arrives, hands it to the handler (request_id_of) and returns it to the client in the trailing
// metadata "polygrad-request-id", so a client's error can be found in the daemon's log.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

namespace polygrad::server {

inline constexpr const char* kRequestIdKey = "polygrad-request-id";

// 16 random hex digits.
std::string new_request_id();

class RequestIdInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;
};

// The id the interceptor gave this call ("" if none, e.g. a context built by a test).
std::string request_id_of(const grpc::ServerContextBase& ctx);

}  // namespace polygrad::server
