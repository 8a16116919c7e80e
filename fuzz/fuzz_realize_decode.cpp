// RealizeRequest bytes -> the server's decoder and validator (server/decode.h) -> core UOps,
// composites and gradients included: what a hostile client reaches first. Nothing is realized
// (compiling would make each input take seconds; the e2e tests cover running graphs).
// Invariants: no crash, exception or sanitizer report; a refusal is the client's error with a
// message; an accepted request gives one UOp per wire node, in order, of the stated dtype and
// within the limits, and a leaf buffer of the stated size for each BUFFER node.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_server.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/decode.h"

namespace {

using namespace polygrad;

// A session that holds nothing yet: every source must come from the request itself.
class EmptySession final : public server::NodeResolver {
 public:
  const UOpRef* find_node(uint64_t) const override { return nullptr; }
  absl::StatusOr<BufferPtr> find_handle(uint64_t handle) const override {
    return absl::NotFoundError(absl::StrCat("handle ", handle, " is not a buffer of this session"));
  }
};

void check_accepted(const v1::RealizeRequest& request, const server::DecodedNodes& decoded) {
  fuzz::check(decoded.nodes.size() == static_cast<size_t>(request.nodes_size()), "one decoded node per wire node");
  for (int i = 0; i < request.nodes_size(); ++i) {
    const v1::Node& wire = request.nodes(i);
    const server::DecodedNode& n = decoded.nodes[static_cast<size_t>(i)];
    const std::string what = absl::StrCat("node ", wire.id());
    fuzz::check(n.id == wire.id() && n.uop != nullptr, what + ": decoded out of order or without a UOp");
    fuzz::check(server::check_shape(n.uop->shape, fuzz::limits(), "result").ok(), what + ": result past the limits");
    if (wire.dtype() != v1::DTYPE_UNSPECIFIED)
      fuzz::check(server::from_wire(wire.dtype()) == n.uop->dtype, what + ": dtype differs from the stated one");
    fuzz::check((wire.op() == v1::BUFFER) == (n.leaf != nullptr), what + ": a leaf buffer iff BUFFER");
    if (n.leaf) {
      fuzz::check(n.leaf->nbytes() == wire.buffer().data().size(), what + ": leaf size differs from the inline data");
      fuzz::check(n.leaf->shape() == n.uop->shape && n.leaf->dtype() == n.uop->dtype, what + ": leaf differs from its UOp");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::RealizeRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  return fuzz::guarded([&] {
    absl::StatusOr<server::DecodedNodes> decoded =
        server::decode_nodes(request.nodes(), EmptySession(), fuzz::engine(), fuzz::limits());
    if (!decoded.ok()) return fuzz::check_refusal(decoded.status(), "decode_nodes");
    check_accepted(request, *decoded);
  });
}
