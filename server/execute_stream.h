// The Execute RPC: one bidirectional stream carrying a session's commands in order.
#pragma once

#include <string>

#include "grpcpp/grpcpp.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/service.h"

namespace polygrad::server {

// A reactor for one Execute stream; it deletes itself when the stream is done.
grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* new_execute_stream(const ServiceDeps& deps,
                                                                                    std::string tenant,
                                                                                    std::string request_id);

}  // namespace polygrad::server
