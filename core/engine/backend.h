// What a device must do for the engine (modelled on ggml's ggml-backend-impl.h): the pipeline
// (pipeline.h) generates code by the backend's capabilities and hands it the rendered kernels;
// it never asks which device it is. Not a public header: only core/engine includes it.
//
// To add a device: implement Backend (render, build; allocate, copy, launch, synchronize), say in
// CodegenCaps how its kernels are shaped, and give placement.h a device code for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cache/kernel_cache.h"
#include "core/codegen/linearize.h"
#include "core/codegen/upcast.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"
#include "core/runtime/program.h"

namespace polygrad {

// How a device's kernels are generated. The pipeline varies by these flags alone.
struct CodegenCaps {
  // Every output element in one outer loop (a GPU's threads are its parallelism); otherwise the
  // CPU's loop nest, whose outer loop the thread pool splits.
  bool flat_output = false;
  // Register tiles for big reducing kernels as a GPU wants them (pipeline.cpp); otherwise the
  // CPU's vector lanes (codegen/upcast.h).
  bool gpu_tiles = false;
  // A launch passes every lowered parameter by position, so the kernel declares each one, even
  // one whose load simplification removed.
  bool declare_all_params = false;
  // The CPU's register tiles at most (codegen/upcast.h): wider where its vector registers are.
  TileLimits tiles;
  // Row reductions run inside their consumer's kernel, once per row
  // (ScheduleOptions::fuse_row_reductions): the CPU's loop nest computes them once per row; a
  // GPU's thread per element would repeat them.
  bool fuse_row_reductions = true;
};

// A kernel rendered for a device, not yet built.
struct RenderedKernel {
  std::string source;
  std::string key;  // its binary's name in the kernel cache (content only: device, compiler, source)
  size_t nparams = 0;
  int threads_per_iteration = 1;  // render/cuda_renderer.h: 32 when a warp computes an iteration
  // The CPU: its first launches may run a quick build (quick_compiler.h: quick_tier_eligible).
  bool quick_eligible = false;
};

// A kernel ready to launch, with what the engine needs to place and split its launches.
struct CompiledKernel {
  ProgramPtr program;              // null for a kernel with no elements (nothing to launch)
  std::vector<const UOp*> params;  // tensor node behind each DEFINE_GLOBAL; params[0] is the output
  int64_t outer_size = 0;
  int64_t work = 0;                // iterations of all loops: for the threading decision
  int threads_per_iteration = 1;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "CPU", "CUDA:0": as Buffer::device() names the memory this backend's kernels read.
  virtual const std::string& name() const = 0;
  virtual const CodegenCaps& caps() const = 0;

  // --- Compiling --------------------------------------------------------------------------------
  // A linearized kernel as this device's source, with its kernel-cache key.
  virtual absl::StatusOr<RenderedKernel> render(const LinearKernel& kernel) const = 0;
  // The program from the kernel cache's memory tier, or null; never builds. Optional: the
  // default (null) sends every kernel to build().
  virtual ProgramPtr cached(const RenderedKernel& kernel) const { return nullptr; }
  // The program from the shared kernel cache, or compiled now. Called for several kernels side by
  // side; `should_stop` as for KernelCache::get_or_build.
  virtual absl::StatusOr<KernelCache::Found> build(const RenderedKernel& kernel,
                                                   const KernelCache::StopFn& should_stop) = 0;

  // --- Memory -------------------------------------------------------------------------------
  // A buffer on this device, zero-filled unless `fill` is Fill::None (only for a kernel's output:
  // its one STORE covers every element, codegen/lower.h, so it overwrites all of the memory, which
  // may have held another session's data, before anyone reads it). RESOURCE_EXHAUSTED naming the
  // size when there is no room. It is freed when its last BufferPtr goes (a queue's device frees
  // in queue order).
  virtual absl::StatusOr<BufferPtr> allocate(DType dtype, const Shape& shape, Buffer::Fill fill) = 0;
  // `bytes` bytes of this device's memory from `from` to `to`, in queue order.
  virtual absl::Status copy(const void* from, void* to, size_t bytes) = 0;

  // --- Running ------------------------------------------------------------------------------
  // Runs `k` (built by this backend) over `args`, one pointer into this device's memory per
  // parameter, or queues it: the launch's error, if any, fails the realize or step.
  virtual absl::Status launch(const CompiledKernel& k, void* const* args, size_t nargs) = 0;
  // Returns when everything launched or copied so far has finished, with the first error of
  // queued work. Then reports the kernel times of those launches to the engine's observer.
  virtual absl::Status synchronize() = 0;

  // --- Optional hooks -----------------------------------------------------------------------
  // Whether a realize's intermediates may share memory in launch order: true for a queue that
  // runs its work in order, so a block a finished kernel read is free for the next one. The
  // default, false: each intermediate gets a buffer of its own, freed after its last reader.
  virtual bool reuses_intermediates() const { return false; }
};

}  // namespace polygrad
