#include "server/worker_pool.h"

namespace polygrad::server {

WorkerPool::WorkerPool(unsigned threads) {
  if (threads == 0) threads = 1;
  threads_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    threads_.emplace_back([this](std::stop_token stop) { run(stop); });
  }
}

WorkerPool::~WorkerPool() {
  for (auto& t : threads_) t.request_stop();
  cv_.notify_all();
  threads_.clear();  // joins; queued tasks are finished first (see run)
}

void WorkerPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

size_t WorkerPool::queued() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

bool WorkerPool::idle() const {
  std::lock_guard lock(mu_);
  return tasks_.empty() && running_ == 0;
}

void WorkerPool::run(std::stop_token stop) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [this] { return !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop requested and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // what it captured goes before the pool counts it done
    std::lock_guard lock(mu_);
    --running_;
  }
}

}  // namespace polygrad::server
