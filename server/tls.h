// Server credentials for each listener, from the security options: TLS (or mTLS) on --listen when
// a certificate is configured; gRPC "local" credentials (plaintext, peer must be on this host) when
// tokens are checked without TLS, because gRPC runs an AuthMetadataProcessor only on credentials
// with a security connector; insecure credentials otherwise.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "server/options.h"

namespace polygrad::server {

struct ListenerCredentials {
  std::shared_ptr<grpc::ServerCredentials> tcp;   // for --listen
  std::shared_ptr<grpc::ServerCredentials> unix;  // for --unix-socket
};

// The text of a PEM file; NOT_FOUND or INVALID_ARGUMENT naming --`flag` and the file.
absl::StatusOr<std::string> read_pem(const std::filesystem::path& path, std::string_view flag);

// Reads the PEM files named by the options (errors name the flag and file). `processor`, when
// not null, is attached to every listener: then no call reaches a handler unchecked.
absl::StatusOr<ListenerCredentials> make_listener_credentials(
    const ServerOptions& options, const std::shared_ptr<grpc::AuthMetadataProcessor>& processor);

}  // namespace polygrad::server
