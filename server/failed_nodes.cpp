#include "server/failed_nodes.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace polygrad::server {
namespace {

// A request's error may quote a failed request's error in turn: keep what is repeated short.
constexpr size_t kMaxMessage = 400;

}  // namespace

void FailedNodes::record(const google::protobuf::RepeatedPtrField<v1::Node>& nodes, const absl::Status& why) {
  if (nodes.empty() || why.ok() || capacity_ == 0) return;
  std::string message(why.message().substr(0, kMaxMessage));
  if (why.message().size() > kMaxMessage) absl::StrAppend(&message, "...");
  auto status = std::make_shared<const absl::Status>(why.code(), message);
  for (const v1::Node& n : nodes) {
    by_id_[n.id()] = status;
    order_.push_back(n.id());
  }
  // Bounded by order_, which holds every id remembered (an id recorded twice goes with its older
  // entry: this record is for better messages, not for correctness).
  while (order_.size() > capacity_) {
    by_id_.erase(order_.front());
    order_.pop_front();
  }
}

const absl::Status* FailedNodes::find(uint64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.get();
}

}  // namespace polygrad::server
