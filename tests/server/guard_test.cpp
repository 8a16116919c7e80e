// The daemon's guards, each against a real in-process daemon on real sockets: authentication
// and tenants, TLS and mTLS (certificates made by openssl at test time), quotas, deadlines and
// cancellation, drain, request ids, and leak accounting over 1,000 sessions.
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_replace.h"
#include "core/runtime/buffer.h"
#include "core/runtime/cpu/quick_compiler.h"
#include "server/auth.h"
#include "server/server.h"
#include "test_util.h"

namespace polygrad::server {
namespace {

using namespace polygrad::server::testing;  // NOLINT
namespace fs = std::filesystem;

constexpr const char* kAlice = "alice-token-0123456789";
constexpr const char* kBob = "bob-token-0123456789abc";
constexpr const char* kAdmin = "admin-token-0123456789";

struct Logs {
  std::mutex mu;
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) {
      std::lock_guard lock(mu);
      lines.emplace_back(l);
    };
  }
  bool contains_all(std::initializer_list<std::string_view> parts) {
    std::lock_guard lock(mu);
    for (const std::string& l : lines) {
      bool all = true;
      for (std::string_view p : parts) all = all && l.find(p) != std::string::npos;
      if (all) return true;
    }
    return false;
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A daemon of its own per test, with a temporary directory and helpers to call it as a tenant.
class GuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "polygrad-guard-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    write_file(dir_ / "tokens", std::string("# test tokens\n") + kAlice + " alice\n" + kBob + " bob\n\n" + kAdmin +
                                    " ops admin\n");
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  ServerOptions options(bool tokens = true) {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.unix_socket.clear();
    o.metrics_listen.clear();
    o.cache_dir = dir_ / "cache";
    o.log_level = LogLevel::Debug;
    o.log_sink = logs_.sink();
    if (tokens) o.security.tokens_file = dir_ / "tokens";
    return o;
  }
  void start(ServerOptions o) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    channel_ = grpc::CreateChannel(server_->tcp_address(), grpc::InsecureChannelCredentials());
    stub_ = v1::Polygrad::NewStub(channel_);
  }

  // Starts the daemon with the default options and `cc` as its C compiler. Without the quick
  // tier (--quick-compile=off): these tests need a realize to wait for the compiler they hold.
  void start_compiling_with(const HeldCompiler& cc) {
    ServerOptions o = options();
    o.compiler = cc.path();
    o.quick_compile = false;
    start(std::move(o));
  }

  // A context carrying `token` (none when null). Its deadline only stops a hung call: 600 s is
  // far past any request here, which takes seconds at most on a loaded machine.
  static std::unique_ptr<grpc::ClientContext> as(const char* token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (token != nullptr) ctx->AddMetadata("authorization", std::string("Bearer ") + token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    return ctx;
  }

  grpc::Status create(const char* token, std::string* id) {
    auto ctx = as(token);
    v1::CreateSessionResponse r;
    grpc::Status s = stub_->CreateSession(ctx.get(), v1::CreateSessionRequest(), &r);
    *id = r.session_id();
    return s;
  }
  grpc::Status close(const char* token, const std::string& id) {
    auto ctx = as(token);
    v1::CloseSessionRequest req;
    req.set_session_id(id);
    v1::CloseSessionResponse r;
    return stub_->CloseSession(ctx.get(), req, &r);
  }
  grpc::Status upload(const char* token, const std::string& session, size_t nbytes, uint64_t* handle = nullptr) {
    auto ctx = as(token);
    v1::UploadResponse resp;
    auto writer = stub_->Upload(ctx.get(), &resp);
    v1::UploadChunk c;
    c.mutable_header()->set_session_id(session);
    c.mutable_header()->set_dtype(v1::UINT8);
    c.mutable_header()->add_shape(static_cast<int64_t>(nbytes));
    c.set_data(std::string(nbytes, '\x01'));
    writer->Write(c);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (handle != nullptr) *handle = resp.handle();
    return s;
  }
  grpc::Status realize(const char* token, const std::string& session, std::vector<v1::Node> nodes,
                       std::vector<uint64_t> outputs, v1::RealizeResponse* resp,
                       std::chrono::milliseconds deadline = std::chrono::seconds(600)) {
    auto ctx = as(token);
    ctx->set_deadline(std::chrono::system_clock::now() + deadline);
    v1::RealizeRequest req;
    req.set_session_id(session);
    for (v1::Node& n : nodes) *req.add_nodes() = std::move(n);
    for (uint64_t o : outputs) req.add_outputs(o);
    return stub_->Realize(ctx.get(), req, resp);
  }

  fs::path dir_;
  Logs logs_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Polygrad::Stub> stub_;
};

// K reductions of one input, each with its own constant: K kernels to compile and run.
std::vector<v1::Node> many_kernels(int k, std::vector<uint64_t>* outputs, double salt = 0.0) {
  std::vector<v1::Node> nodes;
  nodes.push_back(inline_buffer(1, v1::FLOAT32, {64}, bytes_of(std::vector<float>(64, 1.0f))));
  for (int i = 0; i < k; ++i) {
    const uint64_t base = 10 + 3 * static_cast<uint64_t>(i);
    nodes.push_back(float_const(base, salt + i + 0.5, {64}));
    nodes.push_back(op(base + 1, v1::MUL, {1, base}));
    nodes.push_back(reduce(base + 2, v1::REDUCE_SUM, base + 1, {0}));
    outputs->push_back(base + 2);
  }
  return nodes;
}

// ---- tokens file ----------------------------------------------------------------------------

