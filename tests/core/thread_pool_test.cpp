// ThreadPool: every index runs once; a thread in a NoWaitScope runs its chunks itself while
// another launch holds the pool, instead of waiting for it.
#include "core/runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <thread>
#include <vector>

namespace polygrad {
namespace {

// One launch held inside the pool: its first chunk waits for `release`, so the pool stays busy
// until the test says, whatever the machine's speed.
struct HeldLaunch {
  ThreadPool& pool;
  std::promise<void> started, release;
  std::thread thread;

  explicit HeldLaunch(ThreadPool& p) : pool(p) {
    std::shared_future<void> go = release.get_future().share();
    thread = std::thread([this, go] {
      pool.parallel_for(2, [&](int64_t i) {
        if (i != 0) return;
        started.set_value();
        go.wait();
      });
    });
    started.get_future().wait();
  }
  ~HeldLaunch() {
    release.set_value();
    thread.join();
  }
};

TEST(ThreadPool, EveryIndexRunsOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 100}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t i) { runs[static_cast<size_t>(i)]++; });
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1) << n;
  }
}

// Launches follow each other while workers are still spinning from the last one, from two
// callers at once (one of them in a NoWaitScope): no index of one launch may run for another.
TEST(ThreadPool, BackToBackLaunchesFromTwoCallersRunEachIndexOnce) {
  ThreadPool pool(3);
  auto caller = [&pool](bool no_wait_scope, uint32_t seed) {
    std::optional<ThreadPool::NoWaitScope> scope;
    if (no_wait_scope) scope.emplace();
    int failures = 0;
    for (int launch = 0; launch < 2000; ++launch) {
      seed = seed * 1664525u + 1013904223u;
      const int64_t n = 1 + static_cast<int64_t>(seed >> 26);  // 1..64
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i) { runs[static_cast<size_t>(i)]++; });
      for (const auto& r : runs) failures += r.load() != 1;
    }
    return failures;
  };
  auto other = std::async(std::launch::async, caller, true, 7u);
  EXPECT_EQ(caller(false, 1u), 0);
  EXPECT_EQ(other.get(), 0);
}

TEST(ThreadPool, ANoWaitLaunchRunsOnItsOwnThreadWhileThePoolIsHeld) {
  ThreadPool pool(1);
  HeldLaunch held(pool);
  std::set<std::thread::id> threads;
  int runs = 0;
  {
    ThreadPool::NoWaitScope no_wait;
    pool.parallel_for(4, [&](int64_t) {
      threads.insert(std::this_thread::get_id());
      ++runs;
    });
  }
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, ScopesNest) {
  ThreadPool pool(1);
  HeldLaunch held(pool);
  int runs = 0;
  {
    ThreadPool::NoWaitScope outer;
    { ThreadPool::NoWaitScope inner; }
    pool.parallel_for(3, [&](int64_t) { ++runs; });  // still in the outer scope: does not wait
  }
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace polygrad
