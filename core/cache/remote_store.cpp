#include "core/cache/remote_store.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/cache/cache_entry.h"
#include "core/cache/http_store.h"
#include "core/cache/redis_store.h"
#include "core/cache/sha256.h"

namespace polygrad {
namespace {

// scheme://[userinfo@]host[:port][/path], split; host may be [v6].
struct Url {
  std::string scheme, userinfo, host, path;
  int port = 0;
};

absl::StatusOr<Url> parse_url(absl::string_view text) {
  // The URL comes from the operator's command line; it is bounded in messages all the same.
  const std::string shown(text.substr(0, 200));
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--cache-remote ", shown, ": ", why));
  };
  Url u;
  const size_t colon = text.find("://");
  if (colon == absl::string_view::npos) return bad("expected scheme://host, e.g. redis://127.0.0.1:6379/0");
  u.scheme = absl::AsciiStrToLower(text.substr(0, colon));
  absl::string_view rest = text.substr(colon + 3);
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) u.path = std::string(rest.substr(slash));
  if (const size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    u.userinfo = std::string(authority.substr(0, at));
    authority.remove_prefix(at + 1);
  }
  absl::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("unterminated [ in the host");
    u.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the host");
      port = after.substr(1);
    }
  } else if (const size_t c = authority.rfind(':'); c != absl::string_view::npos) {
    u.host = std::string(authority.substr(0, c));
    port = authority.substr(c + 1);
  } else {
    u.host = std::string(authority);
  }
  if (u.host.empty()) return bad("no host");
  if (!port.empty() && (!absl::SimpleAtoi(port, &u.port) || u.port <= 0 || u.port > 65535))
    return bad("the port is not a number from 1 to 65535");
  return u;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteStore>> open_remote_store(std::string_view url, std::chrono::milliseconds timeout) {
  absl::StatusOr<Url> u = parse_url(absl::string_view(url.data(), url.size()));
  if (!u.ok()) return u.status();
  if (u->scheme == "http" || u->scheme == "https") {
    std::string base(url);
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::string shown = absl::StrCat(u->scheme, "://", u->host, u->port ? absl::StrCat(":", u->port) : "", u->path);
    return make_http_store(std::move(base), std::move(shown), timeout);
  }
  if (u->scheme == "redis") {
    int db = 0;
    absl::string_view path = u->path;
    while (!path.empty() && path.front() == '/') path.remove_prefix(1);
    if (!path.empty() && (!absl::SimpleAtoi(path, &db) || db < 0 || db > 1000000))
      return absl::InvalidArgumentError(absl::StrCat("--cache-remote ", std::string(url.substr(0, 200)),
                                                     ": the path must be a database number, as in redis://host:6379/0"));
    // redis://:password@host or redis://user:password@host (Redis 6 ACL users).
    std::string user, password;
    if (const size_t c = u->userinfo.find(':'); c != std::string::npos) {
      user = u->userinfo.substr(0, c);
      password = u->userinfo.substr(c + 1);
    } else {
      password = u->userinfo;
    }
    return make_redis_store(u->host, u->port ? u->port : 6379, db, std::move(user), std::move(password), timeout);
  }
  return absl::InvalidArgumentError(absl::StrCat("--cache-remote ", std::string(url.substr(0, 200)),
                                                 ": unsupported scheme (use http://, https:// or redis://)"));
}

std::string_view remote_error_kind(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded: return "timeout";
    case absl::StatusCode::kUnavailable: return "connect";
    case absl::StatusCode::kDataLoss: return "protocol";
    case absl::StatusCode::kResourceExhausted: return "full";
    default: return "status";
  }
}

std::string remote_entry_name(const std::string& key) {
  return sha256_hex(absl::StrCat("polygrad kernel-cache entry v", kCacheFormatVersion, " ", key));
}

}  // namespace polygrad