TEST(TokenTableTest, ParsesEntriesAndNamesBadLines) {
  absl::StatusOr<TokenTable> t =
      TokenTable::parse("# comment\n\n  tok-aaaaaaaaaaaaaaaa alice\ntok-bbbbbbbbbbbbbbbb ops admin\n", "f");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  ASSERT_NE(t->find("tok-aaaaaaaaaaaaaaaa"), nullptr);
  EXPECT_EQ(t->find("tok-aaaaaaaaaaaaaaaa")->tenant, "alice");
  EXPECT_FALSE(t->find("tok-aaaaaaaaaaaaaaaa")->admin);
  EXPECT_TRUE(t->find("tok-bbbbbbbbbbbbbbbb")->admin);
  EXPECT_EQ(t->find("tok-aaaaaaaaaaaaaaa"), nullptr);   // a prefix
  EXPECT_EQ(t->find("tok-aaaaaaaaaaaaaaaaa"), nullptr);  // longer
  EXPECT_EQ(t->find(""), nullptr);

  for (auto [text, why] : {std::pair<const char*, const char*>{"short alice\n", "f:1: token shorter"},
                           {"tok-aaaaaaaaaaaaaaaa\n", "f:1: expected"},
                           {"\ntok-aaaaaaaaaaaaaaaa al/ice\n", "f:2: tenant"},
                           {"tok-aaaaaaaaaaaaaaaa alice root\n", "f:1: the third field"},
                           {"tok-aaaaaaaaaaaaaaaa a\ntok-aaaaaaaaaaaaaaaa b\n", "f:2: token listed twice"},
                           {"# nothing\n", "f: no tokens"}}) {
    absl::StatusOr<TokenTable> bad = TokenTable::parse(text, "f");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(why), absl::string_view::npos) << bad.status();
    EXPECT_EQ(bad.status().message().find("tok-aaaa"), absl::string_view::npos) << "an error quotes a token";
  }
  EXPECT_TRUE(is_admin_method("/polygrad.v1.PolygradAdmin/Prewarm"));
  EXPECT_FALSE(is_admin_method("/polygrad.v1.Polygrad/Realize"));
  EXPECT_FALSE(is_admin_method("/polygrad.v1.PolygradAdministrator/X"));
}

// ---- quota bookkeeping ----------------------------------------------------------------------

// Random holds and drops of a few shared buffers against a model: each buffer counts once while
// any reference remains, the tenant sees the sum of its sessions, and clearing refunds all.
TEST(HeldBuffersTest, CountsEachBufferOnceAgainstAModel) {
  Limits limits;
  Quotas quotas(limits, nullptr);
  std::shared_ptr<Usage> tenant = quotas.tenant("t");
  std::mt19937 rng(7);
  std::vector<BufferPtr> buffers;
  for (int i = 0; i < 6; ++i) buffers.push_back(Buffer::allocate_host(DType::Float32, {static_cast<int64_t>(i + 1)}));
  HeldBuffers a(&quotas, tenant), b(&quotas, tenant);
  std::map<const Buffer*, int> model_a, model_b;
  auto expect = [&](const std::map<const Buffer*, int>& m, const HeldBuffers& h) {
    uint64_t n = 0, bytes = 0;
    for (const auto& [buf, refs] : m) {
      if (refs > 0) ++n, bytes += buf->nbytes();
    }
    EXPECT_EQ(h.buffers(), n);
    EXPECT_EQ(h.bytes(), bytes);
  };
  for (int step = 0; step < 2000; ++step) {
    const bool first = rng() % 2 == 0;
    HeldBuffers& h = first ? a : b;
    auto& m = first ? model_a : model_b;
    const BufferPtr& buf = buffers[rng() % buffers.size()];
    if (rng() % 2 == 0) {
      h.hold(buf);
      ++m[buf.get()];
    } else if (m[buf.get()] > 0) {
      h.drop(buf.get());
      --m[buf.get()];
    }
    expect(model_a, a);
    expect(model_b, b);
    ASSERT_EQ(tenant->bytes.load(), a.bytes() + b.bytes());
    ASSERT_EQ(tenant->buffers.load(), a.buffers() + b.buffers());
  }
  const uint64_t held = a.bytes();
  {
    // A reservation counts only buffers not held yet (each once), and gives its room back when it goes.
    std::vector<BufferPtr> twice = buffers;
    twice.insert(twice.end(), buffers.begin(), buffers.end());
    uint64_t new_bytes = 0;
    for (const BufferPtr& buf : buffers) new_bytes += model_a[buf.get()] > 0 ? 0 : buf->nbytes();
    absl::StatusOr<Reservation> r = a.reserve(twice);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(a.bytes(), held + new_bytes);
    EXPECT_EQ(tenant->bytes.load(), a.bytes() + b.bytes());
  }
  EXPECT_EQ(a.bytes(), held);
  a.clear();
  b.clear();
  EXPECT_EQ(tenant->bytes.load(), 0u);
  EXPECT_EQ(tenant->buffers.load(), 0u);
}

// ---- authentication and tenants -------------------------------------------------------------

TEST_F(GuardTest, NoTokenAndWrongTokenAreUnauthenticated) {
  start(options());
  std::string id;
  grpc::Status refused = create(nullptr, &id);
  EXPECT_CODE(refused, UNAUTHENTICATED);
  // The refusal names the request id it is logged under.
  const size_t at = refused.error_message().find("(request id ");
  ASSERT_NE(at, std::string::npos) << refused.error_message();
  const std::string rid = refused.error_message().substr(at + 12, 16);
  EXPECT_TRUE(logs_.contains_all({"request refused", "method=/polygrad.v1.Polygrad/CreateSession",
                                  "request_id=" + rid, "code=UNAUTHENTICATED"}));
  EXPECT_CODE(create("not-a-known-token-at-all", &id), UNAUTHENTICATED);
  {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", kAlice);  // no "Bearer "
    v1::CreateSessionResponse r;
    EXPECT_CODE(stub_->CreateSession(ctx.get(), v1::CreateSessionRequest(), &r), UNAUTHENTICATED);
  }
  EXPECT_EQ(server_->sessions().live(), 0u);
  EXPECT_TRUE(create(kAlice, &id).ok());
  EXPECT_EQ(server_->sessions().live(), 1u);
  EXPECT_NE(server_->metrics().render().find("polygradd_auth_rejections_total{code=\"UNAUTHENTICATED\"} 3"),
            std::string::npos);
  {
    auto ctx = as(kAlice);
    ctx->AddMetadata("authorization", std::string("Bearer ") + kBob);  // which one? neither
    v1::CreateSessionResponse r;
    EXPECT_CODE(stub_->CreateSession(ctx.get(), v1::CreateSessionRequest(), &r), UNAUTHENTICATED);
  }
  // Health needs no token (probes have none).
  grpc::GenericStub generic(channel_);
  grpc::Slice empty("");
  grpc::ByteBuffer req(&empty, 1), resp;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                    [&](grpc::Status s) { done.set_value(s); });
  EXPECT_TRUE(done.get_future().get().ok());
}

