// The "Blobs and shared memory" RPCs of polygrad.v1.Polygrad (declared in service.h): thin
// handlers over BlobStore, SharedMemoryRegions and the session's upload path.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "server/blob_store.h"
#include "server/service.h"
#include "server/shm.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// A new buffer of the session filled from `bytes` (exactly dtype x shape bytes), through the
// same checks as an Upload.
absl::StatusOr<v1::UploadResponse> buffer_from_bytes(Session& session, v1::DType dtype,
                                                     const google::protobuf::RepeatedField<int64_t>& shape,
                                                     std::string_view bytes, const std::string& what) {
  v1::UploadHeader header;
  header.set_dtype(dtype);
  *header.mutable_shape() = shape;
  absl::StatusOr<PendingUpload> upload = session.begin_upload(header);
  if (!upload.ok()) return upload.status();
  if (upload->buffer()->nbytes() != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds ", bytes.size(), " bytes; dtype and shape need ",
                                                   upload->buffer()->nbytes()));
  }
  if (absl::Status s = upload->append(bytes); !s.ok()) return s;
  return session.finish_upload(*std::move(upload));
}

absl::Status require(const void* component, const char* what) {
  if (component == nullptr) return absl::UnimplementedError(absl::StrCat(what, " is not enabled on this daemon"));
  return absl::OkStatus();
}

// Shared memory only makes sense on this host: the Unix socket guarantees it.
absl::Status require_local(grpc::CallbackServerContext* ctx) {
  if (!absl::StartsWith(ctx->peer(), "unix:"))
    return absl::FailedPreconditionError("shared memory is offered on the daemon's Unix socket only; use Upload/Download");
  return absl::OkStatus();
}

class UploadBlobReactor final : public grpc::ServerReadReactor<v1::BlobChunk> {
 public:
  UploadBlobReactor(const ServiceDeps& deps, v1::UploadBlobResponse* response)
      : deps_(deps), response_(response), start_(Clock::now()) {
    if (absl::Status s = require(deps_.blobs, "the blob store"); !s.ok()) {
      finish(s);
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return complete();
    if (!started_) {
      started_ = true;
      if (!valid_blob_hash(chunk_.sha256()))
        return finish(absl::InvalidArgumentError("the first blob chunk must carry sha256: 64 lowercase hex digits"));
      if (chunk_.size() > deps_.blobs->max_bytes()) {
        return finish(absl::ResourceExhaustedError(absl::StrCat("blob of ", chunk_.size(), " bytes exceeds blob_max_bytes (",
                                                                deps_.blobs->max_bytes(), ")")));
      }
      sha256_ = chunk_.sha256();
      size_ = chunk_.size();
      // The size is the client's claim: grow with the bytes that actually arrive beyond a bit.
      data_.reserve(std::min<uint64_t>(size_, uint64_t{64} << 20));
    }
    if (chunk_.data().size() > size_ - data_.size())
      return finish(absl::InvalidArgumentError(absl::StrCat("blob ", sha256_, " sent more than its ", size_, " bytes")));
    data_.append(chunk_.data());
    deps_.metrics.add_upload_bytes(chunk_.data().size());
    StartRead(&chunk_);
  }

  void OnDone() override { delete this; }

 private:
  void complete() {
    if (!started_) return finish(absl::InvalidArgumentError("blob upload ended before its first chunk (none was sent, or it did not parse)"));
    if (data_.size() != size_)
      return finish(absl::InvalidArgumentError(absl::StrCat("blob ", sha256_, " ended after ", data_.size(), " of ", size_, " bytes")));
    absl::StatusOr<bool> stored = deps_.blobs->put(sha256_, std::move(data_));
    if (stored.ok()) {
      response_->set_stored(*stored);
      response_->set_bytes(size_);
    }
    finish(stored.status());
  }

  void finish(const absl::Status& status) {
    data_ = std::string();
    deps_.record("UploadBlob", "", start_, status);
    Finish(to_grpc_status(status));
  }

  const ServiceDeps& deps_;
  v1::UploadBlobResponse* response_;
  const Clock::time_point start_;
  v1::BlobChunk chunk_;
  bool started_ = false;
  std::string sha256_;
  uint64_t size_ = 0;
  std::string data_;
};

}  // namespace

grpc::ServerUnaryReactor* PolygradService::HasBlobs(grpc::CallbackServerContext* ctx, const v1::HasBlobsRequest* request,
                                                    v1::HasBlobsResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.blobs, "the blob store");
  if (s.ok()) {
    for (const std::string& h : request->sha256()) response->add_present(deps_.blobs->contains(h));
  }
  return finish(ctx, "HasBlobs", "", start, s);
}

grpc::ServerReadReactor<v1::BlobChunk>* PolygradService::UploadBlob(grpc::CallbackServerContext*,
                                                                    v1::UploadBlobResponse* response) {
  return new UploadBlobReactor(deps_, response);
}

grpc::ServerUnaryReactor* PolygradService::BufferFromBlob(grpc::CallbackServerContext* ctx,
                                                          const v1::BufferFromBlobRequest* request,
                                                          v1::UploadResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.blobs, "the blob store");
  absl::StatusOr<std::shared_ptr<Session>> session = s.ok() ? deps_.sessions.find(request->session_id(), tenant_of(*ctx)) : s;
  absl::StatusOr<BlobPtr> blob = session.ok() ? deps_.blobs->get(request->sha256()) : session.status();
  absl::StatusOr<v1::UploadResponse> r = absl::UnknownError("not run");
  if (blob.ok()) {
    r = buffer_from_bytes(**session, request->dtype(), request->shape(), **blob, absl::StrCat("blob ", request->sha256()));
  } else {
    r = blob.status();
  }
  if (r.ok()) *response = *std::move(r);
  return finish(ctx, "BufferFromBlob", request->session_id(), start, r.status());
}

