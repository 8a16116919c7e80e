#include "server/metrics.h"

#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/runtime/buffer.h"
#include "core/runtime/host_allocator.h"
#include "server/memory_trim.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

const prometheus::Histogram::BucketBoundaries& request_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                            0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
  return b;
}
const prometheus::Histogram::BucketBoundaries& compile_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return b;
}
// From a simplify of a few microseconds to a compile of a minute.
const prometheus::Histogram::BucketBoundaries& pass_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05,
                                                            0.1,  0.5,  1,    5,    30,   120};
  return b;
}

const prometheus::Histogram::BucketBoundaries& kernel_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {1e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3,
                                                            0.01, 0.05, 0.1,  0.5,  1,    5,    30};
  return b;
}

prometheus::MetricFamily single(std::string name, std::string help, prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

prometheus::MetricFamily by_label(std::string name, std::string help, const char* label,
                                  std::initializer_list<std::pair<const char*, uint64_t>> values) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Counter;
  for (const auto& [kind, value] : values) {
    prometheus::ClientMetric m;
    m.label.push_back({label, kind});
    m.counter.value = static_cast<double>(value);
    f.metric.push_back(std::move(m));
  }
  return f;
}

// One series per device ("CPU", "CUDA:0", ...): Buffer::live_by_device().
prometheus::MetricFamily by_device(std::string name, std::string help, const std::vector<Buffer::DeviceUsage>& usage,
                                   int64_t Buffer::DeviceUsage::*field) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Gauge;
  for (const Buffer::DeviceUsage& u : usage) {
    prometheus::ClientMetric m;
    m.label.push_back({"device", u.device});
    m.gauge.value = static_cast<double>(u.*field);
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace

// Sessions and buffers, read when Prometheus scrapes.
class Metrics::LiveCollectable final : public prometheus::Collectable {
 public:
  void set_source(std::function<LiveCounts()> source) {
    std::lock_guard lock(mu_);
    source_ = std::move(source);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    LiveCounts c;
    {
      std::lock_guard lock(mu_);
      if (source_) c = source_();
    }
    const std::vector<Buffer::DeviceUsage> usage = Buffer::live_by_device();
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> families = {
        single("polygradd_sessions", "Live sessions.", MetricType::Gauge, static_cast<double>(c.sessions)),
        single("polygradd_sessions_created_total", "Sessions created.", MetricType::Counter,
               static_cast<double>(c.sessions_created)),
        single("polygradd_sessions_closed_total", "Sessions closed (by the client, idle expiry or stream end).",
               MetricType::Counter, static_cast<double>(c.sessions_closed)),
        single("polygradd_buffers", "Live device buffers.", MetricType::Gauge,
               static_cast<double>(Buffer::live_count())),
        single("polygradd_buffer_bytes", "Bytes held by live device buffers.", MetricType::Gauge,
               static_cast<double>(Buffer::live_bytes())),
        single("polygradd_host_cache_bytes", "Bytes of freed host buffers kept for reuse (--host-cache-bytes).",
               MetricType::Gauge, static_cast<double>(host_allocator_stats().cached_bytes)),
        single("polygradd_host_cache_reuses_total", "Host buffer allocations answered from freed buffers.",
               MetricType::Counter, static_cast<double>(host_allocator_stats().reuses)),
        single("polygradd_cache_size_bytes", "Bytes of kernel-cache entries on disk.", MetricType::Gauge,
               static_cast<double>(c.cache_bytes)),
        single("polygradd_cache_entries", "Kernel-cache entries on disk.", MetricType::Gauge,
               static_cast<double>(c.cache_entries)),
        single("polygradd_cache_evictions_total", "Kernel-cache entries evicted to stay under --cache-max-bytes.",
               MetricType::Counter, static_cast<double>(c.cache_evictions)),
        single("polygradd_cache_discarded_total", "Corrupt or truncated kernel-cache entries found and removed.",
               MetricType::Counter, static_cast<double>(c.cache_discarded)),
        by_label("polygradd_cache_write_failures_total",
                 "Kernel-cache entries that could not be written (each kernel is compiled again next time), by "
                 "reason.",
                 "reason",
                 {{"no_space", c.cache_write_no_space},
                  {"read_only", c.cache_write_read_only},
                  {"permission", c.cache_write_permission},
                  {"other", c.cache_write_other}}),
        single("polygradd_schedule_cache_entries",
               "Compiled realize programs in the schedule cache (bounded by --schedule-cache-entries).",
               MetricType::Gauge, static_cast<double>(c.schedule_cache_entries)),
        by_label("polygradd_kernel_builds_total",
                 "CPU kernels built, by tier: quick (TinyCC in process, run until the optimized build is ready; "
                 "--quick-compile) and optimized (the C compiler, in the foreground or the background).",
                 "tier", {{"quick", c.kernel_builds_quick}, {"optimized", c.kernel_builds_optimized}}),
        single("polygradd_kernel_background_build_failures_total",
               "Optimized builds behind a quick one that failed (the kernel keeps running its quick build).",
               MetricType::Counter, static_cast<double>(c.background_build_failures)),
        single("polygradd_kernel_background_builds", "Optimized builds queued or running behind a quick one.",
               MetricType::Gauge, static_cast<double>(c.background_builds_pending)),
        by_label("polygradd_kernel_build_failures_total",
                 "CPU kernel builds that failed, by tier: quick (TinyCC rejected the kernel, which was then built by "
                 "the C compiler before it ran, as with --quick-compile=off).",
                 "tier", {{"quick", c.kernel_build_failures_quick}}),
        single("polygradd_kernel_quick_launches_total",
               "CPU kernel launches that ran a quick build (before the kernel's optimized build was swapped in).",
               MetricType::Counter, static_cast<double>(c.kernel_quick_launches)),
        // Leak accounting: for every kind, created - released == live, and all three return to
        // their idle values when every client has gone.
        by_label("polygradd_objects_created_total", "Objects created, by kind.", "kind",
                {{"session", c.sessions_created}, {"buffer", Buffer::created_total()}}),
        by_label("polygradd_objects_released_total", "Objects released, by kind.", "kind",
                {{"session", c.sessions_closed}, {"buffer", Buffer::released_total()}}),
        by_device("polygradd_device_buffers", "Live buffers, by device.", usage, &Buffer::DeviceUsage::count),
        by_device("polygradd_device_bytes", "Bytes of live buffers, by device.", usage, &Buffer::DeviceUsage::bytes),
    };
    if (const std::optional<uint64_t> heap = heap_bytes_in_use()) {
      families.push_back(single("polygradd_heap_bytes",
                                "Bytes the C allocator has handed out and not had back (live buffers included); "
                                "RSS minus this is mostly memory freed but still mapped.",
                                MetricType::Gauge, static_cast<double>(*heap)));
    }
    return families;
  }

 private:
  mutable std::mutex mu_;
  std::function<LiveCounts()> source_;
};

// Family::Add builds a label map, hashes it and locks its family on each call: a small realize
// paid more for its metrics than for its kernel. Each labelled series is found there once and
// kept here under a key made of its labels (the daemon's own method, pass and device names).
class Metrics::SeriesMemo {
 public:
  template <class Make>
  prometheus::Counter& counter(const std::string& key, Make make) {
    return find(counters_, key, make);
  }
  template <class Make>
  prometheus::Histogram& histogram(const std::string& key, Make make) {
    return find(histograms_, key, make);
  }

 private:
  template <class M, class Make>
  M& find(absl::flat_hash_map<std::string, M*>& map, const std::string& key, Make make) {
    std::lock_guard lock(mu_);
    auto it = map.find(key);
    if (it == map.end()) it = map.emplace(key, make()).first;
    return *it->second;
  }

  std::mutex mu_;
  absl::flat_hash_map<std::string, prometheus::Counter*> counters_;
  absl::flat_hash_map<std::string, prometheus::Histogram*> histograms_;
};

Metrics::Metrics(std::string_view version)
    : registry_(std::make_shared<prometheus::Registry>()),
      live_(std::make_shared<LiveCollectable>()),
      memo_(std::make_unique<SeriesMemo>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  requests_ = &BuildCounter()
                   .Name("polygradd_requests_total")
                   .Help("Requests handled, by method and gRPC status code. Execute stream commands count as "
                         "Execute.<command>.")
                   .Register(*registry_);
  request_seconds_ = &BuildHistogram()
                          .Name("polygradd_request_duration_seconds")
                          .Help("Time to handle a request, by method.")
                          .Register(*registry_);
  transport_requests_ = &BuildCounter()
                            .Name("polygradd_transport_requests_total")
                            .Help("Requests by the transport they came over (web: the gRPC-Web port, "
                                  "--web-listen), method and gRPC status code; each is also in "
                                  "polygradd_requests_total unless refused before reaching the service.")
                            .Register(*registry_);
  queue_seconds_ = &BuildHistogram()
                        .Name("polygradd_queue_duration_seconds")
                        .Help("Time heavy work (realize, steps, prewarm) waited for a worker thread, by method.")
                        .Register(*registry_);
  auto& lookups = BuildCounter()
                      .Name("polygradd_kernel_cache_lookups_total")
                      .Help("Kernel cache lookups, by where they were answered.")
                      .Register(*registry_);
  cache_memory_hit_ = &lookups.Add({{"result", "memory_hit"}});
  cache_disk_hit_ = &lookups.Add({{"result", "disk_hit"}});
  cache_miss_ = &lookups.Add({{"result", "miss"}});
  lookups_ = &lookups;
  remote_uploads_ = &BuildCounter()
                         .Name("polygradd_kernel_cache_remote_uploads_total")
                         .Help("Kernel-cache entries offered to the remote tier, by result: stored, present (the "
                               "remote had it), error, skipped (breaker open), dropped (queue full or shutdown).")
                         .Register(*registry_);
  remote_errors_ = &BuildCounter()
                        .Name("polygradd_kernel_cache_remote_errors_total")
                        .Help("Failed remote-tier operations, by kind: timeout, connect, status, protocol, full.")
                        .Register(*registry_);
  auto& schedule_lookups = BuildCounter()
                               .Name("polygradd_schedule_cache_lookups_total")
                               .Help("Realize requests looked up in the schedule cache, by result.")
                               .Register(*registry_);
  schedule_hit_ = &schedule_lookups.Add({{"result", "hit"}});
  schedule_miss_ = &schedule_lookups.Add({{"result", "miss"}});
  auto& tuning = BuildCounter()
                     .Name("polygradd_kernel_tuning_total")
                     .Help("CPU kernels with several candidate tilings, by what tuning did (--tune): hit (a choice "
                           "stored in the kernel cache was used), miss (none stored; the heuristic's tiling ran), "
                           "search (the candidates were timed here and the fastest stored).")
                     .Register(*registry_);
  tuning_hit_ = &tuning.Add({{"result", "hit"}});
  tuning_miss_ = &tuning.Add({{"result", "miss"}});
  tuning_search_ = &tuning.Add({{"result", "search"}});
  compile_seconds_ = &BuildHistogram()
                          .Name("polygradd_compile_duration_seconds")
                          .Help("Time to compile one kernel.")
                          .Register(*registry_)
                          .Add({}, compile_buckets());
  compile_failures_ = &BuildCounter()
                           .Name("polygradd_compile_failures_total")
                           .Help("Kernel compiles that failed.")
                           .Register(*registry_)
                           .Add({});
  pass_family_ = &BuildHistogram()
                      .Name("polygradd_compile_pass_duration_seconds")
                      .Help("Time of one run of a compiler pass (core/engine/pipeline.h), by pass; per-kernel "
                            "passes once per kernel.")
                      .Register(*registry_);
  kernel_family_ = &BuildHistogram()
                        .Name("polygradd_kernel_duration_seconds")
                        .Help("Time to run one kernel, by device (GPU kernels timed with events on the GPU).")
                        .Register(*registry_);
  kernel_seconds_ = &kernel_family_->Add({{"device", "CPU"}}, kernel_buckets());
  auto& transfer = BuildCounter()
                       .Name("polygradd_transfer_bytes_total")
                       .Help("Tensor bytes moved between clients and the daemon, by direction.")
                       .Register(*registry_);
  upload_bytes_ = &transfer.Add({{"direction", "upload"}});
  download_bytes_ = &transfer.Add({{"direction", "download"}});
  quota_rejections_ = &BuildCounter()
                           .Name("polygradd_quota_rejections_total")
                           .Help("Requests refused with RESOURCE_EXHAUSTED by a quota or limit, by limit.")
                           .Register(*registry_);
  auth_rejections_ = &BuildCounter()
                          .Name("polygradd_auth_rejections_total")
                          .Help("Calls refused before reaching a handler, by gRPC status code.")
                          .Register(*registry_);
  BuildGauge()
      .Name("polygradd_build_info")
      .Help("The daemon's version, as a label; always 1.")
      .Register(*registry_)
      .Add({{"version", std::string(version)}})
      .Set(1);
}

Metrics::~Metrics() { stop_serving(); }

absl::Status Metrics::serve(const std::string& listen) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(live_);
  std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  return absl::OkStatus();
}

