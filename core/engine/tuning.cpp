#include "core/engine/tuning.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cache/sha256.h"
#include "core/engine/engine_impl.h"
#include "core/engine/pipeline.h"
#include "core/runtime/concurrent_jobs.h"

namespace polygrad {
namespace {

// Launches timed per candidate: at least kMinRuns, more until kMinSeconds have passed, at most
// kMaxRuns. The fastest counts: the others were disturbed by something else.
constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 20;
constexpr double kMinSeconds = 0.02;

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The fastest of several launches of `k` over `args`, after one launch that warms caches. A
// candidate whose warm-up alone took more than twice `to_beat` cannot win: that time is returned.
absl::StatusOr<double> time_kernel(Backend& backend, const CompiledKernel& k, const std::vector<void*>& args,
                                   double to_beat) {
  const auto run = [&]() -> absl::Status {
    if (absl::Status s = backend.launch(k, args.data(), args.size()); !s.ok()) return s;
    return backend.synchronize();
  };
  auto warm = std::chrono::steady_clock::now();
  if (absl::Status s = run(); !s.ok()) return s;
  if (double dt = seconds_between(warm, std::chrono::steady_clock::now()); dt > 2 * to_beat) return dt;
  double best = std::numeric_limits<double>::infinity();
  double total = 0;
  for (int runs = 0; runs < kMaxRuns && (runs < kMinRuns || total < kMinSeconds); ++runs) {
    auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = run(); !s.ok()) return s;
    double dt = seconds_between(t0, std::chrono::steady_clock::now());
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

struct Candidate {
  UpcastChoice choice;
  std::optional<GeneratedKernel> generated;
  RenderedKernel rendered;
  ProgramPtr program;
};

// Compiles every candidate (side by side, through the kernel cache, never a quick build: it is
// the optimized program that is timed), then times them one after another.
// choices[0] is the heuristic's tiling, already generated as `heuristic`.
absl::StatusOr<UpcastChoice> search(Engine::Impl& impl, Backend& backend, const UOpRef& root,
                                    const std::function<bool(const UOp*)>& materialized,
                                    const std::vector<UpcastChoice>& choices, const GeneratedKernel& heuristic,
                                    const RenderedKernel& heuristic_rendered, PassLog& log, size_t index,
                                    const KernelCache::StopFn& should_stop) {
  std::vector<Candidate> candidates(choices.size());
  candidates[0] = Candidate{choices[0], heuristic, heuristic_rendered, nullptr};
  candidates[0].rendered.quick_eligible = false;
  for (size_t c = 1; c < choices.size(); ++c) {
    candidates[c].choice = choices[c];
    auto k = generate_kernel(root, materialized, backend.caps(), log, index, choices[c]);
    if (!k.ok()) return k.status();
    auto r = backend.render(k->linear);
    if (!r.ok()) return r.status();
    r->quick_eligible = false;
    candidates[c].generated = *std::move(k);
    candidates[c].rendered = *std::move(r);
  }
  absl::Status built = run_concurrently(candidates.size(), impl.compile_threads, [&](size_t c) -> absl::Status {
    if (should_stop && should_stop()) return absl::CancelledError("cancelled while tuning a kernel");
    auto f = backend.build(candidates[c].rendered, should_stop);
    if (!f.ok()) return f.status();
    candidates[c].program = std::move(f->program);
    return absl::OkStatus();
  });
  if (!built.ok()) return built;

  // Every candidate reads and writes the same parameters: one set of zero-filled buffers serves all.
  const std::vector<const UOp*>& params = candidates[0].generated->params;
  std::vector<BufferPtr> buffers;
  std::vector<void*> args;
  for (const UOp* p : params) {
    auto b = backend.allocate(p->dtype, p->shape, Buffer::Fill::Zero);
    if (!b.ok()) return b.status();
    args.push_back((*b)->data());
    buffers.push_back(*std::move(b));
  }
  size_t best = 0;
  double best_seconds = std::numeric_limits<double>::infinity();
  std::string timings;  // for POLYGRAD_DEBUG=2
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (should_stop && should_stop()) return absl::CancelledError("cancelled while tuning a kernel");
    CompiledKernel k = compiled_kernel(candidates[c].program, *candidates[c].generated, candidates[c].rendered);
    auto seconds = time_kernel(backend, k, args, best_seconds);
    if (!seconds.ok()) return seconds.status();
    absl::StrAppend(&timings, candidates[c].choice.encode(), ": ", *seconds * 1e3, " ms\n");
    if (*seconds < best_seconds) {
      best_seconds = *seconds;
      best = c;
    }
  }
  PassLog::log("tune", index, absl::StrCat(timings, "chosen: ", candidates[best].choice.encode()));
  return candidates[best].choice;
}

}  // namespace

std::string tuning_key(const std::string& kernel_key) { return sha256_hex(absl::StrCat("polygrad tuning v1\n", kernel_key)); }

absl::StatusOr<std::optional<TunedKernel>> tune_kernel(Engine::Impl& impl, Backend& backend, const UOpRef& root,
                                                       const std::function<bool(const UOp*)>& materialized,
                                                       const GeneratedKernel& heuristic_generated,
                                                       const RenderedKernel& heuristic, PassLog& log, size_t index,
                                                       const RealizeOptions& options) {
  const TuneMode mode = options.tune_search ? TuneMode::Search : impl.options.tune;
  if (mode == TuneMode::Off || backend.caps().gpu_tiles) return std::nullopt;
  // A kernel the heuristic tiles nothing in (no reduction to tile around) has nothing to tune.
  if (!heuristic_generated.simplified || heuristic_generated.linear.upcast_ranges.empty()) return std::nullopt;

  const std::string key = tuning_key(heuristic.key);
  std::optional<UpcastChoice> chosen;
  const auto decodes = [](const std::string& payload) { return UpcastChoice::decode(payload).has_value(); };
  TuningResult result = TuningResult::Miss;
  if (std::optional<std::string> record = impl.cache.find_record(key, decodes)) {
    chosen = UpcastChoice::decode(*record);
    result = TuningResult::Hit;
  } else if (mode == TuneMode::Search) {
    // One candidate (every choice tiles it alike) is stored too: the next daemon does not ask again.
    std::vector<UpcastChoice> choices = upcast_candidates(heuristic_generated.simplified, backend.caps().tiles);
    UpcastChoice best;
    if (choices.size() > 1) {
      auto found = search(impl, backend, root, materialized, choices, heuristic_generated, heuristic, log, index,
                          options.should_stop);
      if (!found.ok()) return found.status();
      best = *found;
    }
    impl.cache.store_record(key, best.encode());
    chosen = best;
    result = TuningResult::Search;
  }
  if (impl.observer()) impl.observer()->on_tuning(result);
  if (!chosen || *chosen == UpcastChoice{}) return std::nullopt;
  auto k = generate_kernel(root, materialized, backend.caps(), log, index, *chosen);
  if (!k.ok()) return k.status();
  auto r = backend.render(k->linear);
  if (!r.ok()) return r.status();
  return TunedKernel{*std::move(k), *std::move(r), *chosen};
}

}  // namespace polygrad
