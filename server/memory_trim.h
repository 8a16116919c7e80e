#pragma once
// Returns memory the C allocator holds in its free lists to the system; the daemon calls it every
// --memory-trim-interval (server/periodic.h).
//
// Why: glibc's malloc gives threads arenas of their own (up to 8 per core), and gRPC's pollers and
// executors, our workers and the engine's threads all allocate request-sized buffers in them.
// What a burst frees stays mapped, scattered over those arenas, so the daemon's RSS follows the
// peak of requests in flight and never comes down: after 3 minutes of bench/soak.py's 32 clients
// it held 219 MiB with every client gone, 30 MiB with this trim every 10 s. malloc_trim gives the
// free pages of every arena back. A no-op on a C library without malloc_trim.

namespace polygrad::server {

void trim_free_memory();

}  // namespace polygrad::server
