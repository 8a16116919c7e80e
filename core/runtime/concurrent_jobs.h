// Runs independent jobs that mostly wait on other processes (a kernel compile is a clang run)
// on short-lived threads, so a realize with several uncached kernels compiles them side by side.
#pragma once

#include <cstddef>
#include <functional>

#include "absl/status/status.h"

namespace polygrad {

// Runs job(i) for every i in [0, n) on at most `threads` threads, the caller's included, and
// returns when all have finished. After a job fails, jobs not yet started are not started; the
// error returned is the failed job with the lowest index.
absl::Status run_concurrently(size_t n, unsigned threads, const std::function<absl::Status(size_t)>& job);

}  // namespace polygrad
