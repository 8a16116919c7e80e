#include "core/runtime/thread_pool.h"

#include <chrono>
#include <limits>

namespace polygrad {

namespace {

thread_local bool no_wait = false;  // this thread is inside a NoWaitScope

// How long a worker looks for the next launch after its last chunk, and how long the caller
// waits for the others' chunks, before each sleeps. A compiled step's next kernel starts within
// a few microseconds; an eager client's next request takes 0.2 ms or more (a gRPC round trip),
// and a worker spinning through that holds a core the client on the same machine wants.
constexpr auto kWorkerSpin = std::chrono::microseconds(200);
constexpr auto kCallerSpin = std::chrono::milliseconds(2);

// Spins until done() or `limit` has passed; reads the clock every 8 tries. Each try
// yields: a spinner sharing its core with the thread it waits for (the scheduler puts a woken
// worker on its waker's core half the time here) must let that thread run.
template <typename Done>
bool spin_until(Done done, std::chrono::steady_clock::duration limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    std::this_thread::yield();
    if (i % 8 == 0 && std::chrono::steady_clock::now() >= end) return done();
  }
}

// The index a launch shows while the caller fills in job_ and total_: no total reaches it, so
// a worker that loaded an older launch's state can never claim through the change.
constexpr uint64_t kSealed = 0xffffffffu;

inline uint32_t generation_of(uint64_t claim) { return static_cast<uint32_t>(claim >> 32); }
inline int64_t index_of(uint64_t claim) { return static_cast<int64_t>(claim & 0xffffffffu); }

}  // namespace

ThreadPool::NoWaitScope::NoWaitScope() : outer_(no_wait) { no_wait = true; }
ThreadPool::NoWaitScope::~NoWaitScope() { no_wait = outer_; }

ThreadPool::ThreadPool(unsigned workers) {
  for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t generation) {
  while (true) {
    uint64_t c = claim_.load();
    if (generation_of(c) != generation) return;
    if (index_of(c) == kSealed) {  // the caller is publishing this launch
      std::this_thread::yield();
      continue;
    }
    // Read before the claim: a claim that succeeds proves the launch was still this one, and
    // the caller seals claim_ (a new generation) before it rewrites these.
    const auto* fn = job_.load();
    const int64_t total = total_.load();
    if (index_of(c) >= total) return;
    if (!claim_.compare_exchange_weak(c, c + 1)) continue;
    (*fn)(index_of(c));
    if (unfinished_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard lock(mu_);
      finished_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty() || n > std::numeric_limits<int32_t>::max()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::unique_lock launch(launch_mu_, std::defer_lock);
  if (!no_wait) {
    launch.lock();
  } else if (!launch.try_lock()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const uint32_t generation = generation_of(claim_.load()) + 1;
  claim_.store((static_cast<uint64_t>(generation) << 32) | kSealed);
  job_.store(&fn);
  total_.store(n);
  unfinished_.store(n);
  claim_.store(static_cast<uint64_t>(generation) << 32);  // publishes the launch
  if (sleeping_workers_.load() > 0) {
    std::lock_guard lock(mu_);
    wake_.notify_all();
  }
  run_chunks(generation);
  auto finished = [&] { return unfinished_.load() == 0; };
  if (!spin_until(finished, kCallerSpin)) {
    std::unique_lock lock(mu_);
    caller_sleeping_.store(true);
    finished_.wait(lock, finished);
    caller_sleeping_.store(false);
  }
}

void ThreadPool::work() {
  uint32_t seen = 0;
  auto next_launch = [&] { return stop_.load() || generation_of(claim_.load()) != seen; };
  while (true) {
    if (!spin_until(next_launch, kWorkerSpin)) {
      std::unique_lock lock(mu_);
      sleeping_workers_.fetch_add(1);
      wake_.wait(lock, next_launch);
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_of(claim_.load());
    run_chunks(seen);
  }
}

}  // namespace polygrad
