// The pipeline of a realize, in one place and in order (core/engine/pipeline.cpp reads top to
// bottom): schedule-cache lookup, schedule, then per kernel lower → simplify → optimize →
// linearize → render → kernel-cache lookup or compile, then run. Every pass is named and timed
// (pass_log.h). Devices vary it only through their Backend (backend.h): its CodegenCaps, its
// renderer and its compiler. A kernel's stages are the types below, in order: GeneratedKernel
// (lower → linearize), RenderedKernel (render, backend.h), CompiledKernel (compile, backend.h).
// Only core/engine includes this (tests reach generate_kernel through kernels_for.h).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/codegen/upcast.h"
#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/engine/pass_log.h"
#include "core/ir/uop.h"
#include "core/schedule/schedule.h"

namespace polygrad {

// One scheduled kernel root after the code-generation passes (generate_kernel), not yet rendered:
// its linearized code and the tensor node behind each of its parameters.
struct GeneratedKernel {
  LinearKernel linear;
  std::vector<const UOp*> params;  // tensor node behind each DEFINE_GLOBAL; params[0] is the output
  UOpRef simplified;               // the kernel AST before optimize: what tuning tiles otherwise
};

// A schedule and its kernels, compiled in execution order (kernels[i] computes items[i]).
struct CompiledSchedule {
  Schedule schedule;
  std::vector<CompiledKernel> kernels;
};

// One scheduled kernel root through the code-generation passes: lower, simplify, optimize (the
// CPU's vector lanes or a GPU's register tiles, by `caps`), linearize. `index` names the kernel
// in the debug log.
// `choice` sets the CPU's tiling where it sets a field (tuning.h); it does not change a GPU's.
absl::StatusOr<GeneratedKernel> generate_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                                const CodegenCaps& caps, PassLog& log, size_t index = 0,
                                                const UpcastChoice& choice = {});

// A built kernel with what its launches need: the range its outer loop splits and its work.
CompiledKernel compiled_kernel(ProgramPtr program, const GeneratedKernel& generated, const RenderedKernel& rendered);

// Schedules `roots` and builds every kernel for `backend` (the pipeline without the schedule
// cache and the run: what a compiled step is built from). Kernels not in the kernel cache's memory
// are built side by side, at most one compiler per hardware thread across the engine. `what`
// names the caller in the CANCELLED message when `options.should_stop` fires before a compile.
absl::StatusOr<CompiledSchedule> compile_schedule(Engine::Impl& impl, Backend& backend, const std::vector<UOpRef>& roots,
                                                  const std::function<bool(const UOp*)>& is_bound,
                                                  const RealizeOptions& options, const char* what, RealizeStats& stats);

// The whole pipeline: computes `outputs` on `backend`, every node of which lives on that device
// (placement.h), reusing the program of an earlier request of the same structure on it.
absl::StatusOr<RealizeResult> realize_on(Engine::Impl& impl, Backend& backend, const std::vector<UOpRef>& outputs,
                                         const Bindings& bound, const RealizeOptions& options);

}  // namespace polygrad
