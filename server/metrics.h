// Prometheus metrics of the daemon (DESIGN §6): polygradd_ prefix, base units, _total counters,
// no per-session or per-kernel label. Also the engine's observer, so kernel-cache lookups,
// compiles and kernel runs are counted where they happen. Live values (sessions, buffers) are
// read at scrape time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/engine/engine.h"

namespace prometheus {
class Counter;
class Exposer;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace polygrad::server {

// Values owned elsewhere, read at scrape time.
struct LiveCounts {
  uint64_t sessions = 0;
  uint64_t sessions_created = 0;
  uint64_t sessions_closed = 0;
  // The kernel cache's disk tier, as this daemon last counted it (other daemons may share it).
  uint64_t cache_bytes = 0;
  uint64_t cache_entries = 0;
  uint64_t cache_evictions = 0;
  uint64_t cache_discarded = 0;
  uint64_t cache_write_no_space = 0;     // entries not written, by reason
  uint64_t cache_write_read_only = 0;
  uint64_t cache_write_permission = 0;
  uint64_t cache_write_other = 0;
  uint64_t schedule_cache_entries = 0;  // compiled realize programs in the engine's memory
  // Kernel builds by tier (core/cache/kernel_cache.h: quick and optimized), optimized builds run
  // behind a quick one that failed, and those queued or running now.
  uint64_t kernel_builds_quick = 0;
  uint64_t kernel_builds_optimized = 0;
  uint64_t background_build_failures = 0;
  uint64_t background_builds_pending = 0;
  // Quick builds that failed (those kernels waited for the C compiler), and launches that ran a
  // quick build.
  uint64_t kernel_build_failures_quick = 0;
  uint64_t kernel_quick_launches = 0;
};

class Metrics final : public EngineObserver {
 public:
  explicit Metrics(std::string_view version);
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics on host:port (port 0 picks one). UNAVAILABLE when it cannot bind.
  absl::Status serve(const std::string& listen);
  int port() const { return port_; }
  // Stops the HTTP endpoint (can block ~2 s inside prometheus-cpp).
  void stop_serving();

  void set_live_source(std::function<LiveCounts()> source);

  void observe_request(std::string_view method, absl::StatusCode code, double seconds);
  // A call that came over the gRPC-Web port (server/web_gateway.h): counted by transport as well
  // as in polygradd_requests_total (through which every forwarded call also passes).
  void observe_web_request(std::string_view method, absl::StatusCode code);
  // How long a request's heavy part waited in the worker pool's queue.
  void observe_queue(std::string_view method, double seconds);
  void add_upload_bytes(uint64_t n);
  void add_download_bytes(uint64_t n);
  // A request refused by a quota; `limit` is its label (session_bytes, requests_in_flight, ...).
  void add_quota_rejection(std::string_view limit);
  // A call refused by authentication (UNAUTHENTICATED) or authorization (PERMISSION_DENIED).
  void add_auth_rejection(absl::StatusCode code);

  // EngineObserver.
  void on_cache_lookup(CacheResult result) override;
  void on_remote_lookup(std::string_view result) override;
  void on_remote_upload(std::string_view result) override;
  void on_remote_error(std::string_view kind) override;
  void on_schedule_cache_lookup(bool hit) override;
  void on_compile(double seconds, bool ok) override;
  void on_tuning(TuningResult result) override;
  void on_pass(std::string_view pass, double seconds) override;
  void on_kernel(double seconds) override;
  void on_device_kernel(const std::string& device, double seconds) override;

  // The exposition text a scrape would return.
  std::string render() const;

 private:
  class LiveCollectable;
  class SeriesMemo;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<LiveCollectable> live_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;

  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* request_seconds_;
  prometheus::Family<prometheus::Histogram>* queue_seconds_;
  prometheus::Family<prometheus::Counter>* transport_requests_;
  prometheus::Counter* cache_memory_hit_;
  prometheus::Counter* cache_disk_hit_;
  prometheus::Counter* cache_miss_;
  prometheus::Family<prometheus::Counter>* lookups_;  // also the remote tier's {tier="remote",result}
  prometheus::Family<prometheus::Counter>* remote_uploads_;
  prometheus::Family<prometheus::Counter>* remote_errors_;
  prometheus::Counter* schedule_hit_;
  prometheus::Counter* schedule_miss_;
  prometheus::Counter* tuning_hit_;
  prometheus::Counter* tuning_miss_;
  prometheus::Counter* tuning_search_;
  prometheus::Histogram* compile_seconds_;
  prometheus::Counter* compile_failures_;
  prometheus::Family<prometheus::Histogram>* pass_family_;
  prometheus::Family<prometheus::Histogram>* kernel_family_;
  prometheus::Histogram* kernel_seconds_;  // the CPU's series
  prometheus::Counter* upload_bytes_;
  prometheus::Counter* download_bytes_;
  prometheus::Family<prometheus::Counter>* quota_rejections_;
  prometheus::Family<prometheus::Counter>* auth_rejections_;
  std::unique_ptr<SeriesMemo> memo_;  // the labelled series of every request, found once
};

}  // namespace polygrad::server
