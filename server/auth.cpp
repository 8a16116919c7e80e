#include "server/auth.h"

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/request_id.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

constexpr size_t kMinTokenChars = 16;
constexpr size_t kMaxTenantChars = 64;

bool valid_tenant(std::string_view t) {
  if (t.empty() || t.size() > kMaxTenantChars) return false;
  for (char c : t) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// Compares without an early exit, so the time taken does not reveal how many leading bytes of
// a guess are right. Lengths are compared last, also without a branch on the content.
bool constant_time_equal(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return (diff | static_cast<unsigned char>(a.size() != b.size())) == 0;
}

}  // namespace

absl::StatusOr<TokenTable> TokenTable::parse(std::string_view text, std::string_view origin) {
  TokenTable table;
  absl::flat_hash_set<std::string> seen;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(av(text), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(av(origin), ":", line_no, ": ", av(why)));
    };
    if (f.size() < 2 || f.size() > 3) return bad("expected \"<token> <tenant> [admin]\"");
    if (f[0].size() < kMinTokenChars) return bad(absl::StrCat("token shorter than ", kMinTokenChars, " characters"));
    if (!valid_tenant(std::string_view(f[1].data(), f[1].size()))) {
      return bad("tenant must be 1-64 characters of [A-Za-z0-9._-]");
    }
    if (f.size() == 3 && f[2] != "admin") return bad("the third field may only be \"admin\"");
    if (!seen.insert(std::string(f[0])).second) return bad("token listed twice");
    table.entries_.push_back(Entry{std::string(f[0]), Principal{std::string(f[1]), f.size() == 3}});
  }
  if (table.entries_.empty()) return absl::InvalidArgumentError(absl::StrCat(av(origin), ": no tokens"));
  return table;
}

absl::StatusOr<TokenTable> TokenTable::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read tokens file ", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string());
}

const Principal* TokenTable::find(std::string_view token) const {
  const Principal* found = nullptr;
  for (const Entry& e : entries_) {  // every entry, even after a match
    if (constant_time_equal(e.token, token)) found = &e.principal;
  }
  return found;
}

bool is_public_method(std::string_view path) {
  return absl::StartsWith(av(path), "/grpc.health.v1.Health/") ||
         absl::StartsWith(av(path), "/grpc.reflection.v1alpha.ServerReflection/");
}

bool is_admin_method(std::string_view path) { return absl::StartsWith(av(path), "/polygrad.v1.PolygradAdmin/"); }

TokenAuthProcessor::TokenAuthProcessor(std::shared_ptr<const TokenTable> tokens, RejectCallback on_reject)
    : tokens_(std::move(tokens)), on_reject_(std::move(on_reject)) {}

grpc::Status TokenAuthProcessor::Process(const InputMetadata& md, grpc::AuthContext*, OutputMetadata*,
                                         OutputMetadata*) {
  std::string path;
  if (auto it = md.find(":path"); it != md.end()) path.assign(it->second.data(), it->second.size());
  if (is_public_method(path)) return grpc::Status::OK;
  const auto reject = [&](grpc::StatusCode code, std::string_view message) {
    const std::string id = new_request_id();
    if (on_reject_) on_reject_(code, path, id);
    return grpc::Status(code, absl::StrCat(av(message), " (request id ", id, ")"));
  };
  // Two tokens would leave it to map order which one the tenant comes from: refuse.
  if (md.count("authorization") > 1) {
    return reject(grpc::StatusCode::UNAUTHENTICATED, "more than one authorization metadata entry");
  }
  auto it = md.find("authorization");
  if (it == md.end()) {
    return reject(grpc::StatusCode::UNAUTHENTICATED,
                  "this daemon requires a token: send metadata \"authorization: Bearer <token>\"");
  }
  std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || value.substr(0, kBearer.size()) != kBearer) {
    return reject(grpc::StatusCode::UNAUTHENTICATED, "the authorization metadata must be \"Bearer <token>\"");
  }
  const Principal* p = tokens_->find(value.substr(kBearer.size()));
  if (p == nullptr) return reject(grpc::StatusCode::UNAUTHENTICATED, "unknown token");
  if (is_admin_method(path) && !p->admin) {
    return reject(grpc::StatusCode::PERMISSION_DENIED,
                  absl::StrCat(path, " needs an admin token; tenant ", p->tenant, "'s token is not one"));
  }
  // The token stays in the metadata (not "consumed"): TenantInterceptor reads it again.
  return grpc::Status::OK;
}

namespace {

class TenantInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TenantInterceptor(const TokenTable* tokens) : tokens_(tokens) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      if (auto* md = methods->GetRecvInitialMetadata(); md != nullptr) {
        md->erase(kTenantKey);
        if (tokens_ != nullptr) {
          if (auto it = md->find("authorization"); it != md->end()) {
            std::string_view value(it->second.data(), it->second.size());
            constexpr std::string_view kBearer = "Bearer ";
            const Principal* p = value.size() > kBearer.size() ? tokens_->find(value.substr(kBearer.size())) : nullptr;
            if (p != nullptr) tenant_ = p->tenant;
          }
          md->emplace(grpc::string_ref(kTenantKey), grpc::string_ref(tenant_));
        }
      }
    }
    methods->Proceed();
  }

 private:
  const TokenTable* tokens_;
  std::string tenant_;  // outlives the metadata view that points into it: one per call
};

}  // namespace

grpc::experimental::Interceptor* TenantInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo*) {
  return new TenantInterceptor(tokens_.get());
}

std::string tenant_of(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTenantKey);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace polygrad::server
