// The caching device allocator's bookkeeping, over host memory with a capacity (the allocator
// is device-independent; on a GPU its backend is cuMemAlloc/cuMemFree).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "absl/status/status.h"
#include "core/runtime/cuda/allocator.h"

namespace polygrad {
namespace {

// Real host allocations under a byte limit, counting backend calls.
struct LimitedHost {
  uint64_t capacity;
  uint64_t used = 0;
  int allocations = 0;
  int releases = 0;
  std::map<uint64_t, size_t> live;

  CachingAllocator::Backend backend() {
    return {[this](size_t bytes) -> absl::StatusOr<uint64_t> {
              if (used + bytes > capacity) return absl::ResourceExhaustedError("CUDA_ERROR_OUT_OF_MEMORY");
              void* p = std::malloc(bytes);
              if (p == nullptr) return absl::ResourceExhaustedError("malloc failed");
              ++allocations;
              used += bytes;
              live[reinterpret_cast<uint64_t>(p)] = bytes;
              return reinterpret_cast<uint64_t>(p);
            },
            [this](uint64_t address) {
              ++releases;
              used -= live.at(address);
              live.erase(address);
              std::free(reinterpret_cast<void*>(address));
            }};
  }
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(5000), 8192u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::size_class(5 << 20), size_t{6} << 20);
  for (size_t b : {1, 100, 4097, 1 << 19, (1 << 22) + 3}) EXPECT_GE(CachingAllocator::size_class(b), b);
}

TEST(CachingAllocator, FreedBlocksAreReusedAndCounted) {
  LimitedHost host{.capacity = 1 << 24};
  {
    CachingAllocator a("cuda:0", host.backend());
    auto x = a.allocate(1000);
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_EQ(a.bytes_in_use(), 1024u);
    EXPECT_EQ(a.bytes_cached(), 0u);
    a.release(*x, 1000);
    EXPECT_EQ(a.bytes_in_use(), 0u);
    EXPECT_EQ(a.bytes_cached(), 1024u);
    auto y = a.allocate(900);  // same class: the cached block, no backend call
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(*y, *x);
    EXPECT_EQ(host.allocations, 1);
    auto z = a.allocate(3000);  // another class: a new block
    ASSERT_TRUE(z.ok());
    EXPECT_NE(*z, *x);
    EXPECT_EQ(host.allocations, 2);
    EXPECT_EQ(a.bytes_in_use(), 1024u + 4096u);
    a.release(*y, 900);
    a.release(*z, 3000);
    EXPECT_EQ(a.empty_cache(), 1024u + 4096u);
    EXPECT_EQ(host.releases, 2);
    EXPECT_EQ(a.bytes_cached(), 0u);
  }
  EXPECT_TRUE(host.live.empty());
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  LimitedHost host{.capacity = 6 << 20};
  CachingAllocator a("cuda:0", host.backend());
  auto small = a.allocate(3 << 20);  // class 4 MiB
  ASSERT_TRUE(small.ok());
  a.release(*small, 3 << 20);        // cached: 4 MiB of the 6 are held by the cache
  auto big = a.allocate(5 << 20);    // class 6 MiB: fits only once the cache is released
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(host.releases, 1);
  EXPECT_EQ(a.bytes_cached(), 0u);
  EXPECT_EQ(a.bytes_in_use(), size_t{6} << 20);
  // Nothing left to release: the request fails, naming the device and the size, and nothing leaks.
  auto more = a.allocate(12345);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(more.status().message().find("cuda:0: out of device memory allocating 12345 bytes"), std::string::npos)
      << more.status();
  EXPECT_EQ(a.bytes_in_use(), size_t{6} << 20);
  a.release(*big, 5 << 20);
  // The failure was that request's only: the next one that fits succeeds.
  auto after = a.allocate(12345);
  EXPECT_TRUE(after.ok()) << after.status();
  a.release(*after, 12345);
}

TEST(CachingAllocator, OtherBackendErrorsPassThroughWithoutRetry) {
  int calls = 0;
  CachingAllocator a("cuda:0", {[&](size_t) -> absl::StatusOr<uint64_t> {
                                  ++calls;
                                  return absl::InternalError("cuMemAlloc failed: CUDA_ERROR_ILLEGAL_ADDRESS");
                                },
                                [](uint64_t) {}});
  auto r = a.allocate(10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace polygrad
