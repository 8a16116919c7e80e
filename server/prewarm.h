// Prewarm: compile the kernels of a manifest's graphs into the kernel cache before clients need
// them, so a fresh daemon (or a fresh cache directory) does not make its first users wait.
#pragma once

#include <filesystem>
#include <functional>

#include "absl/status/statusor.h"
#include "polygrad/v1/admin.pb.h"
#include "server/session.h"

namespace polygrad::server {

// Reads a manifest: binary protobuf when the name ends in .pb or .binpb, text format otherwise.
// INVALID_ARGUMENT naming the file and the parse error; NOT_FOUND when it cannot be read.
absl::StatusOr<v1::PrewarmManifest> load_manifest(const std::filesystem::path& file);

// Realizes each graph once in a private session (BUFFER nodes without a source get zeros), so
// every kernel it needs is compiled into the cache by the optimized compiler, never the quick
// tier (--quick-compile), so its kernels are final; the sessions are closed afterwards. Stops
// at the first graph that fails, naming it. `should_stop` is polled between kernels. With the
// manifest's `tune`, kernels with no stored tiling choice are searched (core/engine/tuning.h).
absl::StatusOr<v1::PrewarmResponse> prewarm(const v1::PrewarmManifest& manifest, SessionManager& sessions,
                                            const std::function<bool()>& should_stop);

}  // namespace polygrad::server
