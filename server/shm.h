// Shared-memory regions for clients on the same host: anonymous memory files (memfd) the daemon
// creates and maps, each owned by one session. The client reaches one through
// /proc/<daemon pid>/fd/<fd>, which only a process of the same user may open; no name a client
// chose is ever used. Regions count against a byte cap and are freed explicitly, or all at once
// when their session ends.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace polygrad::server {

class SharedRegion {
 public:
  static absl::StatusOr<std::unique_ptr<SharedRegion>> create(uint64_t bytes);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  char* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  std::string path() const;  // what the client opens

 private:
  SharedRegion(int fd, char* data, uint64_t bytes) : fd_(fd), data_(data), bytes_(bytes) {}
  int fd_;
  char* data_;
  uint64_t bytes_;
};

using RegionPtr = std::shared_ptr<SharedRegion>;

class SharedMemoryRegions {
 public:
  explicit SharedMemoryRegions(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // A new region of the session; RESOURCE_EXHAUSTED naming shm_max_bytes when it does not fit.
  absl::StatusOr<std::pair<uint64_t, RegionPtr>> create(const std::string& session_id, uint64_t bytes);
  // NOT_FOUND unless `region` belongs to the session.
  absl::StatusOr<RegionPtr> find(const std::string& session_id, uint64_t region) const;
  absl::Status free(const std::string& session_id, uint64_t region);
  void drop_session(const std::string& session_id);

  uint64_t bytes() const;
  size_t count() const;

 private:
  struct Key {
    std::string session;
    uint64_t region;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.session, k.region);
    }
    bool operator==(const Key&) const = default;
  };
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  absl::flat_hash_map<Key, RegionPtr> regions_;
  uint64_t bytes_ = 0;
  uint64_t next_id_ = 1;
};

}  // namespace polygrad::server
