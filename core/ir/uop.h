// UOp: the one IR node type, immutable and hash-consed. Two UOps built from the same
// (op, dtype, src, arg, shape) are the same object, so pointer equality is structural equality
// and a rewrite that changes nothing returns the very node it was given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/ops.h"

namespace polygrad {

using Shape = std::vector<int64_t>;

struct ReduceArg {
  Ops op;                     // ADD or MAX
  std::vector<int64_t> axes;  // sorted, unique
  bool operator==(const ReduceArg&) const = default;
};

// CONST values: integers and bools as int64 (uint64 as its bit pattern), floats as double.
// Movement parameters as int64 lists (PAD/SHRINK flattened as begin0, end0, begin1, ...).
using Arg = std::variant<std::monostate, int64_t, double, std::vector<int64_t>, ReduceArg>;

struct UOp;
using UOpRef = std::shared_ptr<const UOp>;

struct UOp {
  Ops op;
  DType dtype;
  std::vector<UOpRef> src;
  Arg arg;
  Shape shape;     // tensor-level nodes only; empty for scalars and kernel-level nodes
  uint64_t hash;   // stable structural hash: equal across processes for equal graphs
  // Tensor-level nodes with a symbolic dim: per axis its extent (a 0-d int32 tensor), null for a
  // concrete axis; empty when every axis is concrete. Derived from the other fields, so equal
  // nodes agree (core/ir/symbolic_dims.h).
  std::vector<UOpRef> extents;

  ~UOp();

  int64_t arg_int() const { return std::get<int64_t>(arg); }
  double arg_float() const { return std::get<double>(arg); }
  const std::vector<int64_t>& arg_ints() const { return std::get<std::vector<int64_t>>(arg); }
  const ReduceArg& arg_reduce() const { return std::get<ReduceArg>(arg); }
  int64_t numel() const;
  std::string str() const;  // one-line debug form: op, dtype, shape, arg
};

// The node factory: returns the existing node when an equal one is alive. Thread-safe.
UOpRef uop(Ops op, DType dtype, std::vector<UOpRef> src = {}, Arg arg = {}, Shape shape = {});

// Integer constant of the index dtype, and typed constants.
UOpRef const_int(int64_t v, DType dt = kIndexDType);
UOpRef const_float(double v, DType dt);
// A constant of dtype `dt` holding `v` converted the way C converts it.
UOpRef const_like(DType dt, double v);

// Post-order (sources before users) list of the nodes reachable from `roots`, each once.
std::vector<const UOp*> toposort(const std::vector<UOpRef>& roots);

// Whether `target` is `root` or one of its sources, however deep.
bool reaches(const UOpRef& root, const UOp* target);

}  // namespace polygrad
