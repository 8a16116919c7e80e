// Requests whose bytes do not parse as the method's message. gRPC 1.51's callback handlers answer
// them UNIMPLEMENTED with an empty message (the deserialisation status is dropped); this server
// interceptor sees the failed parse and answers INVALID_ARGUMENT naming the method instead.
#pragma once

#include <grpcpp/support/server_interceptor.h>

namespace polygrad::server {

class UndecodableRequestInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace polygrad::server
