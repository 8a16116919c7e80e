// The service side of compiled steps, shared by the unary RPCs (step_service.cpp) and the
// Execute stream (execute_stream.cpp): session calls plus the transfer metrics.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "server/service.h"
#include "server/session.h"

namespace polygrad::server {

absl::StatusOr<v1::CompileStepResponse> compile_step(const ServiceDeps& deps, Session& session,
                                                     const v1::CompileStepRequest& request,
                                                     const std::function<bool()>& should_stop);
absl::StatusOr<v1::RunStepResponse> run_step(const ServiceDeps& deps, Session& session,
                                             const v1::RunStepRequest& request,
                                             const std::function<bool()>& should_stop);

}  // namespace polygrad::server
