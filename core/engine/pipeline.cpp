// The pipeline of one realize, top to bottom. Each pass runs under its name through PassLog
// (timed for the engine observer's on_pass; logged with POLYGRAD_DEBUG=2 when it changed its
// input). Devices differ only through their Backend: CodegenCaps shape the kernels, render()
// prints them, build() compiles them through the shared kernel cache, launch() runs them.
//
//   0. schedule_cache  a request of the same structure reuses its compiled program (realize_key.h)
//   1. schedule        kernel boundaries (schedule/schedule.h)
//   per kernel:
//   2. lower           tensor node → kernel AST by index composition (codegen/lower.h)
//   3. simplify        the symbolic rule table to a fixed point (ir/symbolic.h)
//   3b. store_reuse    the CPU: a value a row reduction computes, stored there for the output to load (codegen/store_reuse.h)
//   4. optimize        register tiles: the CPU's vector lanes (codegen/upcast.h) or a GPU's tiles
//   5. linearize       loops, hoisting, accumulators (codegen/linearize.h)
//   6. render          the backend's source and kernel-cache key
//   6b. tune           a tiling stored in the kernel cache, or searched for (engine/tuning.h)
//   7. compile         kernel-cache lookup, else compile, side by side
//   then:
//   8. run             the program of buffer slots (realize_program.h)
#include "core/engine/pipeline.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/codegen/lower.h"
#include "core/codegen/store_reuse.h"
#include "core/codegen/upcast.h"
#include "core/engine/engine_impl.h"
#include "core/engine/run_program.h"
#include "core/engine/tuning.h"
#include "core/ir/symbolic.h"
#include "core/runtime/concurrent_jobs.h"
#include "core/schedule/realize_key.h"

namespace polygrad {
namespace {

// GPU register tiles: a kernel with at least this many outputs that reduces (a matmul, a
// convolution) computes kGpuTile x kGpuTile of them per thread, which still leaves 2^16 threads or
// more; each operand element a thread loads then serves kGpuTile outputs. Smaller outputs keep a
// thread each: the GPU needs the threads more than the reuse.
constexpr int64_t kGpuTile = 4;
constexpr int64_t kMinGpuTiledOutputs = int64_t{1} << 20;

// Whether the kernel computing `root` reduces (reaches a REDUCE_AXIS before any loaded node).
bool reduces(const UOpRef& root, const std::function<bool(const UOp*)>& materialized) {
  std::vector<const UOp*> todo{root.get()};
  std::unordered_set<const UOp*> seen{root.get()};
  while (!todo.empty()) {
    const UOp* n = todo.back();
    todo.pop_back();
    if (n->op == Ops::REDUCE_AXIS) return true;
    for (const UOpRef& s : n->src)
      if (!materialized(s.get()) && seen.insert(s.get()).second) todo.push_back(s.get());
  }
  return false;
}

// Iterations of every kernel of `program`: what running it costs, roughly.
int64_t total_work(const RealizeProgram& program) {
  int64_t work = 0;
  for (const RealizeProgram::Launch& l : program.launches) work += l.kernel.work;
  return work;
}

}  // namespace

CompiledKernel compiled_kernel(ProgramPtr program, const GeneratedKernel& generated, const RenderedKernel& rendered) {
  return CompiledKernel{std::move(program), generated.params, generated.linear.outer_size,
                        loop_iterations(generated.linear), rendered.threads_per_iteration};
}

absl::StatusOr<GeneratedKernel> generate_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                                const CodegenCaps& caps, PassLog& log, size_t index,
                                                const UpcastChoice& choice) {
  // 2. lower
  const bool tile = caps.gpu_tiles && root->numel() >= kMinGpuTiledOutputs && reduces(root, materialized);
  auto ast = log.run("lower", [&] { return lower_kernel(root, materialized, caps.flat_output, tile ? kGpuTile : 0); });
  if (!ast.ok()) return ast.status();
  PassLog::log("lower", index, root, ast->sink);
  // 3. simplify
  UOpRef sink = log.run("simplify", [&] { return graph_rewrite(ast->sink, symbolic()); });
  PassLog::log("simplify", index, ast->sink, sink);
  // 3b. store_reuse: on the CPU's loop nest only (a GPU's thread per element has no row loop to
  // store from).
  if (!caps.flat_output) {
    UOpRef reused = log.run("store_reuse", [&] { return reuse_reduced_values(sink); });
    PassLog::log("store_reuse", index, sink, reused);
    sink = std::move(reused);
  }
  // 4. optimize: a GPU's tiles were laid out by lower; the CPU's lanes are chosen here.
  Upcast tiled = log.run("optimize", [&] {
    return caps.gpu_tiles ? Upcast{sink, ast->tile_ranges} : apply_upcasts(sink, choice, caps.tiles);
  });
  PassLog::log("optimize", index, sink, tiled.sink);
  // 5. linearize
  auto linear = log.run("linearize", [&] { return linearize(tiled.sink, tiled.upcast_ranges); });
  if (!linear.ok()) return linear.status();
  linear->tile_square = ast->tile_square;
  if (caps.declare_all_params) {
    if (linear->params.size() < ast->params.size()) linear->params.resize(ast->params.size(), DType::Void);
    for (size_t i = 0; i < ast->params.size(); ++i)
      if (linear->params[i] == DType::Void) linear->params[i] = ast->params[i]->dtype;
  }
  PassLog::log("linearize", index, *linear);
  return GeneratedKernel{*std::move(linear), std::move(ast->params), sink};
}

