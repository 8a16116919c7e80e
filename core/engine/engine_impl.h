// The engine's internals, shared by the one-shot realize (engine.cpp) and compiled execution
// plans (plan.cpp). Not a public header: only core/engine includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cache/kernel_cache.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/program.h"
#include "core/runtime/thread_pool.h"

namespace polygrad {

struct CompiledKernel {
  ProgramPtr program;              // null for a kernel with no elements (nothing to launch)
  std::vector<const UOp*> params;  // tensor node behind each DEFINE_GLOBAL; params[0] is the output
  int64_t outer_size;
  int64_t work;                    // iterations of all loops: for the threading decision
};

struct Engine::Impl {
  EngineOptions options;
  CpuCompiler compiler;
  KernelCache cache;
  ThreadPool pool;

  Impl(EngineOptions opts, CpuCompiler cc);

  EngineObserver* observer() const { return options.observer; }

  // Lowers, renders, and compiles (or finds in the kernel cache) the kernel computing `root`.
  absl::StatusOr<CompiledKernel> build(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                       RealizeStats& stats);
  // Runs a compiled kernel over `bufs` (one pointer per param), across the pool when it is big.
  void launch(const CompiledKernel& k, void* const* bufs);

  const bool dump_kernels;
  bool cuda_enabled = true;  // EngineOptions::devices named CUDA, or named nothing  // POLYGRAD_DUMP_KERNELS=1 prints every rendered kernel to stderr
};

}  // namespace polygrad
