// The wire op table: every wire op, what it becomes in core, and what it must carry. The decoder
// (decode.cpp) checks each node against its op's entry (arity, arg), then builds it by kind.
#pragma once

#include <string_view>

#include "core/ir/ops.h"
#include "polygrad/v1/polygrad.pb.h"

namespace polygrad::server {

namespace v1 = ::polygrad::v1;

enum class OpKind {
  Buffer, Const, Unary, Cast, Binary, Ternary, Reduce, Reshape, Permute, Expand, Pad, Shrink, Flip,
  Gradient, Composite
};

struct OpSpec {
  v1::Op wire;
  OpKind kind;
  Ops core;                   // the ALU op, or for reductions the reduce op
  int arity;                  // number of sources
  v1::Node::ArgCase arg;      // the arg it must carry (ARG_NOT_SET: none)
  int max_arity = 0;          // more than `arity` when trailing sources are optional
};

// The entry of `op`, or null for an op the daemon does not know.
const OpSpec* find_op(v1::Op op);

// The name of an arg case in messages ("shape", "axes", ..., "none").
std::string_view arg_name(v1::Node::ArgCase c);

}  // namespace polygrad::server
