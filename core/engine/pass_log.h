// Named, timed compiler passes (Halide's lowering log): each pass's time goes to the engine
// observer's on_pass, and with POLYGRAD_DEBUG=2 in the environment each pass's output is written
// to stderr when the pass changed it. Only core/engine includes this.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "core/codegen/linearize.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"

namespace polygrad {

class PassLog {
 public:
  // `observer` may be null (nothing reported).
  explicit PassLog(EngineObserver* observer) : observer_(observer) {}

  // Runs `pass` (a callable), reports its time under `name`, returns what it returned.
  template <typename F>
  auto run(std::string_view name, F&& pass) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = std::forward<F>(pass)();
    if (observer_) observer_->on_pass(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return out;
  }

  // Reports a pass that ran from `t0` until now (for a pass with early returns of its own).
  void done(std::string_view name, std::chrono::steady_clock::time_point t0) {
    if (observer_) observer_->on_pass(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // Whether POLYGRAD_DEBUG is 2 or more: only then do the log calls below write anything.
  static bool logging();
  // The output of pass `name` on kernel `kernel`: a kernel AST, written only when it is not
  // `before` (hash-consing makes an unchanged graph the same node).
  static void log(std::string_view name, size_t kernel, const UOpRef& before, const UOpRef& after);
  static void log(std::string_view name, size_t kernel, const LinearKernel& linear);
  static void log(std::string_view name, size_t kernel, const std::string& text);

 private:
  EngineObserver* observer_;
};

}  // namespace polygrad
