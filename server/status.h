// The one place where core's absl::Status becomes a gRPC status (STYLE item 13). Core codes
// are gRPC's codes, so the map is 1:1; anything unexpected becomes INTERNAL, never a crash.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace polygrad::server {

grpc::StatusCode to_grpc_code(absl::StatusCode code);
grpc::Status to_grpc_status(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ...: the label value used in metrics and logs.
std::string code_name(absl::StatusCode code);

// This Abseil's string_view is not std::string_view: pass std::string_views to StrCat through av().
inline absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Adds "node <id> (<op>): " style context to an error, keeping its code.
absl::Status with_prefix(const absl::Status& status, std::string_view prefix);

}  // namespace polygrad::server