TEST_F(GuardTest, UnixSocketNeedsATokenToo) {
  ServerOptions o = options();
  o.unix_socket = (dir_ / "d.sock").string();
  start(std::move(o));
  auto stub = v1::Polygrad::NewStub(
      grpc::CreateChannel("unix:" + (dir_ / "d.sock").string(), grpc::InsecureChannelCredentials()));
  v1::CreateSessionResponse r;
  EXPECT_CODE(stub->CreateSession(as(nullptr).get(), v1::CreateSessionRequest(), &r), UNAUTHENTICATED);
  EXPECT_TRUE(stub->CreateSession(as(kBob).get(), v1::CreateSessionRequest(), &r).ok());
}

TEST_F(GuardTest, AnotherTenantsSessionIsNotFound) {
  start(options());
  std::string alice, bob;
  ASSERT_TRUE(create(kAlice, &alice).ok());
  ASSERT_TRUE(create(kBob, &bob).ok());
  uint64_t handle = 0;
  ASSERT_TRUE(upload(kAlice, alice, 16, &handle).ok());

  // Every way in answers as if the session did not exist.
  v1::RealizeResponse rr;
  grpc::Status s = realize(kBob, alice, {handle_buffer(1, handle)}, {1}, &rr);
  EXPECT_CODE(s, NOT_FOUND);
  grpc::Status missing = realize(kBob, std::string(32, '0'), {handle_buffer(1, handle)}, {1}, &rr);
  EXPECT_EQ(s.error_message(), absl::StrReplaceAll(missing.error_message(), {{std::string(32, '0'), alice}}));
  EXPECT_CODE(upload(kBob, alice, 4), NOT_FOUND);
  {
    auto ctx = as(kBob);
    v1::DownloadRequest req;
    req.set_session_id(alice);
    req.set_handle(handle);
    auto reader = stub_->Download(ctx.get(), req);
    v1::DownloadChunk c;
    while (reader->Read(&c)) ADD_FAILURE() << "bob read alice's buffer";
    EXPECT_CODE(reader->Finish(), NOT_FOUND);
  }
  {
    auto ctx = as(kBob);
    v1::ReleaseRequest req;
    req.set_session_id(alice);
    req.add_handles(handle);
    v1::ReleaseResponse r;
    EXPECT_CODE(stub_->Release(ctx.get(), req, &r), NOT_FOUND);
  }
  EXPECT_CODE(close(kBob, alice), NOT_FOUND);
  {
    auto ctx = as(kBob);  // a client cannot name its own tenant
    ctx->AddMetadata("polygrad-tenant", "alice");
    v1::CloseSessionRequest req;
    req.set_session_id(alice);
    v1::CloseSessionResponse r;
    EXPECT_CODE(stub_->CloseSession(ctx.get(), req, &r), NOT_FOUND);
  }
  // Attaching an Execute stream to it.
  {
    auto ctx = as(kBob);
    auto stream = stub_->Execute(ctx.get());
    v1::ExecuteRequest req;
    req.set_request_id(1);
    req.mutable_open()->set_attach_session_id(alice);
    ASSERT_TRUE(stream->Write(req));
    v1::ExecuteResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.error().code(), grpc::StatusCode::NOT_FOUND) << resp.DebugString();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  // Alice's handle in bob's own session is no buffer of his either.
  EXPECT_CODE(realize(kBob, bob, {handle_buffer(1, handle)}, {1}, &rr), NOT_FOUND);
  // And alice still has everything.
  EXPECT_EQ(server_->sessions().live(), 2u);
  EXPECT_TRUE(realize(kAlice, alice, {handle_buffer(1, handle)}, {1}, &rr).ok());
  EXPECT_TRUE(close(kAlice, alice).ok());
}

// The admin check goes by method name, so it covers every admin RPC, defined or not. An empty
// CacheStats request is valid, so the admin token gets an answer.
TEST_F(GuardTest, AdminMethodsNeedTheAdminToken) {
  start(options());
  grpc::GenericStub generic(channel_);
  auto call = [&](const char* token, const std::string& method) {
    grpc::Slice empty("");
    grpc::ByteBuffer req(&empty, 1), resp;
    auto ctx = as(token);
    std::promise<grpc::Status> done;
    generic.UnaryCall(ctx.get(), method, grpc::StubOptions(), &req, &resp,
                      [&](grpc::Status s) { done.set_value(s); });
    return done.get_future().get();
  };
  EXPECT_CODE(call(kAlice, "/polygrad.v1.PolygradAdmin/CacheStats"), PERMISSION_DENIED);
  EXPECT_CODE(call(nullptr, "/polygrad.v1.PolygradAdmin/CacheStats"), UNAUTHENTICATED);
  EXPECT_CODE(call(kAdmin, "/polygrad.v1.PolygradAdmin/CacheStats"), OK);
  EXPECT_CODE(call(kAlice, "/polygrad.v1.PolygradAdmin/NoSuchMethod"), PERMISSION_DENIED);
  EXPECT_CODE(call(kAdmin, "/polygrad.v1.PolygradAdmin/NoSuchMethod"), UNIMPLEMENTED);  // let through
  EXPECT_CODE(call(kAlice, "/polygrad.v1.Polygrad/NoSuchMethod"), UNIMPLEMENTED);
}

TEST_F(GuardTest, WithoutATokensFileNoTokenIsNeeded) {
  start(options(false));
  std::string id;
  EXPECT_TRUE(create(nullptr, &id).ok());
  EXPECT_TRUE(close(nullptr, id).ok());
}

// ---- request ids ----------------------------------------------------------------------------

TEST_F(GuardTest, EveryCallHasARequestIdInTrailersAndErrorLogs) {
  start(options());
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  auto ctx = as(kAlice);
  ctx->AddMetadata("polygrad-request-id", "chosen-by-client");  // replaced, not trusted
  v1::RealizeRequest req;
  req.set_session_id(id);
  *req.add_nodes() = op(5, v1::NEG, {99});
  req.add_outputs(5);
  v1::RealizeResponse resp;
  grpc::Status s = stub_->Realize(ctx.get(), req, &resp);
  EXPECT_FALSE(s.ok());
  auto md = ctx->GetServerTrailingMetadata();
  auto it = md.find("polygrad-request-id");
  ASSERT_NE(it, md.end());
  const std::string rid(it->second.data(), it->second.size());
  EXPECT_EQ(rid.size(), 16u);
  EXPECT_NE(rid, "chosen-by-client");
  EXPECT_TRUE(logs_.contains_all({"request failed", "method=Realize", "session=" + id, "request_id=" + rid}));
}

