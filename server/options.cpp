#include "server/options.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Splits "host:port" or "[v6]:port"; the host keeps no brackets.
bool split_host_port(std::string_view address, std::string& host, std::string& port) {
  if (absl::StartsWith(av(address), "[")) {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() || address[close + 1] != ':') return false;
    host = std::string(address.substr(1, close - 1));
    port = std::string(address.substr(close + 2));
    return true;
  }
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  host = std::string(address.substr(0, colon));
  port = std::string(address.substr(colon + 1));
  return host.find(':') == std::string::npos;  // a bare IPv6 address needs brackets
}

}  // namespace

std::string default_unix_socket() {
  if (std::string dir = env("XDG_RUNTIME_DIR"); !dir.empty()) return dir + "/polygradd.sock";
  return absl::StrCat("/tmp/polygradd-", getuid(), ".sock");
}

std::filesystem::path default_cache_dir() {
  if (std::string dir = env("XDG_CACHE_HOME"); !dir.empty()) return std::filesystem::path(dir) / "polygrad";
  if (std::string home = env("HOME"); !home.empty()) return std::filesystem::path(home) / ".cache" / "polygrad";
  return {};
}

bool is_loopback_address(std::string_view host_port) {
  if (absl::StartsWith(av(host_port), "unix:")) return true;
  std::string host, port;
  if (!split_host_port(host_port, host, port)) return false;
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

absl::StatusOr<std::string> read_cache_key(const std::filesystem::path& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path.string()));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string key = bytes.str();
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.size() < kMinCacheKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path.string(), " holds ", key.size(),
                                                   " bytes, fewer than the ", kMinCacheKeyBytes,
                                                   " a signing key needs (e.g. openssl rand -hex 32)"));
  }
  return key;
}

absl::Status validate(const ServerOptions& o) {
  if (o.listen.empty() && o.unix_socket.empty()) {
    return absl::InvalidArgumentError("nothing to listen on: both --listen and --unix-socket are empty");
  }
  if (!o.listen.empty()) {
    std::string host, port;
    int port_number = 0;
    if (!absl::StartsWith(o.listen, "unix:") &&
        (!split_host_port(o.listen, host, port) || !absl::SimpleAtoi(port, &port_number) || port_number < 0 ||
         port_number > 65535)) {
      return absl::InvalidArgumentError(absl::StrCat("--listen \"", o.listen, "\" is not host:port"));
    }
    if (!is_loopback_address(o.listen) && !o.security.tls() && !o.insecure_allow_remote) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen ", o.listen,
          " is not a loopback address: remote clients need TLS. Pass --tls-cert and --tls-key (and "
          "--tls-client-ca for mTLS), or --insecure-allow-remote to serve plaintext anyway, or listen on "
          "127.0.0.1 / a Unix socket."));
    }
    // A bearer token sent in plaintext across a network is as good as published.
    if (!is_loopback_address(o.listen) && !o.security.tls() && !o.security.tokens_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--tokens-file with the plaintext non-loopback --listen ",
                                                     o.listen, " would send tokens in the clear: add --tls-cert "
                                                     "and --tls-key"));
    }
  }
  if (!o.web_listen.empty()) {
    std::string host, port;
    int port_number = 0;
    if (!split_host_port(o.web_listen, host, port) || !absl::SimpleAtoi(port, &port_number) || port_number < 0 ||
        port_number > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--web-listen \"", o.web_listen, "\" is not host:port"));
    }
    if (!is_loopback_address(o.web_listen) && !o.security.tls() && !o.insecure_allow_remote) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--web-listen ", o.web_listen,
          " is not a loopback address: browsers off this host need HTTPS. Pass --tls-cert and --tls-key, put a "
          "TLS proxy in front and listen on 127.0.0.1, or --insecure-allow-remote to serve plain HTTP anyway."));
    }
    if (!is_loopback_address(o.web_listen) && !o.security.tls() && !o.security.tokens_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--tokens-file with the plain-HTTP non-loopback --web-listen ",
                                                     o.web_listen, " would send tokens in the clear: add --tls-cert "
                                                     "and --tls-key"));
    }
  }
  for (const std::string& origin : o.web_allow_origins) {
    const size_t scheme = origin.find("://");
    if (scheme == std::string::npos || (origin.substr(0, scheme) != "http" && origin.substr(0, scheme) != "https") ||
        origin.size() == scheme + 3 || origin.find('/', scheme + 3) != std::string::npos || origin.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("--web-allow-origin \"", origin.substr(0, 256),
                                                     "\" is not an origin: scheme://host[:port], no path"));
    }
  }
  if (!o.web_playground.empty()) {
    if (o.web_listen.empty()) return absl::InvalidArgumentError("--web-playground is set but --web-listen is empty");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.web_playground / "index.html", ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--web-playground ", o.web_playground.string(),
                                                     " has no index.html (examples/browser is the playground)"));
    }
  }
  if (!o.web_allow_origins.empty() && o.web_listen.empty()) {
    return absl::InvalidArgumentError("--web-allow-origin is set but --web-listen is empty");
  }
  const SecurityOptions& sec = o.security;
  if (sec.tls_cert.empty() != sec.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  if (!sec.tls_client_ca.empty() && !sec.tls()) {
    return absl::InvalidArgumentError("--tls-client-ca (mTLS) needs --tls-cert and --tls-key");
  }
  if (sec.tls() && o.listen.empty()) {
    return absl::InvalidArgumentError("--tls-cert is set but --listen is empty: TLS applies to the TCP listener");
  }
  const Limits& l = o.limits;
  for (auto [name, value] : {std::pair<const char*, uint64_t>{"max_nodes_per_request", l.max_nodes_per_request},
                             {"max_rank", l.max_rank},
                             {"max_elements", l.max_elements},
                             {"max_work", l.max_work},
                             {"max_message_bytes", l.max_message_bytes},
                             {"max_sessions", l.max_sessions},
                             {"chunk_bytes", l.chunk_bytes},
                             {"max_graph_depth", l.max_graph_depth},
                             {"max_requests_in_flight", l.max_requests_in_flight}}) {
    if (value == 0) return absl::InvalidArgumentError(absl::StrCat(name, " must be positive"));
  }
  if (l.max_message_bytes > uint64_t{INT32_MAX}) {
    return absl::InvalidArgumentError("max_message_bytes must fit gRPC's int limit (2 GiB)");
  }
  if (l.max_inline_bytes >= l.max_message_bytes || l.chunk_bytes >= l.max_message_bytes) {
    return absl::InvalidArgumentError("max_inline_bytes and chunk_bytes must be below max_message_bytes");
  }
  if (o.workers == 0) return absl::InvalidArgumentError("workers must be positive");
  if (!o.cache_remote.empty() && o.cache_remote_key_file.empty()) {
    // A shared binary cache is a way to run code on every host that reads it: never unsigned.
    return absl::InvalidArgumentError("--cache-remote needs --cache-remote-key-file: remote entries are signed "
                                      "with that secret and only entries it signed are loaded");
  }
  if (o.cache_remote.empty() && (o.cache_remote_read_only || !o.cache_remote_key_file.empty())) {
    return absl::InvalidArgumentError("--cache-remote-read-only and --cache-remote-key-file need --cache-remote");
  }
  if (!o.cache_remote.empty() && o.cache_remote_timeout.count() <= 0) {
    return absl::InvalidArgumentError("--cache-remote-timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace polygrad::server
