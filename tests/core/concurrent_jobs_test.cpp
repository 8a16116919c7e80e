// run_concurrently: every job runs once, no more than the allowed threads at a time, and the
// first failure by index stops the jobs not yet started.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/concurrent_jobs.h"

namespace polygrad {
namespace {

TEST(ConcurrentJobs, EveryJobRunsOnceWithinTheThreadLimit) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{40}}) {
      std::vector<std::atomic<int>> runs(n);
      std::atomic<int> running{0}, most{0};
      absl::Status s = run_concurrently(n, threads, [&](size_t i) {
        int now = running.fetch_add(1) + 1;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {}
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for the others to start
        runs[i].fetch_add(1);
        running.fetch_sub(1);
        return absl::OkStatus();
      });
      ASSERT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "job " << i << " of " << n << ", " << threads << " threads";
      EXPECT_LE(most.load(), static_cast<int>(threads));
      if (n >= 5 && threads > 1) {
        EXPECT_GT(most.load(), 1) << n << " sleeping jobs on " << threads << " threads never overlapped";
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

  // Several threads: whichever fails first in time, the error reported is the lowest failed index's.
  for (int round = 0; round < 20; ++round) {
    std::vector<std::atomic<bool>> failed(6);
    s = run_concurrently(6, 3, [&](size_t i) {
      if (i % 2 == 1) return absl::OkStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 5 : 0));  // the lowest fails last
      failed[i] = true;
      return absl::InternalError(absl::StrCat("job ", i));
    });
    size_t lowest = 0;
    while (lowest < failed.size() && !failed[lowest]) ++lowest;
    ASSERT_LT(lowest, failed.size());
    EXPECT_EQ(s, absl::InternalError(absl::StrCat("job ", lowest)));
  }
}

}  // namespace
}  // namespace polygrad