// ---- TLS and mTLS ---------------------------------------------------------------------------

class TlsTest : public GuardTest {
 protected:
  void SetUp() override {
    GuardTest::SetUp();
    // A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all made now.
    const std::string d = dir_.string();
    write_file(dir_ / "san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (const std::string& cmd : {
             "openssl req -x509 " + ec + " -keyout " + d + "/ca.key -out " + d + "/ca.pem -days 1 -subj /CN=test-ca",
             "openssl req -x509 " + ec + " -keyout " + d + "/other.key -out " + d +
                 "/other-ca.pem -days 1 -subj /CN=other-ca",
             "openssl req " + ec + " -keyout " + d + "/server.key -out " + d + "/server.csr -subj /CN=localhost",
             "openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -out " +
                 d + "/server.pem -days 1 -extfile " + d + "/san.ext",
             "openssl req " + ec + " -keyout " + d + "/client.key -out " + d + "/client.csr -subj /CN=client",
             "openssl x509 -req -in " + d + "/client.csr -CA " + d + "/ca.pem -CAkey " + d +
                 "/ca.key -CAcreateserial -out " + d + "/client.pem -days 1",
         }) {
      ASSERT_EQ(std::system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd;
    }
  }

  ServerOptions tls_options(bool mtls, bool tokens) {
    ServerOptions o = options(tokens);
    o.security.tls_cert = dir_ / "server.pem";
    o.security.tls_key = dir_ / "server.key";
    if (mtls) o.security.tls_client_ca = dir_ / "ca.pem";
    return o;
  }

  // Calls GetInfo over TLS trusting `ca`, with the client certificate when `client_cert`.
  grpc::Status get_info(const std::string& ca, bool client_cert, const char* token = nullptr) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = read_file(dir_ / ca);
    if (client_cert) {
      o.pem_private_key = read_file(dir_ / "client.key");
      o.pem_cert_chain = read_file(dir_ / "client.pem");
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    auto stub = v1::Polygrad::NewStub(grpc::CreateCustomChannel(server_->tcp_address(), grpc::SslCredentials(o), args));
    auto ctx = as(token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ServerInfo info;
    return stub->GetInfo(ctx.get(), v1::GetInfoRequest(), &info);
  }
  grpc::Status plaintext_get_info() {
    auto ctx = as(nullptr);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ServerInfo info;
    return stub_->GetInfo(ctx.get(), v1::GetInfoRequest(), &info);
  }
};

TEST_F(TlsTest, TlsServesTrustingClientsOnly) {
  start(tls_options(false, false));
  EXPECT_TRUE(get_info("ca.pem", false).ok());
  EXPECT_FALSE(get_info("other-ca.pem", false).ok());  // the server's certificate is not trusted
  EXPECT_FALSE(plaintext_get_info().ok());             // no plaintext on a TLS port
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificate) {
  start(tls_options(true, false));
  EXPECT_TRUE(get_info("ca.pem", true).ok());
  EXPECT_FALSE(get_info("ca.pem", false).ok());
  EXPECT_FALSE(plaintext_get_info().ok());
}

TEST_F(TlsTest, TokensOverTls) {
  start(tls_options(true, true));
  EXPECT_CODE(get_info("ca.pem", true), UNAUTHENTICATED);
  EXPECT_TRUE(get_info("ca.pem", true, kAlice).ok());
}

TEST_F(TlsTest, ConfigurationErrorsNameTheFlag) {
  ServerOptions o = tls_options(false, false);
  o.listen = "0.0.0.0:0";  // remote is fine with TLS...
  EXPECT_TRUE(validate(o).ok()) << validate(o);
  o.security.tls_cert.clear();  // ...not without
  EXPECT_NE(validate(o).message().find("remote clients need TLS"), absl::string_view::npos) << validate(o);
  ServerOptions half = tls_options(false, false);
  half.security.tls_key.clear();
  EXPECT_NE(validate(half).message().find("--tls-cert and --tls-key go together"), absl::string_view::npos);
  ServerOptions ca_only = options();
  ca_only.security.tls_client_ca = dir_ / "ca.pem";
  EXPECT_NE(validate(ca_only).message().find("--tls-client-ca (mTLS) needs"), absl::string_view::npos);
  o.security.tls_key.clear();
  o.insecure_allow_remote = true;
  EXPECT_TRUE(validate(o).ok());
  o.security.tokens_file = dir_ / "tokens";  // tokens never cross a network in plaintext
  EXPECT_NE(validate(o).message().find("in the clear"), absl::string_view::npos) << validate(o);

  ServerOptions missing = tls_options(false, false);
  missing.security.tls_key = dir_ / "nope.key";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(missing));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls-key: cannot read"), absl::string_view::npos) << s.status();
  ServerOptions not_pem = tls_options(false, false);
  not_pem.security.tls_cert = dir_ / "tokens";
  s = Server::start(std::move(not_pem));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is not a PEM file"), absl::string_view::npos) << s.status();
  ServerOptions bad_tokens = options();
  write_file(dir_ / "bad-tokens", "x y z w\n");
  bad_tokens.security.tokens_file = dir_ / "bad-tokens";
  s = Server::start(std::move(bad_tokens));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tokens-file: "), absl::string_view::npos) << s.status();
}

// ---- quotas ---------------------------------------------------------------------------------

std::string quota_count(Server& server, const std::string& limit) {
  const std::string text = server.metrics().render();
  const std::string series = "polygradd_quota_rejections_total{limit=\"" + limit + "\"} ";
  size_t at = text.find(series);
  if (at == std::string::npos) return "absent";
  return text.substr(at + series.size(), text.find('\n', at) - at - series.size());
}

