#include "core/runtime/cpu/quick_math.h"

#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "core/runtime/cpu/compiler.h"

namespace polygrad {

absl::StatusOr<std::shared_ptr<const QuickMath>> load_quick_math(const std::string& shared_object) {
  auto program = CpuCompiler::load(shared_object);
  if (!program.ok()) return program.status();
  auto math = std::make_shared<QuickMath>();
  math->library = *std::move(program);
  math->expf = math->library->symbol("pg_expf_ext");
  math->logf = math->library->symbol("pg_logf_ext");
  if (math->expf == nullptr || math->logf == nullptr)
    return absl::InternalError("the quick tier's math library lacks pg_expf_ext or pg_logf_ext");
  return std::shared_ptr<const QuickMath>(std::move(math));
}

void QuickMathBuild::start(Compile compile) {
  std::lock_guard lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this, compile = std::move(compile)] {
    auto bytes = compile([this] {
      std::lock_guard lock(mu_);
      return stopping_;
    });
    absl::StatusOr<std::shared_ptr<const QuickMath>> math =
        bytes.ok() ? load_quick_math(*bytes) : absl::StatusOr<std::shared_ptr<const QuickMath>>(bytes.status());
    std::lock_guard lock(mu_);
    if (math.ok()) {
      math_ = *std::move(math);
    } else if (!stopping_) {
      std::fprintf(stderr, "polygrad: the quick tier's math library did not build (quick builds compile exp and log "
                           "themselves): %s\n", math.status().ToString().c_str());
    }
    done_ = true;
    done_cv_.notify_all();
  });
}

std::shared_ptr<const QuickMath> QuickMathBuild::get() const {
  std::lock_guard lock(mu_);
  return math_;
}

void QuickMathBuild::wait() const {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [this] { return done_ || !started_ || stopping_; });
}

void QuickMathBuild::stop() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
  std::lock_guard lock(mu_);
  done_cv_.notify_all();
}

}  // namespace polygrad
