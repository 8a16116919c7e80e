// gRPC-Web on --web-listen: browsers cannot speak gRPC over HTTP/2 with trailers, so the same
// service is offered over HTTP/1.1 in the gRPC-Web framing (application/grpc-web+proto: each
// message a 5-byte header and its bytes, the status as a final frame in the body), and in its
// text form (application/grpc-web-text: the same frames as base64, each response frame encoded on
// its own), which the official grpc-web client uses by default.
//
// Every call is passed, as bytes, to the daemon's own gRPC server through its in-process channel,
// so it meets the same handlers, interceptors (request ids, tenants), quotas and limits as a call
// on --listen; bearer tokens are checked here by the same TokenAuthProcessor before forwarding
// (gRPC runs processors only on credentials with a security connector, which the in-process
// channel has none of). Unary and server-streaming methods are served; client-streaming and
// bidirectional ones (Upload, Execute) answer UNIMPLEMENTED.
//
// Cross-origin requests are served only for origins listed in --web-allow-origin (none by
// default): a preflight from another origin gets 403, and so does a call that names one.
// The transport is libmicrohttpd (a thread per connection, bounded in number and idle time).
// With --web-playground it also serves the playground page (examples/browser) at /.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "server/metrics.h"

namespace polygrad::server {

class TokenAuthProcessor;

struct WebGatewayOptions {
  std::string listen;                      // host:port (port 0 picks one)
  std::vector<std::string> allow_origins;  // exact "scheme://host[:port]" values; empty: same-origin only
  std::string tls_cert_pem, tls_key_pem;   // both set: HTTPS
  uint64_t max_message_bytes = 64 << 20;   // one request message, as on the gRPC port
  unsigned max_connections = 256;
  std::chrono::seconds idle_timeout{60};   // a connection silent this long is closed (slow clients)
  // --web-playground: GET / serves this directory's index.html, and /playground.js and
  // /polygrad.browser.js its files of those names (nothing else: no request names a file). Empty: off.
  std::filesystem::path playground_dir;
};

class WebGateway {
 public:
  // Binds and starts serving. `channel` reaches the daemon's gRPC server in process; `auth`, when
  // not null, must accept a call before it is forwarded.
  static absl::StatusOr<std::unique_ptr<WebGateway>> start(WebGatewayOptions options,
                                                           std::shared_ptr<grpc::Channel> channel,
                                                           std::shared_ptr<TokenAuthProcessor> auth, Metrics& metrics);
  ~WebGateway();  // stop()
  WebGateway(const WebGateway&) = delete;
  WebGateway& operator=(const WebGateway&) = delete;

  int port() const { return port_; }
  // Stops accepting connections; calls in flight finish (the gRPC server's shutdown ends them),
  // then every connection thread is joined. Idempotent.
  void stop();

  struct Impl;

 private:
  WebGateway() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// The gRPC-Web framing, exposed for tests: a data frame, and the trailer frame of a status.
std::string web_data_frame(std::string_view message);
std::string web_trailer_frame(int code, std::string_view message);

}  // namespace polygrad::server
