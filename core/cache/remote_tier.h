// The kernel cache's remote tier: a store shared by a fleet of daemons (core/cache/remote_store.h)
// behind each daemon's local directory, used the way build caches use theirs:
//
//  - fetch: on a local miss. An entry must carry a signature under the remote's secret
//    (HMAC-SHA256 over the key, length and bytes, core/cache/cache_entry.h) and then load; anything
//    else is rejected, counted and recompiled — a shared binary cache is a way to run code on
//    every host that reads it, so nothing unsigned is ever loaded.
//  - upload: after a compile, queued and sent by a background thread, never on a request's path;
//    skipped when the remote already holds the entry, and never in read-only mode.
//  - failures open: every operation is bounded by the store's timeout, and a failure opens a
//    circuit breaker for `breaker`: meanwhile lookups are answered "skipped" at once and uploads
//    are skipped, then a single probe decides whether to close it. A remote that is down costs
//    at most one timeout per interval and never fails a realize.
//
// Every lookup, upload and error is reported to the observer (metrics) and counted in stats().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/cache/remote_store.h"
#include "core/engine/engine.h"

namespace polygrad {

struct RemoteTierOptions {
  std::chrono::milliseconds breaker{30000};  // how long the tier is skipped after a failure
  bool read_only = false;                    // fetch only; nothing is ever written
  size_t max_queued_uploads = 1024;          // more waiting than this: dropped (counted)
  // On destruction, queued uploads are still sent for up to this long (a prewarm that exits
  // right after compiling still fills the remote); what is left is dropped.
  std::chrono::milliseconds drain_on_close{10000};
};

class RemoteTier {
 public:
  // `signing_key` must not be empty: entries are signed with it and only entries it signed load.
  RemoteTier(std::unique_ptr<RemoteStore> store, std::string signing_key, RemoteTierOptions options,
             EngineObserver* observer = nullptr);
  ~RemoteTier();
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // The verified payload stored under `key` for which `usable` (the caller's loader) says true,
  // else nullopt: a miss, an error, the breaker open, or an entry rejected (signature, format,
  // or not usable).
  std::optional<std::string> fetch(const std::string& key, const std::function<bool(const std::string&)>& usable);
  // Queues `payload` for upload under `key`; returns at once.
  void upload(const std::string& key, const std::string& payload);
  // Waits until every upload queued so far has been attempted.
  void flush();

  struct Stats {
    uint64_t hits = 0, misses = 0, errors = 0, rejected = 0, skipped = 0;     // lookups
    uint64_t stored = 0, present = 0, upload_errors = 0, upload_skipped = 0, dropped = 0;  // uploads
  };
  Stats stats() const;
  bool read_only() const { return options_.read_only; }
  std::string describe() const { return store_->describe(); }

 private:
  // Whether the remote may be contacted now: always while the breaker is closed; once it has been
  // open for `breaker`, one caller at a time (the probe).
  bool admit();
  void succeeded();
  void failed(const absl::Status& status);
  void run_uploads();

  const std::unique_ptr<RemoteStore> store_;
  const std::string signing_key_;
  const RemoteTierOptions options_;
  EngineObserver* const observer_;

  std::mutex breaker_mu_;
  bool tripped_ = false;
  bool probing_ = false;
  std::chrono::steady_clock::time_point open_until_{};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<std::string, std::string>> queue_;  // key, payload
  size_t uploading_ = 0;  // taken from the queue, not yet finished
  bool closing_ = false;
  std::chrono::steady_clock::time_point drain_until_{};

  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, rejected_{0}, skipped_{0};
  std::atomic<uint64_t> stored_{0}, present_{0}, upload_errors_{0}, upload_skipped_{0}, dropped_{0};
  std::thread uploader_;  // last: starts once everything above exists
};

}  // namespace polygrad