TEST_F(GuardTest, SessionBytesQuotaCoversUploadsAndResults) {
  ServerOptions o = options();
  o.limits.max_session_bytes = 4096;
  start(std::move(o));
  const int64_t baseline = Buffer::live_count();
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  uint64_t h = 0;
  ASSERT_TRUE(upload(kAlice, id, 2048, &h).ok());
  grpc::Status s = upload(kAlice, id, 2049);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "session buffer bytes limit 4096 exceeded: would hold 4097 (--max-session-bytes)");

  // A realize whose result would not fit fails; what it computed is freed. (Its 2 KiB of inline
  // data fit, the 2 KiB result does not.)
  v1::RealizeResponse rr;
  s = realize(kAlice, id,
              {inline_buffer(1, v1::FLOAT32, {512}, bytes_of(std::vector<float>(512, 2.0f))), op(2, v1::NEG, {1})},
              {2}, &rr);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("would hold 6144"), std::string::npos) << s.error_message();
  EXPECT_EQ(quota_count(*server_, "session_bytes"), "2");
  // Released room is room again.
  {
    auto ctx = as(kAlice);
    v1::ReleaseRequest req;
    req.set_session_id(id);
    req.add_handles(h);
    v1::ReleaseResponse r;
    ASSERT_TRUE(stub_->Release(ctx.get(), req, &r).ok());
  }
  ASSERT_TRUE(realize(kAlice, id,
                      {inline_buffer(1, v1::FLOAT32, {512}, bytes_of(std::vector<float>(512, 2.0f))),
                       op(2, v1::NEG, {1})},
                      {2}, &rr)
                  .ok());
  EXPECT_EQ(server_->sessions().find(id, "alice").value()->held_bytes(), 4096u);
  ASSERT_TRUE(close(kAlice, id).ok());
  EXPECT_EQ(Buffer::live_count(), baseline);
  EXPECT_EQ(server_->quotas().tenant("alice")->bytes.load(), 0u);
}

TEST_F(GuardTest, SessionBufferCountQuota) {
  ServerOptions o = options();
  o.limits.max_session_buffers = 2;
  start(std::move(o));
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  ASSERT_TRUE(upload(kAlice, id, 1).ok());
  ASSERT_TRUE(upload(kAlice, id, 1).ok());
  grpc::Status s = upload(kAlice, id, 1);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "session buffers limit 2 exceeded: would hold 3 (--max-session-buffers)");
}

TEST_F(GuardTest, TenantQuotasSpanSessionsAndSpareOtherTenants) {
  ServerOptions o = options();
  o.limits.max_tenant_bytes = 5000;
  o.limits.max_tenant_sessions = 2;
  start(std::move(o));
  std::string a1, a2, a3, b1;
  ASSERT_TRUE(create(kAlice, &a1).ok());
  ASSERT_TRUE(create(kAlice, &a2).ok());
  grpc::Status s = create(kAlice, &a3);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "tenant sessions limit 2 exceeded: would have 3 open (--max-tenant-sessions)");
  ASSERT_TRUE(create(kBob, &b1).ok());

  ASSERT_TRUE(upload(kAlice, a1, 3000).ok());
  s = upload(kAlice, a2, 3000);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "tenant buffer bytes limit 5000 exceeded: would hold 6000 (--max-tenant-bytes)");
  EXPECT_TRUE(upload(kBob, b1, 3000).ok());
  // Closing a session gives its bytes and its session slot back.
  ASSERT_TRUE(close(kAlice, a1).ok());
  EXPECT_TRUE(upload(kAlice, a2, 3000).ok());
  EXPECT_TRUE(create(kAlice, &a3).ok());
  EXPECT_EQ(quota_count(*server_, "tenant_sessions"), "1");
  EXPECT_EQ(quota_count(*server_, "tenant_bytes"), "1");
}

TEST_F(GuardTest, GraphDepthLimit) {
  ServerOptions o = options();
  o.limits.max_graph_depth = 10;
  start(std::move(o));
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  std::vector<v1::Node> nodes = {float_const(1, 1.0, {4})};
  for (uint64_t i = 2; i <= 20; ++i) nodes.push_back(op(i, v1::NEG, {i - 1}));
  v1::RealizeResponse rr;
  grpc::Status s = realize(kAlice, id, nodes, {20}, &rr);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("graph depth limit 10 exceeded"), std::string::npos) << s.error_message();
  // The refused request left nothing behind: its node ids are free, shallower graphs run.
  nodes.resize(5);
  EXPECT_TRUE(realize(kAlice, id, nodes, {5}, &rr).ok());
  EXPECT_EQ(quota_count(*server_, "graph_depth"), "1");
}

// The depth walk is iterative: a graph far deeper than any stack frame budget is refused cleanly.
TEST_F(GuardTest, VeryDeepGraphIsRefusedNotACrash) {
  ServerOptions o = options();
  o.limits.max_graph_depth = 1000;
  start(std::move(o));
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  std::vector<v1::Node> nodes = {float_const(1, 1.0, {4})};
  for (uint64_t i = 2; i <= 50000; ++i) nodes.push_back(op(i, v1::NEG, {i - 1}));
  v1::RealizeResponse rr;
  grpc::Status s = realize(kAlice, id, nodes, {50000}, &rr);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("graph depth limit 1000 exceeded"), std::string::npos) << s.error_message();
  std::string more;
  EXPECT_TRUE(create(kAlice, &more).ok());  // still serving
}

TEST_F(GuardTest, RequestsInFlightLimit) {
  ServerOptions o = options();
  o.limits.max_requests_in_flight = 1;
  start(std::move(o));
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  // An upload stream left open is a request in flight.
  auto ctx = as(kAlice);
  v1::UploadResponse resp;
  auto writer = stub_->Upload(ctx.get(), &resp);
  v1::UploadChunk c;
  c.mutable_header()->set_session_id(id);
  c.mutable_header()->set_dtype(v1::UINT8);
  c.mutable_header()->add_shape(2);
  c.set_data("a");
  ASSERT_TRUE(writer->Write(c));
  ASSERT_TRUE(eventually([&] { return server_->quotas().in_flight() == 1; }));
  std::string other;
  grpc::Status s = create(kBob, &other);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("requests in flight limit 1 exceeded"), std::string::npos) << s.error_message();
  c.clear_header();
  c.set_data("b");
  ASSERT_TRUE(writer->Write(c));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_TRUE(eventually([&] { return server_->quotas().in_flight() == 0; }));
  EXPECT_TRUE(create(kBob, &other).ok());
}

