// The symbolic simplifier of index arithmetic (core/ir/symbolic.h): an integer expression over
// four RANGE variables with bounded ends, built from the input, is simplified and both are
// evaluated at points of the variables' ranges (the corners and points from the input).
// Invariants: no crash or sanitizer report; wherever the original evaluates without overflow
// or division by zero, the simplified one gives the same value (with C's truncating / and %),
// and simplifying it again changes nothing.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "core/ir/pattern.h"
#include "core/ir/symbolic.h"
#include "core/ir/wide_int.h"
#include "fuzz/fuzz_check.h"

using namespace polygrad;

namespace {

constexpr int kVars = 4;
using Point = std::array<int64_t, kVars>;

class Builder {
 public:
  explicit Builder(FuzzedDataProvider& in) : in_(in) {
    for (int64_t& e : ends_) e = in_.ConsumeIntegralInRange<int64_t>(1, 48);
  }
  const std::array<int64_t, kVars>& ends() const { return ends_; }

  UOpRef index(int depth) {
    if (depth == 0 || in_.remaining_bytes() == 0) return leaf();
    const UOpRef a = index(depth - 1);
    switch (in_.ConsumeIntegralInRange<int>(0, 10)) {
      case 0: return leaf();
      case 1: return uop(Ops::ADD, kIndexDType, {a, index(depth - 1)});
      case 2: return uop(Ops::SUB, kIndexDType, {a, index(depth - 1)});
      case 3: return uop(Ops::NEG, kIndexDType, {a});
      case 4: return uop(Ops::MUL, kIndexDType, {a, in_.ConsumeBool() ? small() : index(depth - 1)});
      case 5: return uop(Ops::IDIV, kIndexDType, {a, in_.ConsumeBool() ? small() : index(depth - 1)});
      case 6: return uop(Ops::MOD, kIndexDType, {a, in_.ConsumeBool() ? small() : index(depth - 1)});
      case 7: return uop(Ops::MAX, kIndexDType, {a, index(depth - 1)});
      default: return uop(Ops::WHERE, kIndexDType, {condition(depth - 1), a, index(depth - 1)});
    }
  }

 private:
  UOpRef small() { return const_int(in_.ConsumeIntegralInRange<int64_t>(-16, 64)); }
  UOpRef leaf() {
    if (in_.ConsumeBool()) return small();
    const int64_t v = in_.ConsumeIntegralInRange<int64_t>(0, kVars - 1);
    return uop(Ops::RANGE, kIndexDType, {const_int(ends_[v])}, v);
  }
  UOpRef condition(int depth) {
    switch (in_.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: return uop(Ops::CMPLT, DType::Bool, {index(depth), index(depth)});
      case 1: return uop(Ops::CMPNE, DType::Bool, {index(depth), index(depth)});
      case 2: return uop(Ops::AND, DType::Bool, {condition(depth / 2), condition(depth / 2)});
      case 3: return uop(Ops::OR, DType::Bool, {condition(depth / 2), condition(depth / 2)});
      default: return uop(Ops::NOT, DType::Bool, {condition(depth / 2)});
    }
  }

  FuzzedDataProvider& in_;
  std::array<int64_t, kVars> ends_{};
};

// The whole expression, for the crash report (UOp::str shows one node).
std::string show(const UOpRef& x) {
  if (x->op == Ops::CONST) return std::to_string(x->arg_int());
  if (x->op == Ops::RANGE) return "v" + std::to_string(x->arg_int());
  std::string out = std::string(op_name(x->op)) + "(";
  for (size_t i = 0; i < x->src.size(); ++i) out += (i ? ", " : "") + show(x->src[i]);
  return out + ")";
}

// The value at `at`, as the rendered C code computes it; nullopt where that is undefined
// (overflow, division by zero), where the two expressions need not agree.
std::optional<i128> eval(const UOpRef& x, const Point& at) {
  std::array<i128, 3> v{};
  for (size_t i = 0; i < x->src.size() && i < 3; ++i) {
    if (x->op == Ops::RANGE) break;
    std::optional<i128> s = eval(x->src[i], at);
    if (!s) return std::nullopt;
    v[i] = *s;
  }
  i128 r;
  switch (x->op) {
    case Ops::CONST: r = x->arg_int(); break;
    case Ops::RANGE: r = at[static_cast<size_t>(x->arg_int())]; break;
    case Ops::ADD: r = v[0] + v[1]; break;
    case Ops::SUB: r = v[0] - v[1]; break;
    case Ops::NEG: r = -v[0]; break;
    case Ops::MUL: r = v[0] * v[1]; break;  // both within int64: exact in 128 bits
    case Ops::IDIV: if (v[1] == 0) return std::nullopt; r = v[0] / v[1]; break;
    case Ops::MOD: if (v[1] == 0) return std::nullopt; r = v[0] % v[1]; break;
    case Ops::MAX: r = v[0] > v[1] ? v[0] : v[1]; break;
    case Ops::CMPLT: r = v[0] < v[1]; break;
    case Ops::CMPNE: r = v[0] != v[1]; break;
    case Ops::AND: r = v[0] & v[1]; break;
    case Ops::OR: r = v[0] | v[1]; break;
    case Ops::NOT: r = !v[0]; break;
    case Ops::WHERE: r = v[0] ? v[1] : v[2]; break;
    default: fuzz::fail("the simplifier made an op the evaluator does not know: " + show(x));
  }
  if (r < std::numeric_limits<int64_t>::min() || r > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Builder build(in);
  const UOpRef before = build.index(6);
  const UOpRef after = graph_rewrite(before, symbolic());
  if (graph_rewrite(after, symbolic()) != after) fuzz::fail("simplifying twice changed it again: " + show(after));

  // Every corner of the ranges, then points from the input.
  std::array<int64_t, kVars> ends = build.ends();
  auto compare = [&](const Point& at) {
    std::optional<i128> want = eval(before, at);
    if (!want) return;
    std::optional<i128> got = eval(after, at);
    if (got == want) return;
    std::string where;
    for (int64_t a : at) where += std::to_string(a) + " ";
    fuzz::fail("the value changed at (" + where + "): before " + show(before) + "\nafter " + show(after));
  };
  for (int corner = 0; corner < (1 << kVars); ++corner) {
    Point at;
    for (int v = 0; v < kVars; ++v) at[v] = (corner >> v & 1) ? ends[v] - 1 : 0;
    compare(at);
  }
  for (int k = 0; k < 16 && in.remaining_bytes() > 0; ++k) {
    Point at;
    for (int v = 0; v < kVars; ++v) at[v] = in.ConsumeIntegralInRange<int64_t>(0, ends[v] - 1);
    compare(at);
  }
  return 0;
}
