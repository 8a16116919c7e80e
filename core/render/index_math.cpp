#include "core/render/index_math.h"

namespace polygrad {
namespace {

bool positive_const(const UOp& u) { return u.op == Ops::CONST && !dtype_is_float(u.dtype) && u.arg_int() > 0; }

}  // namespace

bool index_ranges(const UOp& u, std::set<int64_t>& ranges) {
  if (dtype_is_float(u.dtype)) return false;
  switch (u.op) {
    case Ops::CONST: return true;
    case Ops::RANGE: ranges.insert(u.arg_int()); return true;
    case Ops::IDIV:
    case Ops::MOD:
      if (!positive_const(*u.src[1])) return false;
      return index_ranges(*u.src[0], ranges);
    case Ops::ADD:
    case Ops::SUB:
    case Ops::MUL: return index_ranges(*u.src[0], ranges) && index_ranges(*u.src[1], ranges);
    default: return false;
  }
}

std::optional<int64_t> evaluate_index(const UOp& u, const std::function<int64_t(int64_t)>& range) {
  if (u.op == Ops::CONST) return u.arg_int();
  if (u.op == Ops::RANGE) return range(u.arg_int());
  if (u.src.size() != 2) return std::nullopt;
  auto a = evaluate_index(*u.src[0], range), b = evaluate_index(*u.src[1], range);
  if (!a || !b) return std::nullopt;
  switch (u.op) {
    case Ops::ADD: return *a + *b;
    case Ops::SUB: return *a - *b;
    case Ops::MUL: return *a * *b;
    case Ops::IDIV: return *b == 0 ? std::nullopt : std::optional<int64_t>(*a / *b);
    case Ops::MOD: return *b == 0 ? std::nullopt : std::optional<int64_t>(*a % *b);
    default: return std::nullopt;
  }
}

}  // namespace polygrad
