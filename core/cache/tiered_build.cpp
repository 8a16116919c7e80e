#include "core/cache/tiered_build.h"

#include <algorithm>

namespace polygrad {

BackgroundBuilds::BackgroundBuilds(unsigned max_threads) : max_threads_(std::max(1u, max_threads)) {}

bool BackgroundBuilds::submit(Job job) {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(job));
  if (idle_ == 0 && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { work(); });
  } else {
    wake_.notify_one();
  }
  return true;
}

void BackgroundBuilds::work() {
  std::unique_lock lock(mu_);
  const std::function<bool()> stopping = [this] {
    std::lock_guard l(mu_);
    return stopping_;
  };
  while (true) {
    ++idle_;
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    job(stopping);
    job = nullptr;  // what it holds is released before the next wait
    lock.lock();
    --running_;
  }
}

void BackgroundBuilds::stop() {
  std::vector<std::thread> threads;
  std::deque<Job> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
    dropped.swap(queue_);
  }
  wake_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t BackgroundBuilds::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + running_;
}

}  // namespace polygrad
