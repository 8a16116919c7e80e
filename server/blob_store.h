// Content-addressed blobs kept in the daemon's memory: bytes named only by their sha256, never
// by anything a client chose. Total size is capped; when a new blob does not fit, the least
// recently used ones go (a blob being copied stays alive through its shared_ptr).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace polygrad::server {

using BlobPtr = std::shared_ptr<const std::string>;

// Blob hashes on the wire are 64 lowercase hex digits.
bool valid_blob_hash(std::string_view sha256_hex);

class BlobStore {
 public:
  explicit BlobStore(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  bool contains(const std::string& sha256_hex) const;
  // The blob, marked recently used; NOT_FOUND naming the hash otherwise.
  absl::StatusOr<BlobPtr> get(const std::string& sha256_hex);
  // Checks `data` against the hash (INVALID_ARGUMENT when it differs) and stores it, evicting
  // the least recently used blobs to make room. RESOURCE_EXHAUSTED when it alone exceeds the
  // cap. Returns false when the blob was there already.
  absl::StatusOr<bool> put(const std::string& sha256_hex, std::string data);

  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t bytes() const;
  size_t count() const;

 private:
  struct Entry {
    BlobPtr data;
    std::list<std::string>::iterator lru;
  };
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> blobs_;
  std::list<std::string> lru_;  // front: most recently used
  uint64_t bytes_ = 0;
};

}  // namespace polygrad::server
