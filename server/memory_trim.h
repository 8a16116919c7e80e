#pragma once
// What the C library's allocator holds: the daemon gives its free pages back every
// --memory-trim-interval (server/periodic.h), and /metrics reports the bytes it has handed out.
//
// Why the trim: what a burst of requests frees stays mapped, scattered over glibc's per-thread
// arenas, so without it the daemon's RSS follows the peak of requests in flight and never comes
// down; malloc_trim gives back the free pages inside every arena and at the main arena's top (not
// at a thread arena's top: keep_freed_memory_mapped bounds what each keeps there). The soak measurement:
// docs/OPERATIONS.md, "Memory".

#include <cstdint>
#include <optional>

namespace polygrad::server {

// Gives the free pages of every arena back to the system. A no-op on a C library without
// malloc_trim.
void trim_free_memory();

// From now on, blocks under kHostCacheMinBytes (1 MiB) come from the arenas instead of being mapped on their own, and
// an arena keeps up to 16 MiB free at its top instead of handing it back. Why: by default glibc
// maps each block over its (adaptive) threshold on its own and unmaps it on free, and hands a
// thread arena's free top back with madvise as soon as it passes the trim threshold, so a step
// that frees and allocates the same buffers every time paid for fresh pages and TLB shootdowns
// every time. Measured (docs/OPERATIONS.md, "Memory"): bench.py's eager MLP step 5.5-7.3 ms
// before, 2.8-3.1 after. A no-op without glibc.
void keep_freed_memory_mapped();

// Bytes the allocator has handed out and not had back, over every arena and the blocks it mapped
// on their own (glibc's mallinfo2); nullopt on a C library without it, and in a sanitizer's build
// (whose allocator stands in for glibc's). Unlike RSS it does not count what was freed and is
// still mapped, so it follows what the daemon holds, not the peak of what it once held. Takes each
// arena's lock in turn: for a scrape, not a hot path.
std::optional<uint64_t> heap_bytes_in_use();

}  // namespace polygrad::server
