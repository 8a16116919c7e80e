#include "core/ir/ops.h"

#include <array>
#include <cstddef>

namespace polygrad {

const char* op_name(Ops op) {
  static constexpr std::array kNames = {
#define POLYGRAD_X(name) #name,
      POLYGRAD_OPS(POLYGRAD_X)
#undef POLYGRAD_X
  };
  return kNames[static_cast<size_t>(op)];
}

bool is_unary_alu(Ops op) {
  switch (op) {
    case Ops::NEG: case Ops::EXP2: case Ops::LOG2: case Ops::SQRT: case Ops::RECIP:
    case Ops::SIN: case Ops::CAST: case Ops::BITCAST: case Ops::NOT:
      return true;
    default:
      return false;
  }
}

bool is_binary_alu(Ops op) {
  switch (op) {
    case Ops::ADD: case Ops::SUB: case Ops::MUL: case Ops::FDIV: case Ops::IDIV: case Ops::MOD:
    case Ops::MAX: case Ops::CMPLT: case Ops::CMPNE: case Ops::AND: case Ops::OR: case Ops::XOR:
      return true;
    default:
      return false;
  }
}

bool is_alu(Ops op) { return is_unary_alu(op) || is_binary_alu(op) || op == Ops::WHERE; }

bool is_commutative(Ops op) {
  switch (op) {
    case Ops::ADD: case Ops::MUL: case Ops::MAX: case Ops::CMPNE: case Ops::AND: case Ops::OR:
    case Ops::XOR:
      return true;
    default:
      return false;
  }
}

}  // namespace polygrad
