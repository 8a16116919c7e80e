// A realize's schedule, compiled and reduced to buffer slots: what a one-shot realize runs, and
// what the schedule cache keeps so a request with the same structure (core/schedule/realize_key.h)
// skips scheduling, code generation and kernel-cache lookups. Its run: core/engine/run_program.h.
// Not a public header.
//
// Unlike a StepProgram (core/engine/step_program.h), whose buffers are fixed when it is
// compiled, a program names buffers by slot and gets them per run: the leaves from the request,
// every kernel output freshly allocated. So concurrent runs of one program share nothing mutable,
// and each run's outputs are new buffers (a client still holds the previous run's).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"
#include "core/schedule/schedule.h"

namespace polygrad {

struct RealizeProgram {
  struct Launch {
    CompiledKernel kernel;          // for the program's one device; params cleared: a program holds no graph
    std::vector<uint32_t> args;     // slot of each kernel argument; args[0] is this launch's output
    DType dtype;                    // of the output
    Shape shape;
    std::vector<uint32_t> release;  // intermediates read for the last time here
  };
  // Slots [0, leaves) are bound buffers: the RealizeKey's leaves in order, then any the key did
  // not list. Slot leaves + i is launch i's output.
  uint32_t leaves = 0;
  std::vector<Launch> launches;   // in execution order
  std::vector<uint32_t> outputs;  // slot of each requested output
  // False when the kernels read a bound node the key did not list (only possible when scheduling
  // rebuilt a node that happens to be bound): such a program is correct for this request only.
  bool cacheable = true;
};

// The program of `sched` (its items compiled, in order, into `kernels`, for one device). `key_leaves` are the bound nodes of the request's key, which take the first slots;
// `leaf_buffers` holds their buffers on entry and gets the buffers of bound nodes outside the
// key appended.
absl::StatusOr<RealizeProgram> make_program(const Schedule& sched, std::vector<CompiledKernel> kernels,
                                            const std::vector<const UOp*>& key_leaves, const Bindings& bound,
                                            std::vector<BufferPtr>& leaf_buffers);

}  // namespace polygrad
