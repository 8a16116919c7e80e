// A small fixed pool of threads for heavy request work (realize), so gRPC's callback threads
// never block on a compile or a long kernel (they run only cached realizes of bounded work:
// call_helpers.cpp). Tasks run in submission order; the destructor finishes the queued tasks,
// then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace polygrad::server {

class WorkerPool {
 public:
  explicit WorkerPool(unsigned threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void submit(std::function<void()> task);
  size_t queued() const;
  // No task queued or running.
  bool idle() const;

 private:
  void run(std::stop_token stop);

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;
  std::vector<std::jthread> threads_;  // last: joined before the queue goes
};

}  // namespace polygrad::server
