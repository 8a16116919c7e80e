// Kernel boundaries. Elementwise work fuses into the kernel that consumes it; a reduction runs
// inside its consumer's kernel unless its result is broadcast (an EXPAND lies between them) or
// several kernels need it, in which case it is materialized into a buffer of its own. So
// reduce -> elementwise -> reduce chains (softmax, layernorm, variance) need no client-side
// realize, and the kernel count stays near the minimum (softmax: 3). On the CPU a reduction
// over the last axis broadcast back along it stays inside its consumer as well
// (ScheduleOptions::fuse_row_reductions), computed once per row: softmax and layernorm are one
// kernel.
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

struct ScheduleOptions {
  // Row reductions fuse into the kernel that consumes them (CPU): a reduction over the last axis
  // whose result is broadcast back along that axis, where every path from the consumer's root
  // keeps the rows (elementwise ops, broadcasts and reductions over the last axis only), runs
  // inside the consumer, once per row, instead of in a kernel of its own. softmax and layernorm
  // become one kernel that streams each row from memory once, the later passes over it reading
  // the cache. Off for devices that compute each output element on its own thread (a GPU),
  // which would repeat the row's reduction for every element.
  bool fuse_row_reductions = false;
};

// Large reductions (2^15 elements or more per output) run in two stages: contiguous chunks,
// then the partial results. Each stage accumulates far fewer values, which keeps float32 sums
// accurate, and the first stage has an outer loop the runtime can spread across threads.
//
// `is_bound(n)`: n already has a buffer (a BUFFER leaf or a node realized earlier). Outputs that
// are bound need no kernel. FAILED_PRECONDITION if an unbound BUFFER leaf is reachable.
absl::StatusOr<Schedule> create_schedule(const std::vector<UOpRef>& outputs,
                                         const std::function<bool(const UOp*)>& is_bound,
                                         const ScheduleOptions& options = {});

}  // namespace polygrad
