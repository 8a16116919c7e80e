// The engine's internals, shared by the one-shot realize (engine.cpp) and compiled execution
// plans (plan.cpp). Not a public header: only core/engine includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <semaphore>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cache/kernel_cache.h"
#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/engine/schedule_cache.h"
#include "core/ir/uop.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/program.h"
#include "core/runtime/thread_pool.h"
#include "core/schedule/schedule.h"

namespace polygrad {

struct CompiledKernel {
  ProgramPtr program;              // null for a kernel with no elements (nothing to launch)
  std::vector<const UOp*> params;  // tensor node behind each DEFINE_GLOBAL; params[0] is the output
  int64_t outer_size;
  int64_t work;                    // iterations of all loops: for the threading decision
};

// A host buffer, zero-filled unless `fill` says otherwise (Buffer::allocate_host); RESOURCE_EXHAUSTED
// naming the size when memory is not available.
absl::StatusOr<BufferPtr> allocate_host_buffer(DType dtype, const Shape& shape, Buffer::Fill fill = Buffer::Fill::Zero);

// A schedule and its kernels, compiled in execution order (kernels[i] computes items[i]).
struct CompiledSchedule {
  Schedule schedule;
  std::vector<CompiledKernel> kernels;
};

struct Engine::Impl {
  EngineOptions options;
  CpuCompiler compiler;
  KernelCache cache;
  ScheduleCache schedules;
  ThreadPool pool;

  Impl(EngineOptions opts, CpuCompiler cc);

  EngineObserver* observer() const { return options.observer; }

  // A kernel lowered and rendered, not yet built: `key` names its binary in the kernel cache.
  struct KernelSource {
    LoweredKernel lowered;
    std::string source;
    std::string key;
  };
  absl::StatusOr<KernelSource> render(const UOpRef& root, const std::function<bool(const UOp*)>& materialized) const;
  // The program for `k` from the kernel cache, or compiled now. Safe from several threads; at
  // most `compile_threads` compiles run at once in this engine.
  // `should_stop`: the request's stop predicate; its compile is killed once no request waits for it.
  absl::StatusOr<KernelCache::Found> program_for(const KernelSource& k, const KernelCache::StopFn& should_stop);
  // Schedules `roots` and builds every kernel (steps 1-6 of a realize). `what` names the caller
  // in the CANCELLED message when `options.should_stop` fires before a compile.
  absl::StatusOr<CompiledSchedule> compile(const std::vector<UOpRef>& roots,
                                           const std::function<bool(const UOp*)>& is_bound,
                                           const RealizeOptions& options, const char* what, RealizeStats& stats);
  // Runs a compiled kernel over `bufs` (one pointer per param), across the pool when it is big.
  void launch(const CompiledKernel& k, void* const* bufs);

  // One compiler process per hardware thread at most, across all sessions' realizes.
  const unsigned compile_threads;
  std::counting_semaphore<1024> compile_slots;
  const bool dump_kernels;    // POLYGRAD_DUMP_KERNELS=1 prints every rendered kernel to stderr
  bool cuda_enabled = true;  // EngineOptions::devices named CUDA, or named nothing
};

}  // namespace polygrad
