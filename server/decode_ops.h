// The wire op table, read from the op schema (the options on polygrad.proto's Op values): what
// each op becomes in core and what a node of it must carry. The decoder (decode.cpp) checks each
// node against its op's entry (arity, arg), then builds it by its build kind.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "core/frontend/composite_table.h"
#include "core/ir/ops.h"
#include "polygrad/v1/polygrad.pb.h"

namespace polygrad::server {

namespace v1 = ::polygrad::v1;

struct OpSpec {
  v1::Op wire;
  v1::OpSchema::Build build;
  Ops core;                        // BUILD_ALU: the ALU op; BUILD_REDUCE: the reduce op
  int arity;                       // number of sources
  int max_arity;                   // at least arity; more when trailing sources are optional
  v1::Node::ArgCase arg;           // the arg it must carry (ARG_NOT_SET: none)
  frontend::CompositeBuilder composite;  // BUILD_COMPOSITE: core's builder
};

// The entry of `op`, or null for an op the daemon does not know.
const OpSpec* find_op(v1::Op op);

// Whether the schema is whole: every op has a build kind the decoder knows, a core op where it
// needs one, and a core builder when it is a composite. The daemon refuses to start otherwise.
absl::Status check_op_table();

// The name of an arg case in messages ("shape", "axes", ..., "none").
std::string_view arg_name(v1::Node::ArgCase c);

}  // namespace polygrad::server