void Metrics::stop_serving() {
  exposer_.reset();
  port_ = 0;
}

void Metrics::set_live_source(std::function<LiveCounts()> source) { live_->set_source(std::move(source)); }

void Metrics::observe_request(std::string_view method, absl::StatusCode code, double seconds) {
  const std::string code_label = code_name(code);
  memo_->counter(std::string(method) + "/" + code_label, [&] {
         return &requests_->Add({{"method", std::string(method)}, {"code", code_label}});
       }).Increment();
  memo_->histogram("request/" + std::string(method), [&] {
         return &request_seconds_->Add({{"method", std::string(method)}}, request_buckets());
       }).Observe(seconds);
}

void Metrics::observe_web_request(std::string_view method, absl::StatusCode code) {
  const std::string code_label = code_name(code);
  memo_->counter("web/" + std::string(method) + "/" + code_label, [&] {
         return &transport_requests_->Add({{"transport", "web"}, {"method", std::string(method)}, {"code", code_label}});
       }).Increment();
}

void Metrics::observe_queue(std::string_view method, double seconds) {
  memo_->histogram("queue/" + std::string(method), [&] {
         return &queue_seconds_->Add({{"method", std::string(method)}}, request_buckets());
       }).Observe(seconds);
}

void Metrics::add_upload_bytes(uint64_t n) { upload_bytes_->Increment(static_cast<double>(n)); }
void Metrics::add_download_bytes(uint64_t n) { download_bytes_->Increment(static_cast<double>(n)); }

