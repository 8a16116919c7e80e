// Running a realize program (core/schedule/realize_program.h) on a backend: the one-shot
// realize's run, from the schedule cache or freshly compiled. Not a public header.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/schedule/realize_program.h"

namespace polygrad {

// Runs `program` over `leaf_buffers` (one per leaf slot): allocates each launch's output,
// launches, frees intermediates after their last reader. `should_stop` is polled between
// launches (CANCELLED); a failed allocation is RESOURCE_EXHAUSTED, a failed launch its status.
// Fills stats.kernels. On a backend that reuses intermediates (a GPU's stream) they share blocks
// in launch order. Returns when the backend has finished the work.
absl::StatusOr<RealizeResult> run_program(Backend& backend, const RealizeProgram& program,
                                          std::vector<BufferPtr> leaf_buffers, const RealizeOptions& options);

}  // namespace polygrad
