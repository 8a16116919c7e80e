// The node ids of requests that failed, with why. With asynchronous dispatch a client sends its
// next request before the answer to the last one, so a request may name nodes of one that
// failed: it then fails with that request's code and message ("source 7 failed in an earlier
// request: ...") rather than as an unknown id, and releasing such an id is not an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "polygrad/v1/polygrad.pb.h"

namespace polygrad::server {

class FailedNodes {
 public:
  // At most `capacity` ids are remembered; the oldest are forgotten first.
  explicit FailedNodes(size_t capacity = size_t{1} << 16) : capacity_(capacity) {}

  // Remembers every node the failed request sent, with its status (message bounded).
  void record(const google::protobuf::RepeatedPtrField<v1::Node>& nodes, const absl::Status& why);
  // Why `id` is not defined, when it was sent in a failed request still remembered; else null.
  const absl::Status* find(uint64_t id) const;
  // The client released `id`: nothing to remember about it any more.
  void forget(uint64_t id) { by_id_.erase(id); }
  size_t size() const { return by_id_.size(); }

 private:
  size_t capacity_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const absl::Status>> by_id_;
  std::deque<uint64_t> order_;  // ids in the order recorded (some already forgotten)
};

}  // namespace polygrad::server
