// A fixed pool of worker threads for data-parallel kernel launches. parallel_for blocks until
// every chunk has run; the calling thread takes chunks too, so a pool of N workers uses N+1.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace polygrad {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  // Runs fn(i) for i in [0, n). Calls from several threads at once are serialized, except on a
  // thread inside a NoWaitScope: there, while another call runs, fn runs on the calling thread
  // alone instead of waiting for it.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

  // For threads that must not be held up by others' kernels (gRPC's, which answer small
  // realizes at once): their parallel_for never waits for another launch to finish. Nests.
  class NoWaitScope {
   public:
    NoWaitScope();
    ~NoWaitScope();
    NoWaitScope(const NoWaitScope&) = delete;
    NoWaitScope& operator=(const NoWaitScope&) = delete;

   private:
    bool outer_;
  };

 private:
  void work();

  std::mutex launch_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable wake_, finished_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t next_ = 0, total_ = 0, running_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace polygrad
