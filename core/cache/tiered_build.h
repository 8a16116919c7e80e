// Two-tier kernel builds (the kernel cache's quick tier, KernelCache::get_or_build with a
// QuickBuild): a program built in milliseconds runs a kernel's first launches while the optimized
// build is compiled in the background, then the optimized program takes its place.
//
// TieredProgram is the program the cache hands out and keeps in its memory tier: each launch runs
// whichever program it holds at that moment (a launch in progress keeps its program alive across
// a swap). BackgroundBuilds owns the threads the optimized builds run on; stopping it tells the
// running builds to give up (their compilers are killed: the jobs poll `stopping`), drops the
// queued ones and joins every thread, so nothing outlives the cache, compiler and slots they use.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/runtime/program.h"

namespace polygrad {

class TieredProgram final : public Program {
 public:
  // `quick_launches` (may be null; must outlive every launch) counts the launches that ran `quick`.
  explicit TieredProgram(ProgramPtr quick, std::atomic<uint64_t>* quick_launches = nullptr)
      : current_(std::move(quick)), quick_launches_(quick_launches) {}

  // While the quick program runs, the range goes in pieces (at most kPieces), and each piece runs
  // whichever program is current when it starts: a long first launch (a convolution's quick build
  // ran 8 s; clang compiled and ran it in under 0.5 s) moves to the optimized program as soon as
  // it lands. Outer iterations write disjoint outputs, and the tiers compute the same
  // bits (quick_compiler.h), so a launch split between them computes what either would.
  absl::Status launch(void** bufs, int64_t start, int64_t end) const override {
    ProgramPtr p;
    bool quick;
    {
      std::lock_guard lock(mu_);
      p = current_;
      quick = !optimized_;
      if (quick && quick_launches_ != nullptr) quick_launches_->fetch_add(1, std::memory_order_relaxed);
    }
    if (!quick) return p->launch(bufs, start, end);
    const int64_t piece = std::max<int64_t>(1, (end - start + kPieces - 1) / kPieces);
    for (int64_t at = start; at < end;) {
      const int64_t to = std::min(end, at + piece);
      if (absl::Status s = p->launch(bufs, at, to); !s.ok()) return s;
      at = to;
      std::lock_guard lock(mu_);
      p = current_;
      if (optimized_) return at < end ? p->launch(bufs, at, end) : absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // The program launches run now.
  ProgramPtr current() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  // Whether the optimized build has taken the quick one's place.
  bool optimized() const {
    std::lock_guard lock(mu_);
    return optimized_;
  }
  void swap_in(ProgramPtr optimized) {
    ProgramPtr old;  // released outside the lock: a program's destructor may take its own locks
    std::lock_guard lock(mu_);
    old = std::exchange(current_, std::move(optimized));
    optimized_ = true;
  }

 private:
  static constexpr int64_t kPieces = 64;

  mutable std::mutex mu_;
  ProgramPtr current_;
  bool optimized_ = false;
  std::atomic<uint64_t>* const quick_launches_;
};

class BackgroundBuilds {
 public:
  // A job; `stopping` turns true when the builds are being stopped, and the job should then
  // return soon (an interrupted compile returns CANCELLED).
  using Job = std::function<void(const std::function<bool()>& stopping)>;

  // At most `max_threads` jobs run at once (threads start when jobs arrive); the others queue.
  explicit BackgroundBuilds(unsigned max_threads);
  ~BackgroundBuilds() { stop(); }
  BackgroundBuilds(const BackgroundBuilds&) = delete;
  BackgroundBuilds& operator=(const BackgroundBuilds&) = delete;

  // Queues `job`; false (the job dropped) once stop() has begun.
  bool submit(Job job);
  // Makes `stopping` true, drops queued jobs and joins every thread. Idempotent.
  void stop();
  // Jobs queued or running.
  size_t pending() const;

 private:
  void work();

  const unsigned max_threads_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::vector<std::thread> threads_;
  unsigned idle_ = 0;
  size_t running_ = 0;
  bool stopping_ = false;
};

}  // namespace polygrad
