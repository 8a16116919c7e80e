#pragma once
// Returns memory the C allocator holds in its free lists to the system, every `interval`.
//
// Why: glibc's malloc gives threads arenas of their own (up to 8 per core), and gRPC's pollers and
// executors, our workers and the engine's threads all allocate request-sized buffers in them.
// What a burst frees stays mapped, scattered over those arenas, so the daemon's RSS follows the
// peak of requests in flight and never comes down: after 3 minutes of bench/soak.py's 32 clients
// it held 219 MiB with every client gone, 30 MiB with this trim every 10 s. malloc_trim gives the
// free pages of every arena back.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

namespace polygrad::server {

class MemoryTrimmer {
 public:
  // A zero interval, or a C library without malloc_trim, starts nothing.
  explicit MemoryTrimmer(std::chrono::milliseconds interval);
  ~MemoryTrimmer();  // stops the thread, waiting for a trim in progress

  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Trims once, now, in the calling thread.
  static void trim();

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::jthread thread_;
};

}  // namespace polygrad::server
