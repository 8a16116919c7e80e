// A caching allocator for one device's memory. Device allocation and release are slow and
// synchronize the device, so freed blocks are kept on free lists by size class and handed out
// again; when the device runs out of memory every cached block is released and the allocation is
// retried once before the request fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace polygrad {

class CachingAllocator {
 public:
  // The memory underneath: `allocate` returns an address, or RESOURCE_EXHAUSTED when the device
  // is out of memory (any other error is passed through unchanged); `release` frees one.
  struct Backend {
    std::function<absl::StatusOr<uint64_t>(size_t bytes)> allocate;
    std::function<void(uint64_t address)> release;
  };

  // `device` names the device in errors ("cuda:0").
  CachingAllocator(std::string device, Backend backend);
  // Releases every cached block; blocks still in use must have been returned already.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The bytes a request of `bytes` occupies: 512-byte granules up to 1 MiB rounded up to a power
  // of two (so a free list serves any request of its class), 2 MiB multiples above.
  static size_t size_class(size_t bytes);

  // A block of at least `bytes` (its class). RESOURCE_EXHAUSTED naming the device and the bytes
  // when even the retry after releasing the cache fails.
  absl::StatusOr<uint64_t> allocate(size_t bytes);
  // Returns a block from allocate(`bytes`) to its free list.
  void release(uint64_t address, size_t bytes);
  // Frees every cached block; returns the bytes freed.
  uint64_t empty_cache();

  uint64_t bytes_in_use() const;  // by size class, of blocks handed out and not returned
  uint64_t bytes_cached() const;  // on free lists

 private:
  const std::string device_;
  const Backend backend_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<uint64_t>> free_;  // size class -> cached blocks
  uint64_t in_use_ = 0;
  uint64_t cached_ = 0;
};

}  // namespace polygrad
