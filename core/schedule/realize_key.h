// The structural key of a realize request, for the schedule cache (core/schedule/schedule_cache.h).
// Two requests with equal keys schedule, lower and compile to the same kernels, so one program
// serves both with each request's own leaf buffers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine/engine.h"
#include "core/ir/uop.h"

namespace polygrad {

struct RealizeKey {
  // The graph reachable from the outputs (not below bound nodes), serialized in post-order:
  // every op, dtype, shape, argument and source edge, and which nodes are the outputs. Bound
  // nodes (BUFFER leaves and nodes realized earlier) appear only as (dtype, shape, the position
  // of the first leaf bound to the same buffer): their identity and history are not part of it,
  // but which leaves share a buffer is. Equal structures are equal requests up to leaf buffers.
  std::string structure;
  // A fast hash of `structure`, for lookups. Not collision-resistant, and need not be: the
  // cache compares whole structures, so a collision is a miss.
  uint64_t digest = 0;
  std::vector<const UOp*> leaves;       // bound nodes, in the canonical order of `structure`
  std::vector<BufferPtr> leaf_buffers;  // their buffers, in the same order
};

// The key of realizing `outputs` with `bound` on `device` (empty: the CPU; "CUDA:0": that GPU,
// whose keys never equal another device's). Bound nodes must be keys of `bound` as for
// Engine::realize; an unbound BUFFER leaf is kept as an ordinary node (scheduling rejects it).
RealizeKey realize_key(const std::vector<UOpRef>& outputs, const Bindings& bound, std::string_view device = {});

}  // namespace polygrad
