#include "core/runtime/thread_pool.h"

namespace polygrad {

namespace {
thread_local bool no_wait = false;  // this thread is inside a NoWaitScope
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

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty()) {
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
  std::unique_lock lock(mu_);
  job_ = &fn;
  next_ = 0;
  total_ = n;
  running_ = 0;
  ++generation_;
  wake_.notify_all();
  while (next_ < total_) {
    int64_t i = next_++;
    ++running_;
    lock.unlock();
    fn(i);
    lock.lock();
    --running_;
  }
  finished_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
}

void ThreadPool::work() {
  std::unique_lock lock(mu_);
  uint64_t seen = 0;
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr && next_ < total_); });
    if (stop_) return;
    seen = generation_;
    while (job_ != nullptr && next_ < total_) {
      int64_t i = next_++;
      ++running_;
      const auto* fn = job_;
      lock.unlock();
      (*fn)(i);
      lock.lock();
      if (--running_ == 0 && next_ >= total_) finished_.notify_all();
    }
  }
}

}  // namespace polygrad
