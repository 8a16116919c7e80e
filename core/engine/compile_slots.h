// How many compiler processes run at once, across every session's realizes and the background
// builds of the quick tier.
//
// Ours rather than std::counting_semaphore: libstdc++ 12 (Debian 12's) can sleep through a
// release. Its acquire loses a compare-and-swap race to another acquire or release, then waits
// for the count to change from a non-zero value, and a release announces only a change from
// zero. A mutex and a condition variable have no such window.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace polygrad {

// How often a compile waiting for a slot asks whether it is still wanted.
inline constexpr std::chrono::milliseconds kSlotPoll{50};

class CompileSlots {
 public:
  explicit CompileSlots(unsigned slots) : free_(slots) {}
  CompileSlots(const CompileSlots&) = delete;
  CompileSlots& operator=(const CompileSlots&) = delete;

  // Takes a slot and returns true; or, when `stop` (may be empty: never) says true, asked at least
  // every `poll` while the call waits, returns false holding none.
  bool acquire(const std::function<bool()>& stop, std::chrono::milliseconds poll = std::chrono::milliseconds(50)) {
    std::unique_lock lock(mu_);
    while (free_ == 0) {
      if (stop && stop()) return false;
      freed_.wait_for(lock, poll);
    }
    --free_;
    return true;
  }
  // Gives back a slot taken by acquire.
  void release() {
    {
      std::lock_guard lock(mu_);
      ++free_;
    }
    freed_.notify_one();
  }
  // Slots free now (for tests and stats; stale as soon as it returns).
  unsigned available() const {
    std::lock_guard lock(mu_);
    return free_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable freed_;
  unsigned free_;
};

}  // namespace polygrad
