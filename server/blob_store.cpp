#include "server/blob_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/cache/sha256.h"

namespace polygrad::server {

bool valid_blob_hash(std::string_view h) {
  return h.size() == 64 &&
         std::all_of(h.begin(), h.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool BlobStore::contains(const std::string& sha256_hex) const {
  std::lock_guard lock(mu_);
  return blobs_.contains(sha256_hex);
}

absl::StatusOr<BlobPtr> BlobStore::get(const std::string& sha256_hex) {
  std::lock_guard lock(mu_);
  auto it = blobs_.find(sha256_hex);
  if (it == blobs_.end()) return absl::NotFoundError(absl::StrCat("no blob ", sha256_hex, " on this daemon: UploadBlob it first"));
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.data;
}

absl::StatusOr<bool> BlobStore::put(const std::string& sha256_hex, std::string data) {
  if (!valid_blob_hash(sha256_hex)) return absl::InvalidArgumentError("blob hash is not 64 lowercase hex digits");
  if (polygrad::sha256_hex(data) != sha256_hex)
    return absl::InvalidArgumentError(absl::StrCat("blob data does not match its hash ", sha256_hex));
  if (data.size() > max_bytes_)
    return absl::ResourceExhaustedError(absl::StrCat("blob of ", data.size(), " bytes exceeds blob_max_bytes (", max_bytes_, ")"));
  std::lock_guard lock(mu_);
  if (auto it = blobs_.find(sha256_hex); it != blobs_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return false;
  }
  while (bytes_ + data.size() > max_bytes_ && !lru_.empty()) {
    auto victim = blobs_.find(lru_.back());
    bytes_ -= victim->second.data->size();
    blobs_.erase(victim);
    lru_.pop_back();
  }
  bytes_ += data.size();
  lru_.push_front(sha256_hex);
  blobs_.emplace(sha256_hex, Entry{std::make_shared<const std::string>(std::move(data)), lru_.begin()});
  return true;
}

uint64_t BlobStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t BlobStore::count() const {
  std::lock_guard lock(mu_);
  return blobs_.size();
}

}  // namespace polygrad::server