// A megabyte session id is echoed cut short: the reply stays under the client's metadata limit
// (it answered RESOURCE_EXHAUSTED about its own limit before) and no log line carries it whole.
TEST_F(GuardTest, AHugeSessionIdIsEchoedBoundedInTheReplyAndTheLog) {
  start(options());
  const std::string huge(1 << 20, 's');
  v1::RealizeResponse rr;
  grpc::Status s = realize(kAlice, huge, {float_const(1, 1.0, {4})}, {1}, &rr);
  EXPECT_CODE(s, NOT_FOUND);
  EXPECT_LT(s.error_message().size(), 256u) << s.error_message().size();
  EXPECT_NE(s.error_message().find("...(1048576 bytes)\" not found"), std::string::npos) << s.error_message();
  std::lock_guard lock(logs_.mu);
  ASSERT_FALSE(logs_.lines.empty());
  for (const std::string& line : logs_.lines) EXPECT_LT(line.size(), 16u << 10) << line.substr(0, 200);
}

// ---- deadlines, cancellation and drain -------------------------------------------------------

TEST_F(GuardTest, DeadlineStopsAManyKernelRealizeAndFreesItsTemporaries) {
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  // One output per kernel: the graph below really is `k` kernels.
  std::vector<uint64_t> few;
  std::vector<v1::Node> few_nodes = many_kernels(4, &few, 1000.0);
  v1::RealizeResponse rr;
  ASSERT_TRUE(realize(kAlice, id, few_nodes, few, &rr).ok());
  ASSERT_EQ(rr.stats().kernels(), 4u) << rr.DebugString();
  ASSERT_EQ(rr.stats().compiled(), 4u);  // each kernel is compiled on its own
  const int64_t baseline = Buffer::live_count();

  std::string big;
  ASSERT_TRUE(create(kAlice, &big).ok());
  std::vector<uint64_t> outputs;
  std::vector<v1::Node> nodes = many_kernels(400, &outputs);
  // Compiles are held until the deadline has passed: it passes during the realize on any machine.
  cc.hold();
  grpc::Status s = realize(kAlice, big, nodes, outputs, &rr, std::chrono::milliseconds(300));
  EXPECT_CODE(s, DEADLINE_EXCEEDED);
  // Nobody waits for the held compiles any more: they are killed while the gate is still closed.
  EXPECT_TRUE(eventually([&] { return cc.all_held_gone(); }));
  cc.release();
  // The server stopped: far fewer than 400 kernels were built.
  ASSERT_TRUE(eventually([&] { return server_->quotas().in_flight() == 0; }));
  EXPECT_FALSE(logs_.contains_all({"did not finish within"}));  // not ended by the compile timeout
  const std::string text = server_->metrics().render();
  const std::string series = "polygradd_compile_duration_seconds_count ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stod(text.substr(at + series.size())), 200.0);
  EXPECT_EQ(Buffer::live_count(), baseline);
  // The failed request left no nodes: the same ids can be sent again.
  std::vector<uint64_t> again;
  std::vector<v1::Node> again_nodes = many_kernels(2, &again);
  EXPECT_TRUE(realize(kAlice, big, again_nodes, again, &rr).ok());
}

TEST_F(GuardTest, ABusyWorkerPoolKeepsTheGrpcThreadsToTinyRealizes) {
  // While no worker is busy a cached realize of up to 2^21 iterations is answered on the gRPC
  // thread; while one is (here: held in a compile), only tiny ones are, and this one is queued.
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  std::string id, other;
  ASSERT_TRUE(create(kAlice, &id).ok());
  ASSERT_TRUE(create(kBob, &other).ok());
  auto queued = [&] { return queued_realizes(server_->metrics().render()); };
  // 40000 elements: over the busy pool's inline limit, under the idle pool's; cached after the first.
  auto mid = [](uint64_t x, float v) { return broadcast_plus_one(x, v, 40000); };
  v1::RealizeResponse rr;
  ASSERT_TRUE(realize(kAlice, id, mid(100, 1.0f), {103}, &rr).ok());
  cc.hold();
  std::vector<uint64_t> outputs;
  std::vector<v1::Node> nodes = many_kernels(1, &outputs, 77.0);
  std::thread busy([&] {
    v1::RealizeResponse r;
    EXPECT_TRUE(realize(kBob, other, nodes, outputs, &r).ok());
  });
  ASSERT_TRUE(eventually([&] { return cc.held(); }));  // a worker waits for the compiler
  double before = queued();
  ASSERT_TRUE(realize(kAlice, id, mid(200, 2.0f), {203}, &rr).ok());
  EXPECT_TRUE(rr.stats().schedule_cache_hit());
  EXPECT_EQ(queued() - before, 1.0) << "a 40000-element realize ran on the gRPC thread while a worker was busy";
  cc.release();
  busy.join();
  ASSERT_TRUE(eventually([&] { return server_->workers().idle(); }));
  before = queued();
  ASSERT_TRUE(realize(kAlice, id, mid(300, 3.0f), {303}, &rr).ok());
  EXPECT_EQ(queued() - before, 0.0) << "the pool is idle again: answered at once";
}

TEST_F(GuardTest, ClientCancelStopsTheRealize) {
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  const int64_t baseline = Buffer::live_count();
  std::vector<uint64_t> outputs;
  v1::RealizeRequest req;
  req.set_session_id(id);
  for (v1::Node& n : many_kernels(400, &outputs, 0.25)) *req.add_nodes() = std::move(n);
  for (uint64_t o : outputs) req.add_outputs(o);
  auto ctx = as(kAlice);
  // Cancelled while a kernel compile is held: the realize is in flight however fast the machine.
  cc.hold();
  std::thread canceller([&] {
    EXPECT_TRUE(eventually([&] { return cc.held(); }));
    ctx->TryCancel();
  });
  v1::RealizeResponse rr;
  grpc::Status s = stub_->Realize(ctx.get(), req, &rr);
  canceller.join();
  EXPECT_CODE(s, CANCELLED);
  EXPECT_TRUE(eventually([&] { return cc.all_held_gone(); }));  // killed, the gate still closed
  cc.release();
  ASSERT_TRUE(eventually([&] { return server_->quotas().in_flight() == 0; }));
  EXPECT_EQ(Buffer::live_count(), baseline);
  // The client's call returned at the cancel; the handler logs when it returns, which may be
  // after its quota slot was handed back.
  EXPECT_TRUE(eventually([&] { return logs_.contains_all({"request failed", "method=Realize", "code=CANCELLED"}); }));
}

