#include "server/memory_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace polygrad::server {

MemoryTrimmer::MemoryTrimmer(std::chrono::milliseconds interval) {
#if defined(__GLIBC__)
  if (interval.count() <= 0) return;
  thread_ = std::jthread([this, interval](std::stop_token stop) {
    while (!stop.stop_requested()) {
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, stop, interval, [] { return false; });
      }
      if (stop.stop_requested()) break;
      trim();
    }
  });
#else
  (void)interval;
#endif
}

MemoryTrimmer::~MemoryTrimmer() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void MemoryTrimmer::trim() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace polygrad::server
