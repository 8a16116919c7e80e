#include "server/admin.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cache/kernel_cache.h"
#include "core/cache/sha256.h"
#include "server/prewarm.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// Streams the cache one entry per write, reading each from disk only when it is its turn, so
// exporting a large cache costs one entry of memory. Entries gone meanwhile are skipped.
class ExportReactor final : public grpc::ServerWriteReactor<v1::CacheEntry> {
 public:
  explicit ExportReactor(const ServiceDeps& deps)
      : deps_(deps), start_(Clock::now()), keys_(deps.engine.kernel_cache().disk_keys()) {
    next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return finish(absl::CancelledError("the client stopped reading the cache export"));
    next();
  }

  void OnDone() override { delete this; }

 private:
  void next() {
    KernelCache& cache = deps_.engine.kernel_cache();
    while (index_ < keys_.size()) {
      const std::string& key = keys_[index_++];
      std::optional<std::string> payload = cache.read_entry(key);
      if (!payload) continue;
      entry_.set_key(key);
      entry_.set_payload_sha256(sha256_raw(*payload));
      entry_.set_payload(*std::move(payload));
      return StartWrite(&entry_);
    }
    finish(absl::OkStatus());
  }

  void finish(const absl::Status& status) {
    deps_.record("Admin.ExportCache", "", start_, status);
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  const Clock::time_point start_;
  const std::vector<std::string> keys_;
  size_t index_ = 0;
  v1::CacheEntry entry_;
};

class ImportReactor final : public grpc::ServerReadReactor<v1::CacheEntry> {
 public:
  ImportReactor(const ServiceDeps& deps, v1::ImportCacheResponse* response)
      : deps_(deps), response_(response), start_(Clock::now()) {
    StartRead(&entry_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return finish(absl::OkStatus());
    KernelCache& cache = deps_.engine.kernel_cache();
    const uint64_t before = cache.stats().imported;
    response_->set_received(response_->received() + 1);
    if (absl::Status s = cache.import_entry(entry_.key(), entry_.payload(), entry_.payload_sha256()); !s.ok())
      return finish(s);
    if (cache.stats().imported > before) response_->set_stored(response_->stored() + 1);
    StartRead(&entry_);
  }

  void OnDone() override { delete this; }

 private:
  void finish(const absl::Status& status) {
    deps_.record("Admin.ImportCache", "", start_, status);
    if (status.ok()) {
      deps_.logger.info("cache imported", {{"received", absl::StrCat(response_->received())},
                                           {"stored", absl::StrCat(response_->stored())}});
    }
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  v1::ImportCacheResponse* response_;
  const Clock::time_point start_;
  v1::CacheEntry entry_;
};

}  // namespace

grpc::ServerUnaryReactor* AdminService::CacheStats(grpc::CallbackServerContext* ctx, const v1::CacheStatsRequest*,
                                                   v1::CacheStatsResponse* response) {
  const Clock::time_point start = Clock::now();
  KernelCache& cache = deps_.engine.kernel_cache();
  const KernelCache::Stats s = cache.rescan();
  response->set_directory(cache.dir().string());
  response->set_disk_bytes(s.disk_bytes);
  response->set_disk_entries(s.disk_entries);
  response->set_memory_entries(s.memory_entries);
  response->set_max_bytes(s.max_bytes);
  response->set_evictions(s.evictions);
  response->set_discarded(s.discarded);
  response->set_imported(s.imported);
  response->set_background_builds(s.background_pending);
  deps_.record("Admin.CacheStats", "", start, absl::OkStatus());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::CacheEntry>* AdminService::ExportCache(grpc::CallbackServerContext*,
                                                                    const v1::ExportCacheRequest*) {
  return new ExportReactor(deps_);
}

grpc::ServerReadReactor<v1::CacheEntry>* AdminService::ImportCache(grpc::CallbackServerContext*,
                                                                   v1::ImportCacheResponse* response) {
  return new ImportReactor(deps_, response);
}

grpc::ServerUnaryReactor* AdminService::Prewarm(grpc::CallbackServerContext* ctx, const v1::PrewarmManifest* request,
                                                v1::PrewarmResponse* response) {
  const Clock::time_point start = Clock::now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // Compiling is slow: it runs on the worker pool like a realize.
  deps_.submit("Prewarm", [this, ctx, request, response, reactor, start] {
    absl::StatusOr<v1::PrewarmResponse> r =
        prewarm(*request, deps_.sessions, [ctx, this] { return ctx->IsCancelled() || deps_.stopping.load(); });
    if (r.ok()) *response = *std::move(r);
    deps_.record("Admin.Prewarm", "", start, r.status());
    reactor->Finish(to_grpc_status(r.status()));
  });
  return reactor;
}

}  // namespace polygrad::server
