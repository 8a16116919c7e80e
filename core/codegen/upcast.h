// Register tiling for reduce kernels. An output axis r of size N is split as r' * T + u, where u
// is an "upcast" range of small size T that the linearizer places innermost — inside the
// reduction's loop, accumulating into an array of T. The reduction then streams its operands
// once per tile instead of once per output element, and the u loop (contiguous, constant trip
// count) is what the C compiler vectorizes. Matmul gets a 2-D tile (rows x columns).
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/uop.h"

namespace polygrad {

struct Upcast {
  UOpRef sink;
  std::vector<int64_t> upcast_ranges;  // ids of the ranges the linearizer must place innermost
};

Upcast apply_upcasts(const UOpRef& sink);

}  // namespace polygrad
