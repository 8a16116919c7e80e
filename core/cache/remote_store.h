// A remote store for kernel-cache entries: the second tier behind the local directory
// (core/cache/remote_tier.h). A store moves opaque bytes by kernel key; it does not trust
// them — the tier verifies every entry it reads.
//
// Errors say what went wrong by status code, which the tier counts as an error kind
// (remote_error_kind): DEADLINE_EXCEEDED a timeout, UNAVAILABLE no connection, FAILED_PRECONDITION
// an unexpected answer status (HTTP 5xx, a Redis error reply), DATA_LOSS an answer that breaks
// the protocol, RESOURCE_EXHAUSTED an entry over the size cap or a store that says it is full.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace polygrad {

// No entry is larger than this; a store answering with more is cut off (DATA_LOSS), so a
// hostile or broken server cannot make a daemon buffer without bound.
inline constexpr uint64_t kMaxRemoteEntryBytes = uint64_t{256} << 20;

class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // The entry stored under `key` (64 hex digits), or nullopt when there is none.
  virtual absl::StatusOr<std::optional<std::string>> get(const std::string& key) = 0;
  // Whether an entry is stored under `key`, without transferring it.
  virtual absl::StatusOr<bool> contains(const std::string& key) = 0;
  virtual absl::Status put(const std::string& key, const std::string& bytes) = 0;
  // The store's address for logs: scheme, host, port and path; never credentials.
  virtual std::string describe() const = 0;
};

// Opens `url`: http://host[:port][/prefix], https://..., or redis://host[:port][/db]. Every
// operation gives up after `timeout`. INVALID_ARGUMENT for a URL it cannot use; nothing is
// contacted here (a remote that is down at start is just a remote that fails later).
absl::StatusOr<std::unique_ptr<RemoteStore>> open_remote_store(std::string_view url, std::chrono::milliseconds timeout);

// The label a failed operation is counted under: timeout, connect, status, protocol, full.
std::string_view remote_error_kind(const absl::Status& status);

// The name of an entry on a remote: the format version is part of it, so daemons of two entry
// formats sharing one remote never read or overwrite each other's entries. 64 hex digits
// (sha256), the form a content-addressed HTTP cache (bazel-remote's /ac/) accepts.
std::string remote_entry_name(const std::string& key);

}  // namespace polygrad
