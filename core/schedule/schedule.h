// Kernel boundaries. Elementwise work fuses into the kernel that consumes it; a reduction runs
// inside its consumer's kernel unless its result is broadcast (an EXPAND lies between them) or
// several kernels need it, in which case it is materialized into a buffer of its own. So
// reduce -> elementwise -> reduce chains (softmax, layernorm, variance) need no client-side
// realize, and the kernel count stays near the minimum (softmax: 3).
#pragma once

#include <functional>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad {

struct ScheduleItem {
  UOpRef root;  // the tensor node this kernel computes into a fresh buffer
};

struct Schedule {
  // The graph actually scheduled: `outputs` after the tensor-level passes (large reductions
  // split in two). Results belong to these, in the order of the outputs passed in.
  std::vector<UOpRef> outputs;
  std::vector<ScheduleItem> items;               // in execution order
  std::unordered_set<const UOp*> materialized;   // kernel roots and bound inputs
  std::vector<UOpRef> keep;                      // keeps every node above alive
};

// Large reductions (2^15 elements or more per output) run in two stages: contiguous chunks,
// then the partial results. Each stage accumulates far fewer values, which keeps float32 sums
// accurate, and the first stage has an outer loop the runtime can spread across threads.
//
// `is_bound(n)`: n already has a buffer (a BUFFER leaf or a node realized earlier). Outputs that
// are bound need no kernel. FAILED_PRECONDITION if an unbound BUFFER leaf is reachable.
absl::StatusOr<Schedule> create_schedule(const std::vector<UOpRef>& outputs,
                                         const std::function<bool(const UOp*)>& is_bound);

}  // namespace polygrad
