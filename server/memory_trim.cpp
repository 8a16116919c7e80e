#include "server/memory_trim.h"

#include <cstdlib>  // first: it defines __GLIBC__, which the tests below need

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/runtime/host_allocator.h"

// A sanitizer's allocator stands in for glibc's malloc; glibc's counts would describe almost nothing.
#if defined(POLYGRAD_ASAN_BUILD) || defined(POLYGRAD_TSAN_BUILD)
#define POLYGRAD_SANITIZER_ALLOCATOR 1
#else
#define POLYGRAD_SANITIZER_ALLOCATOR 0
#endif

namespace polygrad::server {

void trim_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void keep_freed_memory_mapped() {
#if defined(__GLIBC__)
  // Setting either also turns glibc's adaptive thresholds off, so both are set. Buffers of 1 MiB
  // and more are kept by the host allocator's own cache (core/runtime/host_allocator.cpp), which
  // frees what it evicts: mapped on their own, they go back at once. malloc_trim does not trim a
  // thread arena's top, so the trim threshold is what bounds what each arena keeps.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHostCacheMinBytes));
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
#endif
}

std::optional<uint64_t> heap_bytes_in_use() {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33) && !POLYGRAD_SANITIZER_ALLOCATOR
  const struct mallinfo2 info = mallinfo2();
  return static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
#else
  return std::nullopt;
#endif
}

}  // namespace polygrad::server
