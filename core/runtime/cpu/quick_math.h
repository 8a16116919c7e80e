// The float exp and log that quick builds call (core/render/c_math.h says why): the CPU prelude's
// own pg_expf and pg_logf, built once per engine by the optimized compiler in the background.
// Until that build is loaded, quick builds compile the functions themselves (TinyCC's slower
// code for the same operations: the same bits either way).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "core/runtime/program.h"

namespace polygrad {

struct QuickMath {
  ProgramPtr library;  // keeps the code below loaded
  void* expf = nullptr;  // float pg_expf_ext(float)
  void* logf = nullptr;  // float pg_logf_ext(float)
};

// Loads shared-object bytes built from c_math_library_source() (CpuCompiler::load); INTERNAL
// when a function is missing.
absl::StatusOr<std::shared_ptr<const QuickMath>> load_quick_math(const std::string& shared_object);

class QuickMathBuild {
 public:
  // Compiles c_math_library_source() to shared-object bytes; CANCELLED once `stopping` says true.
  using Compile = std::function<absl::StatusOr<std::string>(const std::function<bool()>& stopping)>;

  QuickMathBuild() = default;
  ~QuickMathBuild() { stop(); }
  QuickMathBuild(const QuickMathBuild&) = delete;
  QuickMathBuild& operator=(const QuickMathBuild&) = delete;

  // Starts the build on a thread of its own; once. A failed build is reported on stderr and
  // leaves get() null: quick builds then keep compiling the functions themselves.
  void start(Compile compile);
  // The loaded functions, or null while the build runs (or when it failed or never started).
  std::shared_ptr<const QuickMath> get() const;
  // Blocks until the build has finished, loaded or not (at once when none was started or it
  // was stopped): for tests.
  void wait() const;
  // Tells a running build to give up (its compiler is killed) and joins it. Idempotent.
  void stop();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable done_cv_;
  bool started_ = false;
  bool done_ = false;
  bool stopping_ = false;
  std::shared_ptr<const QuickMath> math_;
  std::thread thread_;
};

}  // namespace polygrad
