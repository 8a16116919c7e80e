// A compiled step held by a session: its program (core/engine/step_program.h), which buffers
// RunStep feeds, and what it returns. The program and every buffer it uses live as long as the
// step (released explicitly, or with the session).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/engine/step_program.h"
#include "core/runtime/buffer.h"
#include "server/decode.h"

namespace polygrad::server {

struct CompiledStep {
  struct Input {
    uint64_t node_id;
    BufferPtr buffer;  // RunStep copies new data here before the kernels run
  };
  // A random node the trace made (CompileStep's `random`): its key buffer, and its counter less
  // the traced counter_base, so RunStep's `random` can key it from another seed and base.
  struct RandomKey {
    BufferPtr buffer;
    uint32_t counter_delta;
  };
  // A symbolic dim's extent that named its variable: RunStep's value of it, times mul plus add.
  struct VariableExtent {
    BufferPtr buffer;
    VariableTerm term;
  };
  std::unique_ptr<StepProgram> program;
  std::vector<Input> inputs;
  std::vector<RandomKey> random_keys;
  std::vector<VariableExtent> variable_extents;
  std::vector<uint64_t> output_ids;            // node ids, in the order of program->outputs()
  absl::flat_hash_set<uint64_t> written_ids;   // ids of the buffers a run writes (inputs, targets)
  absl::flat_hash_map<uint64_t, const UOp*> clean;  // nodes seen not to read written buffers
};

}  // namespace polygrad::server
