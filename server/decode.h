// Turns untrusted wire nodes into core tensor UOps. Validation happens here and in the
// frontend functions this calls; every error names the node id and op, e.g.
//   node 7 (ADD): source 12 is not defined in this session
// Decoding is all-or-nothing: the caller adds the returned nodes only when every one decoded.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/options.h"

namespace polygrad::server {

namespace v1 = ::polygrad::v1;

// Wire dtype <-> core dtype. DTYPE_UNSPECIFIED and unknown values map to nullopt.
std::optional<DType> from_wire(v1::DType dtype);
v1::DType to_wire(DType dtype);

// Rank, per-dimension and element-count bounds for a tensor shape. `what` starts the message
// ("node 3 (RESHAPE): shape" ...). RESOURCE_EXHAUSTED names the limit and its value.
absl::Status check_shape(std::span<const int64_t> shape, const Limits& limits, std::string_view what);
// The same for a grid that is computed but never allocated (a convolution's output times its
// window): its element count is held to max_work instead.
absl::Status check_work(std::span<const int64_t> shape, const Limits& limits, std::string_view what);

// What the decoder needs from the session it decodes into.
class NodeResolver {
 public:
  virtual ~NodeResolver() = default;
  // The lazy UOp of a node the session already holds, or null.
  virtual const UOpRef* find_node(uint64_t id) const = 0;
  // A buffer handle of this session; NOT_FOUND naming the handle otherwise.
  virtual absl::StatusOr<BufferPtr> find_handle(uint64_t handle) const = 0;
  // For an id find_node does not know: the error of the earlier request that sent it, if any.
  virtual const absl::Status* failed_node(uint64_t) const { return nullptr; }
};

// A symbolic dim's extent (or begin) as `variable` * mul + add, which a compiled step may set per run.
struct VariableTerm {
  std::string variable;  // at most kMaxVariableName bytes
  int64_t mul = 1;
  int64_t add = 0;
};
inline constexpr size_t kMaxVariableName = 64;

struct DecodedNode {
  uint64_t id;
  UOpRef uop;
  BufferPtr leaf;  // BUFFER nodes: the buffer their UOp stands for (bind it when realizing)
  // Random ops: their keys' buffers, each with the BUFFER UOp inside `uop` that stands for it
  // (bind it too) and the words it holds (random_key_words(seed, counter)), which a compiled step
  // may rewrite per run.
  struct RandomKey {
    UOpRef uop;
    BufferPtr buffer;
    std::array<uint32_t, 3> words;
  };
  std::vector<RandomKey> random_keys;
  // Symbolic dims: the buffer holding each extent (or a SHRINK's symbolic begin) and the BUFFER UOp
  // inside `uop` that stands for it (bind it too).
  struct Extent {
    UOpRef uop;
    BufferPtr buffer;
    std::optional<VariableTerm> term;  // when the dim named its variable
  };
  std::vector<Extent> extents;
};

struct DecodedNodes {
  std::vector<DecodedNode> nodes;  // in request order
  uint64_t inline_bytes = 0;       // BUFFER data carried in the request
};

// OK unless `node` (the output `id` of a realize or step, or a step's materialized node) has a
// symbolic dim: its data past the extent is not defined, so it is refused (INVALID_ARGUMENT naming
// the node and axis). A step's assign takes one: only the valid part is written (step_program.h).
absl::Status check_concrete(uint64_t id, const UOpRef& node);

absl::StatusOr<DecodedNodes> decode_nodes(const google::protobuf::RepeatedPtrField<v1::Node>& nodes,
                                          const NodeResolver& resolver, Engine& engine,
                                          const Limits& limits);

}  // namespace polygrad::server
