// Waiting in tests for something the code under test does asynchronously, bounded only against
// faults (docs/TESTING.md): shared by the core and server tests.
#pragma once

#include <chrono>
#include <thread>

namespace polygrad::testing {

// The bound on waiting for something that takes milliseconds on an idle machine (a session
// closing, buffers being freed, a request leaving the in-flight count). It is more than 100x what
// these take with both cores saturated under the sanitizers, so only a real fault reaches it, and
// a condition that already holds costs nothing.
inline constexpr std::chrono::seconds kWaitLimit{120};

// True as soon as `pred()` holds; false when it still does not after `limit`. The polling
// interval only sets how soon the wait notices; no result depends on it.
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds limit = kWaitLimit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling interval; kWaitLimit bounds it
  }
  return true;
}

}  // namespace polygrad::testing
