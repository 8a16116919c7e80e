#include "core/cache/remote_tier.h"

#include "core/cache/cache_entry.h"

namespace polygrad {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

RemoteTier::RemoteTier(std::unique_ptr<RemoteStore> store, std::string signing_key, RemoteTierOptions options,
                       EngineObserver* observer)
    : store_(std::move(store)), signing_key_(std::move(signing_key)), options_(options), observer_(observer) {
  if (!options_.read_only) uploader_ = std::thread([this] { run_uploads(); });
}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard lock(queue_mu_);
    closing_ = true;
    drain_until_ = Clock::now() + options_.drain_on_close;
  }
  queue_cv_.notify_all();
  if (uploader_.joinable()) uploader_.join();
}

bool RemoteTier::admit() {
  std::lock_guard lock(breaker_mu_);
  if (!tripped_) return true;
  if (probing_ || Clock::now() < open_until_) return false;
  probing_ = true;
  return true;
}

void RemoteTier::succeeded() {
  std::lock_guard lock(breaker_mu_);
  tripped_ = false;
  probing_ = false;
}

void RemoteTier::failed(const absl::Status& status) {
  if (observer_ != nullptr) observer_->on_remote_error(remote_error_kind(status));
  std::lock_guard lock(breaker_mu_);
  tripped_ = true;
  probing_ = false;
  open_until_ = Clock::now() + options_.breaker;
}

std::optional<std::string> RemoteTier::fetch(const std::string& key,
                                             const std::function<bool(const std::string&)>& usable) {
  const auto count = [&](std::atomic<uint64_t>& counter, std::string_view result) {
    counter.fetch_add(1);
    if (observer_ != nullptr) observer_->on_remote_lookup(result);
  };
  if (!admit()) {
    count(skipped_, "skipped");
    return std::nullopt;
  }
  absl::StatusOr<std::optional<std::string>> got = store_->get(key);
  if (!got.ok()) {
    failed(got.status());
    count(errors_, "error");
    return std::nullopt;
  }
  succeeded();
  if (!got->has_value()) {
    count(misses_, "miss");
    return std::nullopt;
  }
  std::optional<std::string> payload = decode_cache_entry(**got, raw_cache_key(key), signing_key_);
  if (!payload || !usable(*payload)) {
    count(rejected_, "rejected");
    return std::nullopt;
  }
  count(hits_, "hit");
  return payload;
}

void RemoteTier::upload(const std::string& key, const std::string& payload) {
  if (options_.read_only) return;
  {
    std::lock_guard lock(queue_mu_);
    if (!closing_ && queue_.size() < options_.max_queued_uploads) {
      queue_.emplace_back(key, payload);
      queue_cv_.notify_all();
      return;
    }
  }
  dropped_.fetch_add(1);
  if (observer_ != nullptr) observer_->on_remote_upload("dropped");
}

void RemoteTier::flush() {
  std::unique_lock lock(queue_mu_);
  queue_cv_.wait(lock, [&] { return queue_.empty() && uploading_ == 0; });
}

void RemoteTier::run_uploads() {
  const auto count = [&](std::atomic<uint64_t>& counter, std::string_view result) {
    counter.fetch_add(1);
    if (observer_ != nullptr) observer_->on_remote_upload(result);
  };
  std::unique_lock lock(queue_mu_);
  while (true) {
    queue_cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, nothing left
    if (closing_ && Clock::now() >= drain_until_) {
      for (size_t i = 0; i < queue_.size(); ++i) count(dropped_, "dropped");
      queue_.clear();
      queue_cv_.notify_all();
      return;
    }
    auto [key, payload] = std::move(queue_.front());
    queue_.pop_front();
    ++uploading_;
    lock.unlock();
    if (!admit()) {
      count(upload_skipped_, "skipped");
    } else if (absl::StatusOr<bool> has = store_->contains(key); !has.ok()) {
      failed(has.status());
      count(upload_errors_, "error");
    } else if (*has) {
      succeeded();
      count(present_, "present");  // another daemon stored it first: nothing to send
    } else if (absl::Status s = store_->put(key, encode_cache_entry(raw_cache_key(key), payload, signing_key_)); !s.ok()) {
      failed(s);
      count(upload_errors_, "error");
    } else {
      succeeded();
      count(stored_, "stored");
    }
    lock.lock();
    --uploading_;
    queue_cv_.notify_all();
  }
}

RemoteTier::Stats RemoteTier::stats() const {
  Stats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.errors = errors_.load();
  s.rejected = rejected_.load();
  s.skipped = skipped_.load();
  s.stored = stored_.load();
  s.present = present_.load();
  s.upload_errors = upload_errors_.load();
  s.upload_skipped = upload_skipped_.load();
  s.dropped = dropped_.load();
  return s;
}

}  // namespace polygrad
