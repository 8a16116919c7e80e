// Bearer-token authentication. A tokens file maps tokens to tenants; gRPC runs TokenAuthProcessor
// on every call (before any handler), so the check is one place for every service, including
// ones added later: /polygrad.v1.PolygradAdmin/* additionally needs an admin token.
//
// Tokens file format, one entry per line:   <token> <tenant> [admin]
// Blank lines and lines starting with # are ignored. Tokens are 16+ printable non-space ASCII
// characters, unique; tenants are [A-Za-z0-9._-]{1,64}.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/status/statusor.h"

namespace polygrad::server {

struct Principal {
  std::string tenant;
  bool admin = false;
};

class TokenTable {
 public:
  // INVALID_ARGUMENT naming the file and line for a malformed entry; the error never quotes a token.
  static absl::StatusOr<TokenTable> parse(std::string_view text, std::string_view origin);
  static absl::StatusOr<TokenTable> load(const std::filesystem::path& path);

  // The principal for `token`, or null. Takes the same time whichever entry (if any) matches.
  const Principal* find(std::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string token;
    Principal principal;
  };
  std::vector<Entry> entries_;
};

// Method paths that never need a token: health checks and reflection (probes have no token).
bool is_public_method(std::string_view path);
// True for "/polygrad.v1.PolygradAdmin/<method>".
bool is_admin_method(std::string_view path);

// The metadata key under which TenantInterceptor hands the caller's tenant to the handlers.
// (Not the AuthContext: gRPC shares one AuthContext by connection, and one connection may carry
// calls with different tokens.)
inline constexpr const char* kTenantKey = "polygrad-tenant";

// Rejects a call before it reaches a handler: no or unknown token → UNAUTHENTICATED, a
// non-admin token on an admin method → PERMISSION_DENIED.
class TokenAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  // `on_reject` is called for every refused call (metrics and logs) with the request id that the
  // refusal's message ends with: the call never reaches the interceptor that would give it one.
  using RejectCallback =
      std::function<void(grpc::StatusCode code, std::string_view path, std::string_view request_id)>;
  TokenAuthProcessor(std::shared_ptr<const TokenTable> tokens, RejectCallback on_reject);

  bool IsBlocking() const override { return false; }  // a table lookup: fine on gRPC's thread
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  std::shared_ptr<const TokenTable> tokens_;
  RejectCallback on_reject_;
};

// Sets kTenantKey in every call's metadata to the tenant of its (already verified) token, after
// removing whatever the client sent under that key. Registered with or without a tokens file
// (tokens null): a client can never choose its tenant.
class TenantInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TenantInterceptorFactory(std::shared_ptr<const TokenTable> tokens) : tokens_(std::move(tokens)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::shared_ptr<const TokenTable> tokens_;
};

// The tenant of a call: the token's tenant, or "" when the daemon runs without a tokens file
// (then every caller is the same, anonymous tenant).
std::string tenant_of(const grpc::ServerContextBase& ctx);

}  // namespace polygrad::server
