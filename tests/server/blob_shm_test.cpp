// BlobStore and SharedMemoryRegions on their own: hashes checked, the byte caps kept, least
// recently used blobs dropped first, regions owned by one session and freed with it.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/cache/sha256.h"
#include "server/blob_store.h"
#include "server/shm.h"

namespace polygrad::server {
namespace {

TEST(BlobStore, StoresVerifiedBlobsAndEvictsLeastRecentlyUsed) {
  BlobStore store(30);
  const std::string a(10, 'a'), b(10, 'b'), c(10, 'c'), d(10, 'd');
  ASSERT_TRUE(*store.put(sha256_hex(a), a));
  EXPECT_FALSE(*store.put(sha256_hex(a), a));  // present already
  ASSERT_TRUE(store.put(sha256_hex(b), b).ok());
  ASSERT_TRUE(store.put(sha256_hex(c), c).ok());
  ASSERT_TRUE(store.get(sha256_hex(a)).ok());  // a is now more recent than b
  ASSERT_TRUE(store.put(sha256_hex(d), d).ok());
  EXPECT_TRUE(store.contains(sha256_hex(a)));
  EXPECT_FALSE(store.contains(sha256_hex(b)));
  EXPECT_EQ(store.bytes(), 30u);
  EXPECT_EQ(**store.get(sha256_hex(d)), d);
  EXPECT_EQ(store.get(sha256_hex(b)).status().code(), absl::StatusCode::kNotFound);
}

TEST(BlobStore, RefusesWrongHashesAndBlobsOverTheCap) {
  BlobStore store(8);
  EXPECT_EQ(store.put(sha256_hex("x"), "y").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.put("../../etc/passwd", "y").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.put(std::string(64, 'A'), "y").status().code(), absl::StatusCode::kInvalidArgument);
  const std::string big(9, 'z');
  absl::StatusOr<bool> r = store.put(sha256_hex(big), big);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("blob_max_bytes"), std::string::npos);
  EXPECT_EQ(store.count(), 0u);
}

TEST(SharedMemoryRegions, ARegionIsSharedThroughItsPathAndOwnedByItsSession) {
  SharedMemoryRegions regions(1 << 20);
  auto r = regions.create("s1", 4096);
  ASSERT_TRUE(r.ok()) << r.status();
  // What a client does: open the path and write through its own mapping.
  int fd = open(r->second->path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << r->second->path();
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memcpy(p, "hello", 5);
  munmap(p, 4096);
  close(fd);
  EXPECT_EQ(std::string(r->second->data(), 5), "hello");

  EXPECT_EQ(regions.find("s2", r->first).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(regions.find("s1", r->first).ok());
  EXPECT_EQ(regions.bytes(), 4096u);
  regions.drop_session("s1");
  EXPECT_EQ(regions.count(), 0u);
  EXPECT_EQ(regions.bytes(), 0u);
  EXPECT_EQ(regions.find("s1", r->first).status().code(), absl::StatusCode::kNotFound);
}

TEST(SharedMemoryRegions, TheCapCountsEveryLiveRegion) {
  SharedMemoryRegions regions(8192);
  auto a = regions.create("s", 8192);
  ASSERT_TRUE(a.ok());
  auto b = regions.create("t", 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("shm_max_bytes"), std::string::npos);
  ASSERT_TRUE(regions.free("s", a->first).ok());
  EXPECT_EQ(regions.free("s", a->first).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(regions.create("t", 8192).ok());
  EXPECT_EQ(regions.create("t", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace polygrad::server
