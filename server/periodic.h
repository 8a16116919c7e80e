#pragma once
// A thread that runs a task every `interval` until it is destroyed (the session reaper, the
// memory trimmer). The wait is interruptible: destruction returns as soon as a task in progress
// finishes, without waiting out the interval.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

namespace polygrad::server {

class Periodic {
 public:
  // A non-positive interval starts nothing.
  Periodic(std::chrono::milliseconds interval, std::function<void()> task) {
    if (interval.count() <= 0) return;
    thread_ = std::jthread([this, interval, task = std::move(task)](std::stop_token stop) {
      while (!stop.stop_requested()) {
        {
          std::unique_lock lock(mu_);
          cv_.wait_for(lock, stop, interval, [] { return false; });
        }
        if (stop.stop_requested()) break;
        task();
      }
    });
  }
  ~Periodic() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::jthread thread_;  // last: started after, and stopped before, the members it uses
};

}  // namespace polygrad::server
