#include "server/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/service_type.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/cache/kernel_cache.h"
#include "core/runtime/cpu/quick_compiler.h"
#include "core/runtime/host_allocator.h"
#include "server/decode_ops.h"
#include "server/memory_trim.h"
#include "server/admin.h"
#include "server/blob_store.h"
#include "server/shm.h"
#include "server/prewarm.h"
#include "server/auth.h"
#include "server/request_id.h"
#include "server/undecodable.h"
#include "server/service.h"
#include "server/status.h"
#include "server/tls.h"
#include "server/web_gateway.h"

#ifndef POLYGRAD_VERSION
#define POLYGRAD_VERSION "0.0.0-dev"
#endif

namespace polygrad::server {
namespace {

constexpr const char* kServiceName = "polygrad.v1.Polygrad";

// A stale socket file from a daemon that died is removed; a live one is an error.
absl::Status prepare_unix_socket(const std::string& path) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("cannot inspect ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket; not touching it"));
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path is too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket(): ", std::strerror(errno)));
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  close(fd);
  if (rc == 0) return absl::AlreadyExistsError(absl::StrCat("another daemon is listening on ", path));
  if (err != ECONNREFUSED) {
    return absl::UnavailableError(absl::StrCat("cannot check existing socket ", path, ": ", std::strerror(err)));
  }
  if (unlink(path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot remove stale socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view version() { return POLYGRAD_VERSION; }

absl::StatusOr<std::unique_ptr<Server>> Server::start(ServerOptions options) {
  if (absl::Status s = validate(options); !s.ok()) return s;
  std::unique_ptr<Server> server(new Server(std::move(options)));
  if (absl::Status s = server->init(); !s.ok()) {
    server->shutdown(std::chrono::milliseconds(0));
    return s;
  }
  return server;
}

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      logger_(options_.log_level, options_.log_format, options_.log_sink),
      metrics_(std::make_unique<Metrics>(version())) {}

absl::Status Server::init() {
  if (absl::Status s = check_op_table(); !s.ok()) return s;
  set_host_cache_limit(options_.host_cache_bytes);
  EngineOptions eo;
  eo.cache_dir = options_.cache_dir;
  eo.cache_max_bytes = options_.cache_max_bytes;
  if (!options_.cache_key_file.empty()) {
    absl::StatusOr<std::string> key = read_cache_key(options_.cache_key_file);
    if (!key.ok()) return key.status();
    eo.cache_signing_key = *std::move(key);
  }
  if (!options_.cache_remote.empty()) {
    absl::StatusOr<std::string> key = read_cache_key(options_.cache_remote_key_file, "--cache-remote-key-file");
    if (!key.ok()) return key.status();
    eo.cache_remote = options_.cache_remote;
    eo.cache_remote_key = *std::move(key);
    eo.cache_remote_read_only = options_.cache_remote_read_only;
    eo.cache_remote_timeout = options_.cache_remote_timeout;
    eo.cache_remote_breaker = options_.cache_remote_breaker;
  }
  eo.schedule_cache_entries = options_.schedule_cache_entries;
  eo.compiler = options_.compiler;
  eo.quick_compile = options_.quick_compile;
  eo.tune = options_.tune;
  eo.devices = options_.devices;
  eo.threads = options_.threads;
  eo.observer = metrics_.get();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::create(std::move(eo));
  if (!engine.ok()) return absl::Status(engine.status().code(), absl::StrCat("engine: ", engine.status().message()));
  engine_ = *std::move(engine);

  blobs_ = std::make_unique<BlobStore>(options_.blob_max_bytes);
  shm_ = std::make_unique<SharedMemoryRegions>(options_.shm_max_bytes);
  quotas_ = std::make_unique<Quotas>(options_.limits,
                                     [this](std::string_view limit) { metrics_->add_quota_rejection(limit); });
  sessions_ = std::make_unique<SessionManager>(
      *engine_, options_.limits, options_.session_idle_timeout, options_.reaper_interval,
      [this](const std::string& id, std::string_view reason) {
        logger_.info("session closed", {{"session", id}, {"reason", std::string(reason)}});
        shm_->drop_session(id);  // a session's shared memory goes with it
      },
      quotas_.get());
  keep_freed_memory_mapped();
  trimmer_ = std::make_unique<Periodic>(options_.memory_trim_interval, trim_free_memory);
  metrics_->set_live_source([this] {
    LiveCounts c{sessions_->live(), sessions_->created_total(), sessions_->closed_total()};
    add_cache_counts(c);
    return c;
  });
  pool_ = std::make_unique<WorkerPool>(options_.workers);
  service_ = std::make_unique<PolygradService>(ServiceDeps{*engine_, *sessions_, *metrics_, logger_, *pool_,
                                                           options_.limits, std::string(version()), stopping_,
                                                           blobs_.get(), shm_.get(), quotas_.get()});

  admin_ = std::make_unique<AdminService>(ServiceDeps{*engine_, *sessions_, *metrics_, logger_, *pool_,
                                                      options_.limits, std::string(version()), stopping_});
  std::optional<v1::PrewarmManifest> manifest;
  if (!options_.prewarm_file.empty()) {
    absl::StatusOr<v1::PrewarmManifest> m = load_manifest(options_.prewarm_file);
    if (!m.ok()) return m.status();
    manifest = *std::move(m);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(options_.limits.max_message_bytes));
  builder.RegisterService(service_.get());
  builder.RegisterService(admin_.get());
  if (absl::Status s = listen(builder); !s.ok()) return s;
  grpc_ = builder.BuildAndStart();
  if (!grpc_) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ",
                                               options_.listen.empty() ? "" : options_.listen,
                                               options_.listen.empty() || options_.unix_socket.empty() ? "" : " and ",
                                               options_.unix_socket.empty() ? "" : "unix:" + options_.unix_socket,
                                               " (address in use or not permitted?)"));
  }
  if (!options_.listen.empty() && port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
  }
  if (!options_.unix_socket.empty()) {
    unix_bound_ = true;
    chmod(options_.unix_socket.c_str(), 0600);  // this user only: there is no auth on the socket
  }
  if (manifest) {
    set_serving(false);
    start_prewarm(*std::move(manifest));
  } else {
    set_serving(true);
  }

