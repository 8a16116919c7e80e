#include "server/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/status.h"

namespace polygrad::server {

absl::StatusOr<std::string> read_pem(const std::filesystem::path& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", av(flag), ": cannot read ", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat("--", av(flag), ": ", path.string(), " is not a PEM file"));
  }
  return pem;
}

namespace {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls_credentials(const SecurityOptions& sec) {
  absl::StatusOr<std::string> cert = read_pem(sec.tls_cert, "tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = read_pem(sec.tls_key, "tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  o.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  if (!sec.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca = read_pem(sec.tls_client_ca, "tls-client-ca");
    if (!ca.ok()) return ca.status();
    o.pem_root_certs = *std::move(ca);
    o.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(o);
}

}  // namespace

absl::StatusOr<ListenerCredentials> make_listener_credentials(
    const ServerOptions& options, const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) {
  ListenerCredentials c;
  if (options.security.tls()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls = tls_credentials(options.security);
    if (!tls.ok()) return tls.status();
    c.tcp = *std::move(tls);
  } else if (processor) {
    c.tcp = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  } else {
    c.tcp = grpc::InsecureServerCredentials();
  }
  c.unix = processor ? grpc::experimental::LocalServerCredentials(UDS) : grpc::InsecureServerCredentials();
  if (processor) {
    c.tcp->SetAuthMetadataProcessor(processor);
    c.unix->SetAuthMetadataProcessor(processor);
  }
  return c;
}

}  // namespace polygrad::server
