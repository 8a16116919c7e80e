// The bench MLP training step (784-256-10, batch 128, one-hot cross-entropy, SGD) run in-process
// through a compiled step (Engine::compile_step): the floor the daemon's RunStep is measured against
// (bench/step_bench.py prints the ratio). Prints one line: `core_step_bench: N steps/s ...`.
//
//   build/core_step_bench [--seconds=S] [--threads=T] [--profile]
//
// --profile adds the time of each kernel of the step (mean over the runs), in launch order.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/mlp_step.h"
#include "core/engine/engine.h"
#include "core/engine/step_program.h"

namespace {

// Kernel times by position in the step (every run launches the same kernels in the same order).
class KernelClock final : public polygrad::EngineObserver {
 public:
  explicit KernelClock(size_t kernels_per_run) : per_run_(kernels_per_run), total_(kernels_per_run, 0.0) {}
  void on_kernel(double seconds) override {
    if (per_run_ == 0) return;
    total_[next_++ % per_run_] += seconds;
  }
  void set_kernels(size_t n) {
    per_run_ = n;
    total_.assign(n, 0.0);
    next_ = 0;
  }
  void print(int64_t runs) const {
    for (size_t i = 0; i < total_.size(); ++i)
      std::printf("  kernel %2zu: %8.3f ms\n", i, 1e3 * total_[i] / static_cast<double>(runs));
  }

 private:
  size_t per_run_;
  size_t next_ = 0;
  std::vector<double> total_;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  unsigned threads = 0;
  bool profile = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--seconds=", 0) == 0) seconds = std::atof(a.c_str() + 10);
    else if (a.rfind("--threads=", 0) == 0) threads = static_cast<unsigned>(std::atoi(a.c_str() + 10));
    else if (a == "--profile") profile = true;
    else {
      std::fprintf(stderr, "usage: %s [--seconds=S] [--threads=T] [--profile]\n", argv[0]);
      return 2;
    }
  }
  using namespace polygrad;
  KernelClock clock(0);
  // The optimized builds from the start: this is the steady state's floor, not the first runs'.
  auto engine =
      Engine::create({.quick_compile = false, .threads = threads, .observer = profile ? &clock : nullptr});
  if (!engine.ok()) {
    std::fprintf(stderr, "core_step_bench: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  auto step = bench::make_mlp_step(**engine, 128, 784, 256, 10, 0.01f, 0);
  if (!step.ok()) {
    std::fprintf(stderr, "core_step_bench: %s\n", step.status().ToString().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto compiled = (*engine)->compile_step(step->spec());
  if (!compiled.ok()) {
    std::fprintf(stderr, "core_step_bench: %s\n", compiled.status().ToString().c_str());
    return 1;
  }
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < 5; ++i) (void)(*compiled)->run();  // warm caches and threads
  clock.set_kernels((*compiled)->stats().kernels);
  const float first_loss = *static_cast<const float*>((*compiled)->outputs()[0]->data());
  int64_t n = 0;
  t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    if (absl::Status s = (*compiled)->run(); !s.ok()) {
      std::fprintf(stderr, "core_step_bench: %s\n", s.ToString().c_str());
      return 1;
    }
    ++n;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const float last_loss = *static_cast<const float*>((*compiled)->outputs()[0]->data());
  const StepStats& st = (*compiled)->stats();
  std::printf("core_step_bench: %.1f steps/s (%lld steps in %.2fs; %u kernels, %u intermediates, %.2fs to compile; "
              "loss %.4f -> %.4f)\n",
              static_cast<double>(n) / elapsed, static_cast<long long>(n), elapsed, st.kernels, st.intermediates,
              compile_s, first_loss, last_loss);
  if (profile) clock.print(n);
  return 0;
}
