// The engine's internals, shared by the pipeline (pipeline.cpp), the backends and compiled
// steps (step_program.cpp). Not a public header: only core/engine includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cache/kernel_cache.h"
#include "core/engine/backend.h"
#include "core/engine/compile_slots.h"
#include "core/engine/engine.h"
#include "core/schedule/schedule_cache.h"
#include "core/ir/uop.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/cpu/quick_math.h"
#include "core/runtime/thread_pool.h"

namespace polygrad {

// A host buffer, zero-filled unless `fill` says otherwise (Buffer::allocate_host); RESOURCE_EXHAUSTED
// naming the size when memory is not available.
absl::StatusOr<BufferPtr> allocate_host_buffer(DType dtype, const Shape& shape, Buffer::Fill fill = Buffer::Fill::Zero);

struct Engine::Impl {
  EngineOptions options;
  CpuCompiler compiler;
  KernelCache cache;
  ScheduleCache schedules;
  ThreadPool pool;

  Impl(EngineOptions opts, CpuCompiler cc);
  // Stops the kernel cache's background builds before the compiler and the slots they use go.
  ~Impl();

  EngineObserver* observer() const { return options.observer; }

  // The CPU (cpu_backend.h); a GPU's backend is made per stream (cuda_backend.h).
  std::unique_ptr<Backend> cpu;

  // One compiler process per hardware thread at most, across all sessions' realizes.
  const unsigned compile_threads;
  CompileSlots compile_slots;
  const bool dump_kernels;    // POLYGRAD_DUMP_KERNELS=1 prints every rendered kernel to stderr
  bool cuda_enabled = true;  // EngineOptions::devices named CUDA, or named nothing
  // EngineOptions::quick_compile, and this build has the quick tier.
  const bool quick_compile;
  // With the quick tier: the exp and log its builds call, built at start (quick_math.h).
  QuickMathBuild quick_math;
};

}  // namespace polygrad
