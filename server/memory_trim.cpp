#include "server/memory_trim.h"

#include <cstdlib>  // first: it defines __GLIBC__, which the tests below need

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

std::optional<uint64_t> heap_bytes_in_use() {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33) && !POLYGRAD_SANITIZER_ALLOCATOR
  const struct mallinfo2 info = mallinfo2();
  return static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
#else
  return std::nullopt;
#endif
}

}  // namespace polygrad::server