void Metrics::add_quota_rejection(std::string_view limit) {
  quota_rejections_->Add({{"limit", std::string(limit)}}).Increment();
}

void Metrics::add_auth_rejection(absl::StatusCode code) {
  auth_rejections_->Add({{"code", code_name(code)}}).Increment();
}

void Metrics::on_cache_lookup(CacheResult result) {
  switch (result) {
    case CacheResult::MemoryHit: cache_memory_hit_->Increment(); break;
    case CacheResult::DiskHit: cache_disk_hit_->Increment(); break;
    case CacheResult::Miss: cache_miss_->Increment(); break;
    case CacheResult::RemoteHit: break;  // on_remote_lookup counts every remote result, hits too
  }
}

void Metrics::on_remote_lookup(std::string_view result) {
  lookups_->Add({{"tier", "remote"}, {"result", std::string(result)}}).Increment();
}
void Metrics::on_remote_upload(std::string_view result) {
  remote_uploads_->Add({{"result", std::string(result)}}).Increment();
}
void Metrics::on_remote_error(std::string_view kind) {
  remote_errors_->Add({{"kind", std::string(kind)}}).Increment();
}

void Metrics::on_schedule_cache_lookup(bool hit) { (hit ? schedule_hit_ : schedule_miss_)->Increment(); }

void Metrics::on_tuning(TuningResult result) {
  (result == TuningResult::Hit ? tuning_hit_ : result == TuningResult::Miss ? tuning_miss_ : tuning_search_)->Increment();
}

void Metrics::on_compile(double seconds, bool ok) {
  compile_seconds_->Observe(seconds);
  if (!ok) compile_failures_->Increment();
}

void Metrics::on_pass(std::string_view pass, double seconds) {
  // Pass names are the engine's own few: no client string reaches this label.
  memo_->histogram("pass/" + std::string(pass), [&] {
         return &pass_family_->Add({{"pass", std::string(pass)}}, pass_buckets());
       }).Observe(seconds);
}

void Metrics::on_kernel(double seconds) { kernel_seconds_->Observe(seconds); }
void Metrics::on_device_kernel(const std::string& device, double seconds) {
  memo_->histogram("kernel/" + device, [&] {
         return &kernel_family_->Add({{"device", device}}, kernel_buckets());
       }).Observe(seconds);
}

std::string Metrics::render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : live_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace polygrad::server
