#include "core/runtime/host_allocator.h"

#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <utility>

namespace polygrad {
namespace {

constexpr size_t kAlign = 64;
// Below kHostCacheMinBytes, malloc's arenas hand back touched memory (server/memory_trim.h sets
// them to).
constexpr size_t kCacheMinBytes = kHostCacheMinBytes;
// Cached sizes are rounded to this, so sizes that differ by a little share blocks.
constexpr size_t kGranule = size_t{64} << 10;

size_t rounded(size_t bytes) {
  const size_t unit = bytes >= kCacheMinBytes ? kGranule : kAlign;
  return (std::max<size_t>(bytes, 1) + unit - 1) / unit * unit;
}

class BlockCache {
 public:
  void* take(size_t size) {
    std::lock_guard lock(mu_);
    auto it = by_size_.find(size);
    if (it == by_size_.end()) return nullptr;
    auto block = it->second;
    by_size_.erase(it);
    void* data = block->first;
    lru_.erase(block);
    bytes_ -= size;
    ++reuses_;
    return data;
  }

  // False when the block is not kept (the caller frees it).
  bool put(void* data, size_t size) {
    std::lock_guard lock(mu_);
    if (size > limit_) return false;
    lru_.emplace_back(data, size);
    by_size_.emplace(size, std::prev(lru_.end()));
    bytes_ += size;
    evict_locked(limit_);
    return true;
  }

  void set_limit(uint64_t bytes) {
    std::lock_guard lock(mu_);
    limit_ = bytes;
    evict_locked(limit_);
  }

  void trim() {
    std::lock_guard lock(mu_);
    evict_locked(0);
  }

  HostAllocatorStats stats() {
    std::lock_guard lock(mu_);
    return {bytes_, lru_.size(), reuses_};
  }

 private:
  using Lru = std::list<std::pair<void*, size_t>>;  // least recently freed first

  void evict_locked(uint64_t keep) {
    while (bytes_ > keep && !lru_.empty()) {
      auto [data, size] = lru_.front();
      for (auto [it, end] = by_size_.equal_range(size); it != end; ++it) {
        if (it->second == lru_.begin()) {
          by_size_.erase(it);
          break;
        }
      }
      lru_.pop_front();
      bytes_ -= size;
      std::free(data);
    }
  }

  std::mutex mu_;
  Lru lru_;
  std::multimap<size_t, Lru::iterator> by_size_;
  uint64_t bytes_ = 0;
  uint64_t limit_ = uint64_t{1} << 30;
  uint64_t reuses_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: buffers may outlive static teardown
  return *c;
}

}  // namespace

void* host_alloc(size_t bytes) {
  const size_t size = rounded(bytes);
  if (size >= kCacheMinBytes) {
    if (void* data = cache().take(size)) return data;
  }
  void* data = std::aligned_alloc(kAlign, size);
  if (data == nullptr) {
    // Memory kept for reuse is still memory: give it back and try once more.
    cache().trim();
    data = std::aligned_alloc(kAlign, size);
  }
  return data;
}

void host_free(void* data, size_t bytes) {
  if (data == nullptr) return;
  const size_t size = rounded(bytes);
  if (size >= kCacheMinBytes && cache().put(data, size)) return;
  std::free(data);
}

void set_host_cache_limit(uint64_t bytes) { cache().set_limit(bytes); }
void host_cache_trim() { cache().trim(); }
HostAllocatorStats host_allocator_stats() { return cache().stats(); }

}  // namespace polygrad