TEST_F(GuardTest, DrainLetsInFlightWorkFinishAndRefusesNewWork) {
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  std::vector<uint64_t> outputs;
  std::vector<v1::Node> nodes = many_kernels(24, &outputs, 0.75);
  v1::RealizeResponse rr;
  // The realize is held at its first compile until the drain has begun and refuses new work.
  cc.hold();
  std::future<grpc::Status> running =
      std::async(std::launch::async, [&] { return realize(kAlice, id, nodes, outputs, &rr); });
  ASSERT_TRUE(eventually([&] { return cc.held(); }));
  std::thread opener([&] {
    std::string refused;
    EXPECT_TRUE(eventually([&] { return !create(kBob, &refused).ok(); }));
    EXPECT_EQ(running.wait_for(std::chrono::seconds(0)), std::future_status::timeout);  // still held
    cc.release();
  });
  server_->shutdown(std::chrono::seconds(600));
  opener.join();
  grpc::Status s = running.get();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rr.results_size(), 24);
  EXPECT_EQ(server_->sessions().live(), 0u);
  std::string other;
  EXPECT_FALSE(create(kAlice, &other).ok());
}

// The compiler removed after start-up: FAILED_PRECONDITION naming it, and the daemon serves on.
TEST_F(GuardTest, ACompilerThatVanishedIsAClearError) {
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  fs::remove(cc.path());
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  std::vector<uint64_t> outputs;
  v1::RealizeResponse rr;
  std::vector<v1::Node> nodes = many_kernels(1, &outputs, 3.0);
  grpc::Status s = realize(kAlice, id, nodes, outputs, &rr);
  EXPECT_CODE(s, FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("cannot run " + cc.path()), std::string::npos) << s.error_message();
  EXPECT_TRUE(create(kAlice, &id).ok());
}

// A realize still compiling when the shutdown grace ends: the call is cancelled and its compiler
// killed, so the daemon stops without waiting for the compile (or its 120 s timeout).
TEST_F(GuardTest, ShutdownAfterTheGraceKillsAHeldCompile) {
  HeldCompiler cc(dir_);
  start_compiling_with(cc);
  std::string id;
  ASSERT_TRUE(create(kAlice, &id).ok());
  std::vector<uint64_t> outputs;
  std::vector<v1::Node> nodes = many_kernels(4, &outputs, 0.5);
  v1::RealizeResponse rr;
  cc.hold();
  std::future<grpc::Status> running =
      std::async(std::launch::async, [&] { return realize(kAlice, id, nodes, outputs, &rr); });
  ASSERT_TRUE(eventually([&] { return cc.held(); }));
  // The grace passes while the compile is held: it cannot finish before.
  server_->shutdown(std::chrono::milliseconds(200));
  EXPECT_FALSE(running.get().ok());
  EXPECT_TRUE(cc.all_held_gone());
  EXPECT_TRUE(logs_.contains_all({"request failed", "method=Realize"}));
  EXPECT_FALSE(logs_.contains_all({"did not finish within"}));  // not ended by the compile timeout
  cc.release();
}

// The cache directory on a file system with no room for an entry (a 4 KiB tmpfs): realizes still
// answer right, the metric says why nothing was cached, and no temporary file is left.
TEST_F(GuardTest, AFullCacheDiskStillRealizesAndTheMetricSaysWhy) {
  const fs::path small = dir_ / "small-disk";
  fs::create_directories(small);
  if (mount("tmpfs", small.c_str(), "tmpfs", 0, "size=4k") != 0) {
    GTEST_SKIP() << "cannot mount a 4 KiB tmpfs to fill (needs root or CAP_SYS_ADMIN): " << std::strerror(errno);
  }
  struct Unmount {
    const fs::path& at;
    ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
  } unmount{small};
  {
    ServerOptions o = options();
    o.cache_dir = small / "cache";
    o.quick_compile = false;  // each kernel written (or not) before the realize returns
    start(std::move(o));
    std::string id;
    ASSERT_TRUE(create(kAlice, &id).ok());
    std::vector<uint64_t> outputs;
    std::vector<v1::Node> nodes = many_kernels(3, &outputs, 2.0);
    v1::RealizeResponse rr;
    grpc::Status s = realize(kAlice, id, nodes, outputs, &rr);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(rr.stats().compiled(), 3u);
    const std::string text = server_->metrics().render();
    EXPECT_NE(text.find("polygradd_cache_write_failures_total{reason=\"no_space\"} 3"), std::string::npos)
        << text.substr(0, 4000);
    EXPECT_NE(text.find("polygradd_cache_entries 0"), std::string::npos);
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(small, ec))
      EXPECT_FALSE(e.is_regular_file()) << "left behind: " << e.path();
    server_.reset();
  }
}

// ---- leak accounting (acceptance 1) ---------------------------------------------------------

uint64_t series_value(const std::string& text, const std::string& series) {
  const double v = series_in(text, series, -1.0);
  return v < 0 ? UINT64_MAX : static_cast<uint64_t>(v);
}