absl::StatusOr<CompiledSchedule> compile_schedule(Engine::Impl& impl, Backend& backend, const std::vector<UOpRef>& roots,
                                                  const std::function<bool(const UOp*)>& is_bound,
                                                  const RealizeOptions& options, const char* what, RealizeStats& stats) {
  PassLog log(impl.observer());
  // 1. schedule
  auto sched = log.run("schedule", [&] {
    return create_schedule(roots, is_bound, {.fuse_row_reductions = backend.caps().fuse_row_reductions});
  });
  if (!sched.ok()) return sched.status();
  CompiledSchedule out{*std::move(sched), {}};
  auto materialized = [&](const UOp* n) { return out.schedule.materialized.count(n) > 0; };
  const size_t n = out.schedule.items.size();
  std::vector<std::optional<GeneratedKernel>> generated(n);
  std::vector<RenderedKernel> rendered(n);
  std::vector<KernelCache::Found> found(n);
  std::vector<size_t> to_build;  // not in memory: read from disk or compiled, side by side
  for (size_t i = 0; i < n; ++i) {
    const UOpRef& root = out.schedule.items[i].root;
    if (root->numel() == 0) continue;  // no elements: nothing to launch
    // 2-5. lower, simplify, optimize, linearize
    auto k = generate_kernel(root, materialized, backend.caps(), log, i);
    if (!k.ok()) return k.status();
    generated[i] = *std::move(k);
    // 6. render
    auto r = log.run("render", [&] { return backend.render(generated[i]->linear); });
    if (!r.ok()) return r.status();
    PassLog::log("render", i, r->source);
    rendered[i] = *std::move(r);
    // 6b. tune
    auto tuned = log.run("tune", [&] {
      return tune_kernel(impl, backend, root, materialized, *generated[i], rendered[i], log, i, options);
    });
    if (!tuned.ok()) return tuned.status();
    if (*tuned) {
      generated[i] = std::move((*tuned)->generated);
      rendered[i] = std::move((*tuned)->rendered);
    }
    if (!options.quick_compile) rendered[i].quick_eligible = false;
    if (ProgramPtr p = backend.cached(rendered[i])) found[i] = {std::move(p), CacheResult::MemoryHit};
    else to_build.push_back(i);
  }
  // 7. compile. Cancellation is checked before any build (even with nothing to build) and before each.
  auto cancelled = [&] {
    return options.should_stop && options.should_stop() ? absl::CancelledError(absl::StrCat(what, " cancelled before compiling"))
                                                        : absl::OkStatus();
  };
  if (absl::Status s = cancelled(); !s.ok()) return s;
  absl::Status built = run_concurrently(to_build.size(), impl.compile_threads, [&](size_t j) -> absl::Status {
    if (absl::Status s = cancelled(); !s.ok()) return s;
    auto f = log.run("compile", [&] { return backend.build(rendered[to_build[j]], options.should_stop); });
    if (!f.ok()) return f.status();
    found[to_build[j]] = *std::move(f);
    return absl::OkStatus();
  });
  if (!built.ok()) return built;
  for (size_t i = 0; i < n; ++i) {
    if (!found[i].program) {
      out.kernels.push_back(CompiledKernel{nullptr, {out.schedule.items[i].root.get()}, 0, 0, 1});
      continue;
    }
    if (impl.observer()) impl.observer()->on_cache_lookup(found[i].result);
    if (found[i].result == CacheResult::Miss) ++stats.compiled;
    else ++stats.cache_hits;
    out.kernels.push_back(compiled_kernel(std::move(found[i].program), *generated[i], rendered[i]));
  }
  return out;
}

