// The polygrad.v1.Polygrad service on gRPC's callback API. Handlers stay thin: decode the call,
// hand it to a Session (or the WorkerPool for realizes), map the status in one place. All RPCs
// are registered here. Their handlers: service.cpp (sessions, Realize, Release, GetInfo, and the
// Upload and Download reactors), transfer_rpcs.cpp (blobs, shared memory), execute_stream.cpp
// (the Execute stream's reactor) and step_service.cpp (compiled steps).
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/engine/engine.h"
#include "polygrad/v1/polygrad.grpc.pb.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/quota.h"
#include "server/session.h"
#include "server/worker_pool.h"

namespace polygrad::server {

class BlobStore;
class SharedMemoryRegions;

// What every handler needs; owned by the Server, which outlives the service.
struct ServiceDeps {
  Engine& engine;
  SessionManager& sessions;
  Metrics& metrics;
  const Logger& logger;
  WorkerPool& pool;
  const Limits& limits;
  std::string version;
  std::atomic<bool>& stopping;  // set when a graceful shutdown begins
  BlobStore* blobs = nullptr;           // null: the blob RPCs answer UNIMPLEMENTED
  SharedMemoryRegions* shm = nullptr;   // null: the shared-memory RPCs answer UNIMPLEMENTED
  Quotas* quotas = nullptr;     // null: no request admission (tests of the service alone)

  // Metrics and logs for one finished call: every error is logged with method, session and
  // the call's request id (server/request_id.h).
  void record(std::string_view method, std::string_view session_id, Clock::time_point start,
              const absl::Status& status, std::string_view request_id = {}) const;

  // Admits one more request under --max-requests-in-flight; the ticket ends it.
  absl::StatusOr<std::shared_ptr<Quotas::Ticket>> admit() const;

  // Runs `task` on the worker pool, recording how long it queued under `method`.
  void submit(std::string_view method, std::function<void()> task) const;
};

class PolygradService final : public v1::Polygrad::CallbackService {
 public:
  explicit PolygradService(ServiceDeps deps) : deps_(std::move(deps)) {}

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx, const v1::CreateSessionRequest* request,
                                          v1::CreateSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx, const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* Realize(grpc::CallbackServerContext* ctx, const v1::RealizeRequest* request,
                                    v1::RealizeResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx, const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerReadReactor<v1::UploadChunk>* Upload(grpc::CallbackServerContext* ctx,
                                                   v1::UploadResponse* response) override;
  grpc::ServerWriteReactor<v1::DownloadChunk>* Download(grpc::CallbackServerContext* ctx,
                                                        const v1::DownloadRequest* request) override;
  // ---- Blobs and shared memory (server/transfer_rpcs.cpp)
  grpc::ServerUnaryReactor* HasBlobs(grpc::CallbackServerContext* ctx, const v1::HasBlobsRequest* request,
                                     v1::HasBlobsResponse* response) override;
  grpc::ServerReadReactor<v1::BlobChunk>* UploadBlob(grpc::CallbackServerContext* ctx,
                                                     v1::UploadBlobResponse* response) override;
  grpc::ServerUnaryReactor* BufferFromBlob(grpc::CallbackServerContext* ctx, const v1::BufferFromBlobRequest* request,
                                           v1::UploadResponse* response) override;
  grpc::ServerUnaryReactor* CreateSharedMemory(grpc::CallbackServerContext* ctx,
                                               const v1::CreateSharedMemoryRequest* request,
                                               v1::SharedMemory* response) override;
  grpc::ServerUnaryReactor* CommitSharedMemory(grpc::CallbackServerContext* ctx,
                                               const v1::CommitSharedMemoryRequest* request,
                                               v1::UploadResponse* response) override;
  grpc::ServerUnaryReactor* ReadSharedMemory(grpc::CallbackServerContext* ctx, const v1::ReadSharedMemoryRequest* request,
                                             v1::SharedMemory* response) override;
  grpc::ServerUnaryReactor* FreeSharedMemory(grpc::CallbackServerContext* ctx, const v1::FreeSharedMemoryRequest* request,
                                             v1::FreeSharedMemoryResponse* response) override;

  grpc::ServerUnaryReactor* OpenUpload(grpc::CallbackServerContext* ctx, const v1::UploadHeader* request,
                                       v1::OpenUploadResponse* response) override;
  grpc::ServerUnaryReactor* UploadPart(grpc::CallbackServerContext* ctx, const v1::UploadPartRequest* request,
                                       v1::UploadResponse* response) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx, const v1::GetInfoRequest* request,
                                    v1::ServerInfo* response) override;
  grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* Execute(grpc::CallbackServerContext* ctx) override;

  // ---- Compiled steps (server/step_service.cpp)
  grpc::ServerUnaryReactor* CompileStep(grpc::CallbackServerContext* ctx, const v1::CompileStepRequest* request,
                                        v1::CompileStepResponse* response) override;
  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* ctx, const v1::RunStepRequest* request,
                                    v1::RunStepResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseStep(grpc::CallbackServerContext* ctx, const v1::ReleaseStepRequest* request,
                                        v1::ReleaseStepResponse* response) override;

 private:
  grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* ctx, std::string_view method,
                                   std::string_view session_id, Clock::time_point start, const absl::Status& status);
  ServiceDeps deps_;
};

}  // namespace polygrad::server
