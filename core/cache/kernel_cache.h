// The kernel cache: compiled kernels by content key, in memory and on disk.
//
// Key: sha256 over the device kind, the compiler identity (version, flags, host CPU) and the
// rendered source — content only, so the same computation finds its kernel from any session,
// process or daemon. Disk entries live at <dir>/v<format>/<2 hex>/<key>.pgk, each a header
// (magic, format version, key, payload length, payload sha256) and the compiled bytes. Writes go
// to a unique temporary file in the same directory and are renamed into place, so concurrent
// daemons on one directory never see a half-written entry; every load is verified, and a corrupt
// or truncated entry is deleted and rebuilt. Concurrent requests for one key compile it once.
#pragma once

#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/runtime/program.h"

namespace polygrad {

class KernelCache {
 public:
  using Compile = std::function<absl::StatusOr<std::string>()>;
  using Load = std::function<absl::StatusOr<ProgramPtr>(const std::string& bytes)>;

  // `dir` empty: memory only.
  explicit KernelCache(std::filesystem::path dir);

  static std::string key(std::string_view device, std::string_view compiler_identity, std::string_view source);

  struct Found {
    ProgramPtr program;
    CacheResult result;
  };
  absl::StatusOr<Found> get_or_build(const std::string& key, const Compile& compile, const Load& load);

  std::filesystem::path entry_path(const std::string& key) const;
  size_t memory_entries() const;

 private:
  absl::StatusOr<Found> lookup_or_build(const std::string& key, const Compile& compile, const Load& load);
  std::optional<std::string> read_disk(const std::string& key) const;
  void write_disk(const std::string& key, const std::string& bytes) const;

  std::filesystem::path dir_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, ProgramPtr> memory_;
  std::unordered_map<std::string, std::shared_future<absl::StatusOr<Found>>> in_flight_;
};

}  // namespace polygrad