absl::StatusOr<RealizeResult> realize_on(Engine::Impl& impl, Backend& backend, const std::vector<UOpRef>& outputs,
                                         const Bindings& bound, const RealizeOptions& options) {
  PassLog log(impl.observer());
  ScheduleCache& schedules = impl.schedules;
  // 0. schedule_cache: a hit runs the stored program over this request's buffers.
  RealizeKey key;
  const bool inline_only = options.inline_work_limit > 0;
  if (inline_only && !schedules.enabled()) return RealizeResult{.deferred = true};
  if (schedules.enabled()) {
    std::shared_ptr<const RealizeProgram> cached = log.run("schedule_cache", [&] {
      key = realize_key(outputs, bound, backend.name());
      return schedules.find(key);
    });
    // A deferred request is looked up again by the worker that takes it: reported there.
    if (inline_only && (!cached || total_work(*cached) > options.inline_work_limit))
      return RealizeResult{.deferred = true};
    if (impl.observer()) impl.observer()->on_schedule_cache_lookup(cached != nullptr);
    if (cached) {
      auto result = log.run("run", [&] { return run_program(backend, *cached, std::move(key.leaf_buffers), options); });
      if (result.ok()) {
        result->stats.schedule_cache_hit = true;
        result->stats.cache_hits = result->stats.kernels;
      }
      return result;
    }
  }
  // 1-7. schedule, then each kernel generated, rendered and compiled.
  RealizeStats build_stats;
  auto compiled = compile_schedule(impl, backend, outputs, [&](const UOp* n) { return bound.count(n) > 0; }, options,
                                   "realize", build_stats);
  if (!compiled.ok()) return compiled.status();
  std::vector<BufferPtr> leaf_buffers = std::move(key.leaf_buffers);
  auto program = make_program(compiled->schedule, std::move(compiled->kernels), key.leaves, bound, leaf_buffers);
  if (!program.ok()) return program.status();
  auto shared = std::make_shared<const RealizeProgram>(*std::move(program));
  // The graph may die once scheduling is done: the program keeps no node, only slots.
  if (shared->cacheable && schedules.enabled()) schedules.insert(key, shared);
  // 8. run
  auto result = log.run("run", [&] { return run_program(backend, *shared, std::move(leaf_buffers), options); });
  if (result.ok()) {
    result->stats.compiled = build_stats.compiled;
    result->stats.cache_hits = build_stats.cache_hits;
  }
  return result;
}

}  // namespace polygrad
