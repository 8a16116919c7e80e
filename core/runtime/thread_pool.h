// A fixed pool of worker threads for data-parallel kernel launches. parallel_for blocks until
// every chunk has run; the calling thread takes chunks too, so a pool of N workers uses N+1.
//
// Why workers and the caller spin before they sleep: on the VMs this runs on, a thread woken
// from a condition variable starts 100-350 us later (the idle vCPU must be woken by the host),
// and half the time on the waker's CPU, sharing it. A kernel split in two then took nearly its
// one-thread time (softmax 4096x1024: 2.5-3.4 ms in the daemon against 1.8 with both halves
// running at once), and the caller paid the same latency again waiting for the worker's last
// chunk. A compiled step's kernels follow each other within microseconds, so a worker still
// spinning from the last launch takes its chunks at once. The spins are bounded, so an idle
// daemon sleeps (docs/PIPELINE.md, "Run").
#pragma once

#include <atomic>
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
  // Runs fn(i) for i in [0, n), each index exactly once, chunks claimed one at a time by
  // whichever thread is free (so a late worker takes fewer). Calls from several threads at once
  // are serialized, except on a thread inside a NoWaitScope: there, while another call runs, fn
  // runs on the calling thread alone instead of waiting for it.
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
  // Claims and runs indices of launch `generation` until none is left. False when that launch
  // is over (all its indices were claimed, or a newer one started).
  void run_chunks(uint32_t generation);

  std::mutex launch_mu_;  // one parallel_for at a time

  // The launch: `claim_` holds its generation (high 32 bits) and the next unclaimed index (low
  // 32 bits), so a worker that saw an older launch can never claim an index of a newer one.
  // A new launch first seals claim_ (its generation, no claimable index), then writes job_ and
  // total_, then publishes index 0; a worker reads them before its claim.
  std::atomic<uint64_t> claim_{0};
  std::atomic<const std::function<void(int64_t)>*> job_{nullptr};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> unfinished_{0};  // claimed-or-not indices of the launch not yet run

  // Sleeping, after the spins: workers on wake_, the caller on finished_. The counters let the
  // other side skip the lock and the futex call when nobody sleeps.
  std::mutex mu_;
  std::condition_variable wake_, finished_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace polygrad
