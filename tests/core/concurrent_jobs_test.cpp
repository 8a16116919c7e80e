// run_concurrently: every job runs once, no more than the allowed threads at a time, and the
// first failure by index stops the jobs not yet started.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/concurrent_jobs.h"

namespace polygrad {
namespace {

// How long a job waits for another to reach it before the test gives up. Only a run_concurrently
// that never runs two jobs at once reaches it; when it does overlap them, the wait ends at once.
constexpr auto kMeetLimit = std::chrono::seconds(120);

TEST(ConcurrentJobs, EveryJobRunsOnceWithinTheThreadLimit) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{40}}) {
      std::vector<std::atomic<int>> runs(n);
      std::atomic<int> running{0}, most{0};
      // With several threads, jobs 0 and 1 each wait until both are running: an event, not a
      // sleep, shows that jobs overlap.
      const bool meet = threads > 1 && n >= 2;
      std::mutex mu;
      std::condition_variable cv;
      int arrived = 0;
      bool met = true;
      absl::Status s = run_concurrently(n, threads, [&](size_t i) {
        int now = running.fetch_add(1) + 1;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {}
        if (meet && i < 2) {
          std::unique_lock lock(mu);
          ++arrived;
          cv.notify_all();
          if (!cv.wait_for(lock, kMeetLimit, [&] { return arrived == 2; })) met = false;
        }
        runs[i].fetch_add(1);
        running.fetch_sub(1);
        return absl::OkStatus();
      });
      ASSERT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "job " << i << " of " << n << ", " << threads << " threads";
      EXPECT_LE(most.load(), static_cast<int>(threads));
      if (meet) {
        EXPECT_TRUE(met) << "jobs 0 and 1 of " << n << " on " << threads << " threads never ran at once";
        EXPECT_GE(most.load(), 2);
      }
    }
  }
}

TEST(ConcurrentJobs, AFailureStopsJobsNotYetStartedAndTheLowestIndexWins) {
  std::atomic<int> ran{0};
  absl::Status s = run_concurrently(10, 1, [&](size_t i) {
    ran.fetch_add(1);
    return i >= 3 ? absl::InvalidArgumentError(absl::StrCat("job ", i)) : absl::OkStatus();
  });
  EXPECT_EQ(s, absl::InvalidArgumentError("job 3"));
  EXPECT_EQ(ran.load(), 4);  // one thread: jobs 4..9 were never started

  // Several threads, and the lowest index fails last in time: job 0 waits until job 2 has failed.
  // The error reported is still job 0's.
  for (int round = 0; round < 20; ++round) {
    std::mutex mu;
    std::condition_variable cv;
    bool two_failed = false;
    s = run_concurrently(6, 3, [&](size_t i) {
      if (i % 2 == 1) return absl::OkStatus();
      if (i == 0) {
        std::unique_lock lock(mu);
        EXPECT_TRUE(cv.wait_for(lock, kMeetLimit, [&] { return two_failed; })) << "jobs 0 and 2 never ran at once";
      }
      if (i == 2) {
        std::lock_guard lock(mu);
        two_failed = true;
        cv.notify_all();
      }
      return absl::InternalError(absl::StrCat("job ", i));
    });
    EXPECT_EQ(s, absl::InternalError("job 0"));
  }
}

}  // namespace
}  // namespace polygrad
