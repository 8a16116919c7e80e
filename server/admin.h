// polygrad.v1.PolygradAdmin: the kernel cache for operators (stats, export and import of
// bundles, prewarm). Authorization (the admin token) is checked for every method of this
// service by its method prefix, outside these handlers.
#pragma once

#include "polygrad/v1/admin.grpc.pb.h"
#include "server/service.h"

namespace polygrad::server {

class AdminService final : public v1::PolygradAdmin::CallbackService {
 public:
  explicit AdminService(ServiceDeps deps) : deps_(std::move(deps)) {}

  grpc::ServerUnaryReactor* CacheStats(grpc::CallbackServerContext* ctx, const v1::CacheStatsRequest* request,
                                       v1::CacheStatsResponse* response) override;
  grpc::ServerWriteReactor<v1::CacheEntry>* ExportCache(grpc::CallbackServerContext* ctx,
                                                        const v1::ExportCacheRequest* request) override;
  grpc::ServerReadReactor<v1::CacheEntry>* ImportCache(grpc::CallbackServerContext* ctx,
                                                       v1::ImportCacheResponse* response) override;
  grpc::ServerUnaryReactor* Prewarm(grpc::CallbackServerContext* ctx, const v1::PrewarmManifest* request,
                                    v1::PrewarmResponse* response) override;

 private:
  ServiceDeps deps_;
};

}  // namespace polygrad::server
