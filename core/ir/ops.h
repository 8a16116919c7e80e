// The op vocabulary, one list for every layer. Tensor-level ops describe what a client asked for;
// kernel-level ops describe one kernel's loops, loads and stores; linear ops exist only after the
// linearizer. Names follow tinygrad where the meaning is the same.
#pragma once

#include <cstdint>

namespace polygrad {

#define POLYGRAD_OPS(X)                                                                    \
  /* sources: BUFFER (arg: buffer id) is tensor-level data; CONST (arg: value) any level; */ \
  /* ARANGE (shape [n]) is 0, 1, ..., n-1 in its dtype */                                  \
  X(BUFFER) X(CONST) X(ARANGE)                                                             \
  /* unary ALU; BITCAST reads a float's bits as a same-size type or the reverse (see */     \
  /* frontend::bitcast: between integers it is a CAST) */                                  \
  X(NEG) X(EXP2) X(LOG2) X(SQRT) X(RECIP) X(SIN) X(CAST) X(BITCAST) X(NOT)                 \
  /* binary ALU: FDIV is true division (floats), IDIV/MOD truncate (ints) */               \
  X(ADD) X(SUB) X(MUL) X(FDIV) X(IDIV) X(MOD) X(MAX) X(CMPLT) X(CMPNE) X(AND) X(OR) X(XOR) \
  /* ternary ALU */                                                                        \
  X(WHERE)                                                                                 \
  /* tensor-level reduce (arg: ReduceArg) and movement ops (arg: their parameters) */      \
  X(REDUCE_AXIS) X(RESHAPE) X(PERMUTE) X(EXPAND) X(PAD) X(SHRINK) X(FLIP)                  \
  /* GATHER (src: x (..., n), integer index (..., m)): x at the index along the last axis, \
     0 outside [0, n); lowered as a load at a computed position (frontend::gather_last) */ \
  X(GATHER)                                                                                \
  /* COPY (arg: target device code, core/engine/placement.h): the source's value on another  \
     device; realized as a transfer, never inside a kernel */                                \
  X(COPY)                                                                                  \
  /* BOUND (src: x, extent; arg: axis): x whose `axis` is a symbolic dim (core/ir/symbolic_dims.h): \
     the shape keeps the dim's largest size, the data is valid below `extent` (a 0-d int32   \
     tensor, a Variable's value), and reductions over the axis read only that part. To the  \
     compiler it is x */                                                                    \
  X(BOUND)                                                                                 \
  /* kernel-level: DEFINE_GLOBAL (arg: param index), RANGE (arg: id; src: end),            \
     LOAD (src: buf, index[, gate]), STORE (src: buf, index, value),                       \
     REDUCE (arg: ADD|MAX as int; src: value, ranges...), SINK (src: stores) */            \
  X(DEFINE_GLOBAL) X(RANGE) X(LOAD) X(STORE) X(REDUCE) X(SINK)                             \
  /* linear-only: DEFINE_ACC (arg: id; src: init), ACCUMULATE (src: acc, value; arg: op),  \
     END_RANGE (src: range) */                                                             \
  X(DEFINE_ACC) X(ACCUMULATE) X(END_RANGE)

enum class Ops : uint8_t {
#define POLYGRAD_X(name) name,
  POLYGRAD_OPS(POLYGRAD_X)
#undef POLYGRAD_X
};

const char* op_name(Ops op);

bool is_unary_alu(Ops op);
bool is_binary_alu(Ops op);
bool is_alu(Ops op);          // unary, binary or ternary ALU, CAST and BITCAST included
bool is_commutative(Ops op);  // ADD, MUL, MAX, CMPNE, AND, OR, XOR

}  // namespace polygrad
