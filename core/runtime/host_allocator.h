// Host memory for buffers, with freed large blocks kept for reuse.
//
// Why: a fresh large allocation pays a page fault per 4 KiB page on first touch, many times
// slower than copying into touched memory, and training steps and uploads allocate the same sizes
// again and again. Freed blocks are kept (bounded, least recently freed dropped first); small
// ones go straight to malloc. The measurement: docs/OPERATIONS.md, "Memory".
#pragma once

#include <cstddef>
#include <cstdint>

namespace polygrad {

// Freed blocks of at least this many bytes are kept for reuse; smaller ones go back to malloc.
inline constexpr size_t kHostCacheMinBytes = size_t{1} << 20;

struct HostAllocatorStats {
  uint64_t cached_bytes = 0;   // freed blocks kept for reuse
  uint64_t cached_blocks = 0;
  uint64_t reuses = 0;         // allocations answered from the cache, since start
};

// 64-byte aligned memory of at least `bytes` (>= 1) bytes, NOT zeroed; null when the system has
// none even after the cache was emptied. Thread-safe.
void* host_alloc(size_t bytes);
// Returns memory from host_alloc(bytes) with the same `bytes`.
void host_free(void* data, size_t bytes);

// The most bytes of freed blocks kept (default 1 GiB); 0 disables the cache. Shrinking it drops
// blocks at once.
void set_host_cache_limit(uint64_t bytes);
// Drops every cached block (returns the memory to the system).
void host_cache_trim();
HostAllocatorStats host_allocator_stats();

}  // namespace polygrad