// 1,000 sessions that allocate and realize, then close, idle out or drop their Execute stream at
// a random point: afterwards nothing is live and every created object was released.
TEST_F(GuardTest, ThousandSessionsLeaveNothingBehind) {
  ServerOptions o = options();
  o.session_idle_timeout = std::chrono::seconds(1);
  o.reaper_interval = std::chrono::milliseconds(50);
  start(std::move(o));
  const int64_t live_buffers = Buffer::live_count();
  const int64_t live_bytes = Buffer::live_bytes();
  std::atomic<int> failures{0};
  std::atomic<int> modes[4] = {0, 0, 0, 0};

  auto unary_session = [&](std::mt19937& rng, bool close_it) {
    std::string id;
    if (!create(kAlice, &id).ok()) return failures.fetch_add(1), void();
    uint64_t h = 0;
    if (!upload(kAlice, id, 64, &h).ok()) failures.fetch_add(1);
    v1::RealizeResponse rr;
    const float x = static_cast<float>(rng() % 100);
    if (!realize(kAlice, id,
                 {inline_buffer(1, v1::FLOAT32, {16}, bytes_of(std::vector<float>(16, x))), handle_buffer(2, h),
                  op(3, v1::NEG, {1})},
                 {3}, &rr)
             .ok()) {
      failures.fetch_add(1);
    }
    if (close_it && !close(kAlice, id).ok()) failures.fetch_add(1);
  };
  // Open, upload (whole or half), realize, download; the stream is cancelled after `stop` steps.
  auto stream_session = [&](std::mt19937& rng) {
    auto ctx = as(kAlice);
    auto stream = stub_->Execute(ctx.get());
    const int stop = static_cast<int>(rng() % 5);
    v1::ExecuteResponse resp;
    v1::ExecuteRequest req;
    for (int step = 0; step < stop; ++step) {
      req.Clear();
      req.set_request_id(static_cast<uint64_t>(step + 1));
      if (step == 0) req.mutable_open();
      if (step == 1 || step == 2) {  // the second chunk of an upload, or the start of another left unfinished
        v1::UploadChunk* c = req.mutable_upload();
        c->set_upload_id(static_cast<uint64_t>(step));
        c->mutable_header()->set_dtype(v1::FLOAT32);
        c->mutable_header()->add_shape(32);
        c->set_data(std::string(step == 1 ? 128 : 64, '\0'));
        c->set_last(step == 1);
      }
      if (step == 3) {
        v1::RealizeRequest* r = req.mutable_realize();
        *r->add_nodes() = float_const(1, 3.0, {32});
        *r->add_nodes() = op(2, v1::EXP2, {1});
        r->add_outputs(2);
      }
      if (!stream->Write(req)) break;
      if (step != 2 && !stream->Read(&resp)) break;
    }
    ctx->TryCancel();
    (void)stream->Finish();
  };

  constexpr int kThreads = 4, kPerThread = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      for (int i = 0; i < kPerThread; ++i) {
        const int mode = static_cast<int>(rng() % 4);
        modes[mode].fetch_add(1);
        if (mode == 0) unary_session(rng, true);
        if (mode == 1) unary_session(rng, false);  // left to the idle reaper
        if (mode >= 2) stream_session(rng);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& m : modes) EXPECT_GT(m.load(), 100);

  ASSERT_TRUE(eventually([&] { return server_->sessions().live() == 0; })) << server_->sessions().live();
  ASSERT_TRUE(eventually([&] { return Buffer::live_count() == live_buffers; }))
      << Buffer::live_count() << " buffers live, " << live_buffers << " before";
  EXPECT_EQ(Buffer::live_bytes(), live_bytes);
  EXPECT_GE(server_->sessions().created_total(), 500u);
  EXPECT_EQ(server_->sessions().created_total(), server_->sessions().closed_total());
  const std::shared_ptr<Usage> alice = server_->quotas().tenant("alice");
  EXPECT_EQ(alice->sessions.load(), 0u);
  EXPECT_EQ(alice->buffers.load(), 0u);
  EXPECT_EQ(alice->bytes.load(), 0u);
  const std::string text = server_->metrics().render();
  EXPECT_EQ(series_value(text, "polygradd_objects_created_total{kind=\"session\"}"),
            series_value(text, "polygradd_objects_released_total{kind=\"session\"}"));
  EXPECT_EQ(series_value(text, "polygradd_objects_created_total{kind=\"buffer\"}") -
                series_value(text, "polygradd_objects_released_total{kind=\"buffer\"}"),
            static_cast<uint64_t>(live_buffers));
  EXPECT_EQ(series_value(text, "polygradd_sessions"), 0u);
  EXPECT_EQ(series_value(text, "polygradd_device_bytes{device=\"CPU\"}"), static_cast<uint64_t>(live_bytes));
}

// ---- the quick compile tier -------------------------------------------------------------------

// --quick-compile=on (the default), told by the metrics: a new kernel's realize returns while the
// C compiler is held (its quick build ran it), and once polygradd_kernel_background_builds is 0
// (the optimized builds swapped in) no launch runs a quick build any more.
TEST_F(GuardTest, AfterTheBackgroundBuildsDrainEveryLaunchRunsTheOptimizedBuild) {
  if (!quick_compiler_available()) GTEST_SKIP() << "this polygradd was built without libtcc: no quick tier";
  HeldCompiler cc(dir_);
  ServerOptions o = options();
  o.compiler = cc.path();
  start(std::move(o));
  const auto metric = [&](const std::string& series) { return series_value(server_->metrics().render(), series); };
  const std::string quick_launches = "polygradd_kernel_quick_launches_total";
  const auto realize_fresh = [&](v1::RealizeResponse* rr) {
    std::string id;
    ASSERT_TRUE(create(kAlice, &id).ok());
    std::vector<uint64_t> outputs;
    std::vector<v1::Node> nodes = many_kernels(2, &outputs, 0.75);
    ASSERT_TRUE(realize(kAlice, id, nodes, outputs, rr).ok());
  };
  cc.hold();
  v1::RealizeResponse rr;
  realize_fresh(&rr);  // answered with the C compiler held
  EXPECT_EQ(rr.stats().compiled(), 2u);
  EXPECT_EQ(metric("polygradd_kernel_builds_total{tier=\"quick\"}"), 2u);
  EXPECT_EQ(metric("polygradd_kernel_builds_total{tier=\"optimized\"}"), 0u);
  EXPECT_EQ(metric("polygradd_kernel_build_failures_total{tier=\"quick\"}"), 0u);
  const uint64_t ran_quick = metric(quick_launches);
  EXPECT_GE(ran_quick, 2u);
  EXPECT_TRUE(eventually([&] { return cc.held(); }));
  cc.release();
  ASSERT_TRUE(eventually([&] { return metric("polygradd_kernel_background_builds") == 0; }));
  EXPECT_EQ(metric("polygradd_kernel_builds_total{tier=\"optimized\"}"), 2u);
  EXPECT_EQ(metric("polygradd_kernel_background_build_failures_total"), 0u);
  for (int i = 0; i < 3; ++i) {
    realize_fresh(&rr);
    EXPECT_EQ(rr.stats().compiled(), 0u);
    EXPECT_EQ(rr.stats().kernels(), 2u);
  }
  EXPECT_EQ(metric(quick_launches), ran_quick) << "a launch ran a quick build after its optimized one landed";
}

}  // namespace
}  // namespace polygrad::server
