// The daemon assembled: engine, sessions, metrics, the gRPC server with health and reflection.
// main() and the tests both start it through Server::start with a ServerOptions.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "polygrad/v1/admin.pb.h"
#include "server/log.h"
#include "server/periodic.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/quota.h"
#include "server/session.h"
#include "server/worker_pool.h"

namespace grpc {
class Server;
class ServerBuilder;
}

namespace polygrad::server {

class PolygradService;
class AdminService;
class BlobStore;
class SharedMemoryRegions;
class TokenAuthProcessor;
class WebGateway;

// The version reported by GetInfo and polygradd_build_info.
std::string_view version();

class Server {
 public:
  // Validates the options, creates the engine and binds every listener; errors name the cause.
  static absl::StatusOr<std::unique_ptr<Server>> start(ServerOptions options);
  ~Server();  // shuts down (briefly) if shutdown() was not called
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }  // the bound TCP port (the chosen one for port 0); 0 when off
  std::string tcp_address() const;    // "127.0.0.1:<port>" style, empty when TCP is off
  const std::string& unix_socket() const { return options_.unix_socket; }
  int metrics_port() const { return metrics_->port(); }
  int web_port() const;  // the bound gRPC-Web port; 0 when --web-listen is off

  // Graceful drain: health goes NOT_SERVING, new calls are refused, in-flight calls get until
  // `grace` to finish and are cancelled after. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::seconds(10));

  SessionManager& sessions() { return *sessions_; }
  Metrics& metrics() { return *metrics_; }
  Engine& engine() { return *engine_; }
  Quotas& quotas() { return *quotas_; }
  const WorkerPool& workers() const { return *pool_; }
  const Logger& logger() const { return logger_; }

 private:
  explicit Server(ServerOptions options);
  absl::Status init();
  // Health of the daemon and its service; never back to serving once shutdown began.
  void set_serving(bool serving);
  // Compiles the manifest's kernels on a thread; health turns SERVING when it is done.
  void start_prewarm(v1::PrewarmManifest manifest);
  void add_cache_counts(LiveCounts& counts) const;
  absl::Status listen(grpc::ServerBuilder& builder);  // credentials and ports for every listener

  ServerOptions options_;
  Logger logger_;
  std::unique_ptr<Metrics> metrics_;       // the engine's observer: outlives the engine
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<SharedMemoryRegions> shm_;    // before sessions_: closing a session frees its regions
  std::unique_ptr<Quotas> quotas_;          // before sessions_: sessions refund it when they close
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<Periodic> trimmer_;  // trim_free_memory every --memory-trim-interval
  std::unique_ptr<WorkerPool> pool_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<PolygradService> service_;
  std::unique_ptr<AdminService> admin_;
  std::mutex health_mu_;
  std::thread prewarm_;
  std::unique_ptr<grpc::Server> grpc_;
  std::shared_ptr<TokenAuthProcessor> auth_;  // null without --tokens-file
  std::unique_ptr<WebGateway> web_;           // after grpc_: it calls into it
  int port_ = 0;
  bool unix_bound_ = false;
  bool shut_down_ = false;
};

}  // namespace polygrad::server
