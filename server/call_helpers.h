// What the Polygrad handlers and the Execute stream share: a realize run on a worker or answered
// at once on the gRPC thread, and download chunking.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/service.h"
#include "server/session.h"

namespace polygrad::server {

// The chunk size a download uses: `requested` (0: the default) clamped to the limits.
uint64_t chunk_size(uint64_t requested, const Limits& limits);

// Fills `c` with the bytes of `buf` from `offset`; the first chunk carries dtype and shape.
// Returns the offset after this chunk.
uint64_t fill_chunk(v1::DownloadChunk& c, const Buffer& buf, uint64_t offset, uint64_t chunk_bytes);

// Session::realize, with the bytes it moved counted in the metrics.
absl::StatusOr<v1::RealizeResponse> run_realize(const ServiceDeps& deps, Session& session,
                                                const v1::RealizeRequest& request,
                                                const std::function<bool()>& should_stop);

// The response when the realize can be answered at once on the calling thread (a small request
// whose program the schedule cache holds, of little work), else nullopt: it had no effect, and
// belongs on the worker pool (run_realize).
std::optional<absl::StatusOr<v1::RealizeResponse>> realize_now(const ServiceDeps& deps, Session& session,
                                                                const v1::RealizeRequest& request,
                                                                const std::function<bool()>& should_stop);

}  // namespace polygrad::server