  if (!options_.metrics_listen.empty()) {
    if (absl::Status s = metrics_->serve(options_.metrics_listen); !s.ok()) return s;
  }
  if (!options_.web_listen.empty()) {
    WebGatewayOptions wo;
    wo.listen = options_.web_listen;
    wo.allow_origins = options_.web_allow_origins;
    wo.max_message_bytes = options_.limits.max_message_bytes;
    wo.playground_dir = options_.web_playground;
    if (options_.security.tls()) {
      absl::StatusOr<std::string> cert = read_pem(options_.security.tls_cert, "tls-cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = read_pem(options_.security.tls_key, "tls-key");
      if (!key.ok()) return key.status();
      wo.tls_cert_pem = *std::move(cert);
      wo.tls_key_pem = *std::move(key);
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // responses are bounded by the service, requests by the gateway
    args.SetMaxSendMessageSize(-1);
    absl::StatusOr<std::unique_ptr<WebGateway>> web =
        WebGateway::start(std::move(wo), grpc_->InProcessChannel(args), auth_, *metrics_);
    if (!web.ok()) return web.status();
    web_ = *std::move(web);
  }
  logger_.info("listening", {{"grpc", tcp_address()},
                             {"tls", !options_.security.tls() ? "off"
                                     : options_.security.tls_client_ca.empty() ? "on" : "mtls"},
                             {"auth", options_.security.tokens_file.empty() ? "off" : "tokens"},
                             {"unix", options_.unix_socket},
                             {"web", web_ == nullptr ? std::string()
                                                     : absl::StrCat(options_.security.tls() ? "https://" : "http://",
                                                                    options_.web_listen.substr(
                                                                        0, options_.web_listen.rfind(':')),
                                                                    ":", web_->port())},
                             {"metrics", options_.metrics_listen.empty()
                                             ? std::string()
                                             : absl::StrCat("http://", options_.metrics_listen.substr(
                                                                           0, options_.metrics_listen.rfind(':')),
                                                            ":", metrics_->port(), "/metrics")},
                             {"version", std::string(version())}});
  // One line per device, so an operator sees at start why a device is not used.
  for (const DeviceInfo& d : engine_->devices())
    logger_.info("device", {{"name", d.name}, {"available", d.available ? "true" : "false"}, {"detail", d.detail}});
  if (!quick_compiler_available())
    logger_.info("quick compile tier", {{"state", "unavailable"}, {"why", "this polygradd was built without libtcc"}});
  else
    logger_.info("quick compile tier", {{"state", options_.quick_compile ? "on" : "off (--quick-compile=off)"},
                                        {"compiler", quick_compiler_version()}});
  return absl::OkStatus();
}

void Server::set_serving(bool serving) {
  std::lock_guard lock(health_mu_);
  if (serving && stopping_.load()) return;  // a prewarm finishing during shutdown must not revive it
  grpc::HealthCheckServiceInterface* health = grpc_ ? grpc_->GetHealthCheckService() : nullptr;
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  health->SetServingStatus(kServiceName, serving);
}

void Server::start_prewarm(v1::PrewarmManifest manifest) {
  logger_.info("prewarm started", {{"file", options_.prewarm_file.string()},
                                   {"graphs", absl::StrCat(manifest.graphs_size())}});
  prewarm_ = std::thread([this, manifest = std::move(manifest)] {
    absl::StatusOr<v1::PrewarmResponse> r = prewarm(manifest, *sessions_, [this] { return stopping_.load(); });
    if (r.ok()) {
      logger_.info("prewarm finished", {{"graphs", absl::StrCat(r->graphs())},
                                        {"kernels", absl::StrCat(r->kernels())},
                                        {"compiled", absl::StrCat(r->compiled())},
                                        {"seconds", absl::StrCat(r->seconds())}});
    } else {
      // A bad graph costs its kernels a compile on first use; it does not keep the daemon down.
      logger_.warning("prewarm failed", {{"file", options_.prewarm_file.string()},
                                         {"error", std::string(r.status().message())}});
    }
    set_serving(true);
  });
}

void Server::add_cache_counts(LiveCounts& c) const {
  const KernelCache::Stats s = engine_->kernel_cache().stats();
  c.cache_bytes = s.disk_bytes;
  c.cache_entries = s.disk_entries;
  c.cache_evictions = s.evictions;
  c.cache_discarded = s.discarded;
  c.cache_write_no_space = s.write_failures_no_space;
  c.cache_write_read_only = s.write_failures_read_only;
  c.cache_write_permission = s.write_failures_permission;
  c.cache_write_other = s.write_failures_other;
  c.kernel_builds_quick = s.quick_builds;
  c.kernel_builds_optimized = s.optimized_builds;
  c.background_build_failures = s.background_failures;
  c.background_builds_pending = s.background_pending;
  c.kernel_build_failures_quick = s.quick_failures;
  c.kernel_quick_launches = s.quick_launches;
  c.schedule_cache_entries = engine_->schedule_cache_entries();
}

absl::Status Server::listen(grpc::ServerBuilder& builder) {
  std::shared_ptr<const TokenTable> table;
  if (!options_.security.tokens_file.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::load(options_.security.tokens_file);
    if (!tokens.ok()) {
      return absl::Status(tokens.status().code(), absl::StrCat("--tokens-file: ", tokens.status().message()));
    }
    logger_.info("tokens loaded", {{"file", options_.security.tokens_file.string()},
                                   {"tokens", absl::StrCat(tokens->size())}});
    table = std::make_shared<const TokenTable>(*std::move(tokens));
    auth_ = std::make_shared<TokenAuthProcessor>(
        table, [this](grpc::StatusCode code, std::string_view path, std::string_view request_id) {
          const auto c = static_cast<absl::StatusCode>(code);
          metrics_->add_auth_rejection(c);
          logger_.warning("request refused", {{"method", std::string(path)},
                                              {"request_id", std::string(request_id)},
                                              {"code", code_name(c)}});
        });
  }
  absl::StatusOr<ListenerCredentials> creds = make_listener_credentials(options_, auth_);
  if (!creds.ok()) return creds.status();
  // A request id and the caller's tenant for every call, of every service, and a clear status
  // for request bytes that do not parse.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RequestIdInterceptorFactory>());
  interceptors.push_back(std::make_unique<TenantInterceptorFactory>(std::move(table)));
  interceptors.push_back(std::make_unique<UndecodableRequestInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  if (!options_.listen.empty()) builder.AddListeningPort(options_.listen, creds->tcp, &port_);
  if (!options_.unix_socket.empty()) {
    if (absl::Status s = prepare_unix_socket(options_.unix_socket); !s.ok()) return s;
    builder.AddListeningPort("unix:" + options_.unix_socket, creds->unix);
  }
  return absl::OkStatus();
}

int Server::web_port() const { return web_ == nullptr ? 0 : web_->port(); }

std::string Server::tcp_address() const {
  if (options_.listen.empty() || port_ == 0) return {};
  return absl::StrCat(options_.listen.substr(0, options_.listen.rfind(':')), ":", port_);
}

void Server::shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  stopping_.store(true);
  if (grpc_) {
    set_serving(false);
    logger_.info("shutting down", {{"grace_seconds", absl::StrCat(grace.count() / 1000.0)}});
    grpc_->Shutdown(std::chrono::system_clock::now() + grace);
    grpc_->Wait();
  }
  if (web_ != nullptr) web_->stop();  // its calls ended with the gRPC server's; joins its threads
  // Order matters: nothing may scrape or run while what it reads goes away. Each step is logged
  // (debug) so that a shutdown that does not finish says where it stands.
  const auto step = [this](std::string_view what) { logger_.debug("shutdown step", {{"step", std::string(what)}}); };
  step("prewarm");
  if (prewarm_.joinable()) prewarm_.join();  // it stops between kernels once stopping_ is set
  step("background builds");
  if (engine_) engine_->kernel_cache().stop_background_builds();  // kills their compilers, joins
  step("metrics");
  metrics_->stop_serving();
  metrics_->set_live_source({});
  step("pool");
  pool_.reset();
  step("sessions");
  if (sessions_) sessions_->close_all("shutdown");
  if (unix_bound_) unlink(options_.unix_socket.c_str());
  step("done");
}

Server::~Server() {
  shutdown(std::chrono::milliseconds(500));
  web_.reset();  // its in-process channel goes before the server it reaches
  grpc_.reset();
  admin_.reset();
  service_.reset();
  sessions_.reset();
  quotas_.reset();
  logger_.debug("shutdown step", {{"step", "engine"}});
  engine_.reset();
  shm_.reset();
  blobs_.reset();
  logger_.debug("shutdown step", {{"step", "destroyed"}});
}

}  // namespace polygrad::server
