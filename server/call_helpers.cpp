#include "server/call_helpers.h"

#include <algorithm>

#include "core/runtime/thread_pool.h"

namespace polygrad::server {

namespace {

// A download's chunks are at least 64 KiB (or the default chunk, if smaller): a client asking
// for 1-byte chunks would otherwise cost the daemon a message per byte.
constexpr uint64_t kMinChunkBytes = 64 << 10;

// A realize the engine can answer from its schedule cache with little work is answered on the
// calling gRPC thread: a hand-off to the worker pool (a thread wake-up each way) would cost more
// than the work. These bounds keep that thread from blocking; the launch never waits for the
// kernel threads (ThreadPool::NoWaitScope). Why these values: docs/ARCHITECTURE.md, "Rules kept
// here".
constexpr size_t kInlineRequestBytes = 16 << 10;
constexpr int64_t kInlineWorkLimit = 1 << 14;
constexpr int64_t kIdleInlineWorkLimit = 1 << 21;

}  // namespace

uint64_t chunk_size(uint64_t requested, const Limits& limits) {
  if (requested == 0) return limits.chunk_bytes;
  return std::clamp(requested, std::min(kMinChunkBytes, limits.chunk_bytes), limits.max_message_bytes);
}

uint64_t fill_chunk(v1::DownloadChunk& c, const Buffer& buf, uint64_t offset, uint64_t chunk_bytes) {
  c.Clear();
  const uint64_t n = std::min<uint64_t>(chunk_bytes, buf.nbytes() - offset);
  c.set_offset(offset);
  c.set_data(static_cast<const char*>(buf.data()) + offset, n);
  if (offset == 0) {
    c.set_dtype(to_wire(buf.dtype()));
    for (int64_t d : buf.shape()) c.add_shape(d);
  }
  c.set_last(offset + n == buf.nbytes());
  return offset + n;
}

absl::StatusOr<v1::RealizeResponse> run_realize(const ServiceDeps& deps, Session& session,
                                                const v1::RealizeRequest& request,
                                                const std::function<bool()>& should_stop) {
  Transfer transfer;
  absl::StatusOr<v1::RealizeResponse> r = session.realize(request, should_stop, transfer);
  deps.metrics.add_upload_bytes(transfer.upload);
  deps.metrics.add_download_bytes(transfer.download);
  return r;
}


std::optional<absl::StatusOr<v1::RealizeResponse>> realize_now(const ServiceDeps& deps, Session& session,
                                                                const v1::RealizeRequest& request,
                                                                const std::function<bool()>& should_stop) {
  if (request.ByteSizeLong() > kInlineRequestBytes) return std::nullopt;
  Transfer transfer;
  ThreadPool::NoWaitScope no_wait;
  std::optional<absl::StatusOr<v1::RealizeResponse>> r = session.realize_now(
      request, should_stop, transfer, deps.pool.idle() ? kIdleInlineWorkLimit : kInlineWorkLimit);
  if (r) {
    deps.metrics.add_upload_bytes(transfer.upload);
    deps.metrics.add_download_bytes(transfer.download);
  }
  return r;
}

}  // namespace polygrad::server
