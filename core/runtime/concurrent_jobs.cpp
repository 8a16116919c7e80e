#include "core/runtime/concurrent_jobs.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace polygrad {

absl::Status run_concurrently(size_t n, unsigned threads, const std::function<absl::Status(size_t)>& job) {
  std::vector<absl::Status> results(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
      results[i] = job(i);
      if (!results[i].ok()) failed.store(true);
    }
  };
  std::vector<std::thread> helpers;
  const size_t extra = std::min<size_t>(n, std::max(1u, threads)) - (n > 0 ? 1 : 0);
  helpers.reserve(extra);
  for (size_t t = 0; t < extra; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  for (const absl::Status& s : results)
    if (!s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace polygrad
