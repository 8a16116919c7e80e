// The host block cache: freed large blocks come back for the same size, the byte cap holds
// (least recently freed dropped first), and buffers are zero-filled even when their memory is reused.
#include "core/runtime/host_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/runtime/buffer.h"

namespace polygrad {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class HostAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_cache_trim();
    set_host_cache_limit(64 * kMiB);
  }
  void TearDown() override {
    set_host_cache_limit(uint64_t{1} << 30);
    host_cache_trim();
  }
};

TEST_F(HostAllocatorTest, AFreedLargeBlockIsReusedForTheSameSize) {
  void* a = host_alloc(3 * kMiB + 5);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  host_free(a, 3 * kMiB + 5);
  EXPECT_EQ(host_allocator_stats().cached_blocks, 1u);
  const uint64_t reuses = host_allocator_stats().reuses;
  void* b = host_alloc(3 * kMiB + 7);  // rounds to the same size class
  EXPECT_EQ(b, a);
  EXPECT_EQ(host_allocator_stats().reuses, reuses + 1);
  EXPECT_EQ(host_allocator_stats().cached_bytes, 0u);
  void* c = host_alloc(5 * kMiB);  // nothing cached of that size
  EXPECT_NE(c, a);
  host_free(b, 3 * kMiB + 7);
  host_free(c, 5 * kMiB);
}

TEST_F(HostAllocatorTest, SmallBlocksAreNotCached) {
  void* a = host_alloc(1000);
  host_free(a, 1000);
  EXPECT_EQ(host_allocator_stats().cached_blocks, 0u);
}

TEST_F(HostAllocatorTest, TheCapDropsTheLeastRecentlyFreedFirst) {
  std::vector<void*> blocks;
  for (size_t i = 0; i < 5; ++i) blocks.push_back(host_alloc((16 + i) * kMiB));
  for (size_t i = 0; i < 5; ++i) host_free(blocks[i], (16 + i) * kMiB);
  // 16+17+18+19+20 MiB freed under a 64 MiB cap: only the last three (57 MiB) fit.
  HostAllocatorStats s = host_allocator_stats();
  EXPECT_LE(s.cached_bytes, 64 * kMiB);
  EXPECT_EQ(s.cached_blocks, 3u);
  EXPECT_EQ(s.cached_bytes, (18 + 19 + 20) * kMiB);
  void* newest = host_alloc(20 * kMiB);
  EXPECT_EQ(newest, blocks[4]);
  host_free(newest, 20 * kMiB);
  set_host_cache_limit(0);
  EXPECT_EQ(host_allocator_stats().cached_bytes, 0u);
  void* d = host_alloc(2 * kMiB);
  host_free(d, 2 * kMiB);
  EXPECT_EQ(host_allocator_stats().cached_blocks, 0u) << "a zero cap keeps nothing";
}

TEST_F(HostAllocatorTest, ReusedMemoryIsZeroedForBuffersThatAskForIt) {
  const Shape shape{1 << 20};  // 4 MiB of float32
  {
    BufferPtr dirty = Buffer::allocate_host(DType::Float32, shape, Buffer::Fill::None);
    ASSERT_TRUE(dirty);
    std::memset(dirty->data(), 0xAB, dirty->nbytes());
  }
  ASSERT_EQ(host_allocator_stats().cached_blocks, 1u);
  BufferPtr clean = Buffer::allocate_host(DType::Float32, shape);
  ASSERT_TRUE(clean);
  EXPECT_EQ(host_allocator_stats().cached_blocks, 0u) << "the freed block was reused";
  const auto* p = static_cast<const unsigned char*>(clean->data());
  for (size_t i = 0; i < clean->nbytes(); ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
}

}  // namespace
}  // namespace polygrad