grpc::ServerUnaryReactor* PolygradService::CreateSharedMemory(grpc::CallbackServerContext* ctx,
                                                              const v1::CreateSharedMemoryRequest* request,
                                                              v1::SharedMemory* response) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.shm, "shared memory");
  if (s.ok()) s = require_local(ctx);
  absl::StatusOr<std::shared_ptr<Session>> session = s.ok() ? deps_.sessions.find(request->session_id(), tenant_of(*ctx)) : s;
  if (session.ok()) {
    auto region = deps_.shm->create(request->session_id(), request->bytes());
    if (region.ok()) {
      response->set_region(region->first);
      response->set_path(region->second->path());
      response->set_bytes(region->second->bytes());
    }
    s = region.status();
  } else {
    s = session.status();
  }
  return finish(ctx, "CreateSharedMemory", request->session_id(), start, s);
}

grpc::ServerUnaryReactor* PolygradService::CommitSharedMemory(grpc::CallbackServerContext* ctx,
                                                              const v1::CommitSharedMemoryRequest* request,
                                                              v1::UploadResponse* response) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.shm, "shared memory");
  absl::StatusOr<std::shared_ptr<Session>> session = s.ok() ? deps_.sessions.find(request->session_id(), tenant_of(*ctx)) : s;
  absl::StatusOr<RegionPtr> region = session.ok() ? deps_.shm->find(request->session_id(), request->region())
                                                  : session.status();
  absl::StatusOr<v1::UploadResponse> r = absl::UnknownError("not run");
  if (!region.ok()) {
    r = region.status();
  } else {
    // The tensor is the region's first bytes: size the view from dtype and shape, checked by
    // the upload path against the region's length.
    v1::UploadHeader header;
    header.set_dtype(request->dtype());
    *header.mutable_shape() = request->shape();
    absl::StatusOr<PendingUpload> upload = (*session)->begin_upload(header);
    if (!upload.ok()) {
      r = upload.status();
    } else if (upload->buffer()->nbytes() > (*region)->bytes()) {
      r = absl::InvalidArgumentError(absl::StrCat("shared memory region ", request->region(), " holds ", (*region)->bytes(),
                                                  " bytes; dtype and shape need ", upload->buffer()->nbytes()));
    } else if (absl::Status a = upload->append(std::string_view((*region)->data(), upload->buffer()->nbytes())); !a.ok()) {
      r = a;
    } else {
      r = (*session)->finish_upload(*std::move(upload));
    }
    if (r.ok() && request->free()) (void)deps_.shm->free(request->session_id(), request->region());
  }
  if (r.ok()) *response = *std::move(r);
  return finish(ctx, "CommitSharedMemory", request->session_id(), start, r.status());
}

grpc::ServerUnaryReactor* PolygradService::ReadSharedMemory(grpc::CallbackServerContext* ctx,
                                                            const v1::ReadSharedMemoryRequest* request,
                                                            v1::SharedMemory* response) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.shm, "shared memory");
  if (s.ok()) s = require_local(ctx);
  absl::StatusOr<std::shared_ptr<Session>> session = s.ok() ? deps_.sessions.find(request->session_id(), tenant_of(*ctx)) : s;
  absl::StatusOr<BufferPtr> buffer = session.ok() ? (*session)->buffer(request->handle()) : session.status();
  if (buffer.ok()) {
    const uint64_t n = std::max<uint64_t>((*buffer)->nbytes(), 1);  // a region is never empty
    // The client's region when it is large enough (its pages are already allocated), else a new one.
    absl::StatusOr<RegionPtr> given = request->region() != 0 ? deps_.shm->find(request->session_id(), request->region())
                                                             : absl::StatusOr<RegionPtr>(RegionPtr());
    absl::StatusOr<std::pair<uint64_t, RegionPtr>> region = absl::UnknownError("not run");
    if (!given.ok()) {
      region = given.status();
    } else if (*given && (*given)->bytes() >= n) {
      region = std::make_pair(request->region(), *std::move(given));
    } else {
      region = deps_.shm->create(request->session_id(), n);
    }
    if (region.ok()) {
      if ((*buffer)->nbytes() > 0) std::memcpy(region->second->data(), (*buffer)->data(), (*buffer)->nbytes());
      response->set_region(region->first);
      response->set_path(region->second->path());
      response->set_bytes((*buffer)->nbytes());
      response->set_dtype(to_wire((*buffer)->dtype()));
      for (int64_t d : (*buffer)->shape()) response->add_shape(d);
    }
    s = region.status();
  } else {
    s = buffer.status();
  }
  return finish(ctx, "ReadSharedMemory", request->session_id(), start, s);
}

grpc::ServerUnaryReactor* PolygradService::FreeSharedMemory(grpc::CallbackServerContext* ctx,
                                                            const v1::FreeSharedMemoryRequest* request,
                                                            v1::FreeSharedMemoryResponse*) {
  const Clock::time_point start = Clock::now();
  absl::Status s = require(deps_.shm, "shared memory");
  absl::StatusOr<std::shared_ptr<Session>> session = s.ok() ? deps_.sessions.find(request->session_id(), tenant_of(*ctx)) : s;
  s = session.ok() ? deps_.shm->free(request->session_id(), request->region()) : session.status();
  return finish(ctx, "FreeSharedMemory", request->session_id(), start, s);
}

}  // namespace polygrad::server
