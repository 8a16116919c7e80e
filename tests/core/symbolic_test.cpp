// Symbolic simplification must never change a value: random integer index expressions are
// evaluated before and after simplification at random variable values.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <unordered_map>

#include "core/codegen/lower.h"
#include "core/frontend/tensor_ops.h"
#include "core/ir/symbolic.h"
#include "core/ir/wide_int.h"

namespace polygrad {
namespace {

using Env = std::unordered_map<int64_t, int64_t>;  // RANGE id -> value

int64_t eval(const UOpRef& x, const Env& env) {
  auto e = [&](size_t i) { return eval(x->src[i], env); };
  switch (x->op) {
    case Ops::CONST: return x->arg_int();
    case Ops::RANGE: return env.at(x->arg_int());
    case Ops::ADD: return e(0) + e(1);
    case Ops::SUB: return e(0) - e(1);
    case Ops::NEG: return -e(0);
    case Ops::MUL: return e(0) * e(1);
    case Ops::IDIV: return e(0) / e(1);
    case Ops::MOD: return e(0) % e(1);
    case Ops::MAX: return std::max(e(0), e(1));
    case Ops::CMPLT: return e(0) < e(1);
    case Ops::CMPNE: return e(0) != e(1);
    case Ops::AND: return e(0) & e(1);
    case Ops::OR: return e(0) | e(1);
    case Ops::WHERE: return e(0) ? e(1) : e(2);
    default: ADD_FAILURE() << "cannot evaluate " << x->str(); return 0;
  }
}

class ExprGen {
 public:
  explicit ExprGen(uint64_t seed) : rng_(seed) {}

  UOpRef var() {
    int64_t id = pick(0, 3);
    return uop(Ops::RANGE, kIndexDType, {const_int(ends_[id])}, id);
  }

  UOpRef expr(int depth) {
    if (depth == 0 || pick(0, 4) == 0) return pick(0, 3) == 0 ? const_int(pick(-8, 20)) : var();
    switch (pick(0, 9)) {
      case 0: case 1: return uop(Ops::ADD, kIndexDType, {expr(depth - 1), expr(depth - 1)});
      case 2: return uop(Ops::SUB, kIndexDType, {expr(depth - 1), expr(depth - 1)});
      case 3: case 4: return uop(Ops::MUL, kIndexDType, {expr(depth - 1), const_int(pick(-3, 9))});
      case 5: case 6: return uop(Ops::IDIV, kIndexDType, {expr(depth - 1), const_int(pick(1, 12))});
      case 7: case 8: return uop(Ops::MOD, kIndexDType, {expr(depth - 1), const_int(pick(1, 12))});
      default: {
        UOpRef c = uop(Ops::CMPLT, DType::Bool, {expr(depth - 1), expr(depth - 1)});
        return uop(Ops::WHERE, kIndexDType, {c, expr(depth - 1), expr(depth - 1)});
      }
    }
  }

  void new_ranges() {
    for (auto& e : ends_) e = pick(1, 40);
  }
  Env env() {
    Env env;
    for (int64_t id = 0; id < 4; ++id) env[id] = pick(0, ends_[id] - 1);
    return env;
  }
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

 private:
  std::mt19937_64 rng_;
  int64_t ends_[4] = {1, 1, 1, 1};
};

TEST(Symbolic, RandomExpressionsKeepTheirValue) {
  ExprGen gen(1234);
  int64_t cases = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    gen.new_ranges();
    UOpRef before = gen.expr(5);
    UOpRef after = graph_rewrite(before, symbolic());
    for (int k = 0; k < 25; ++k, ++cases) {
      Env env = gen.env();
      ASSERT_EQ(eval(before, env), eval(after, env)) << "before: " << before->str() << "\nafter: " << after->str();
    }
  }
  EXPECT_GE(cases, 100000);
}

TEST(Symbolic, RewriteIsIdempotent) {
  ExprGen gen(99);
  for (int trial = 0; trial < 2000; ++trial) {
    gen.new_ranges();
    UOpRef once = graph_rewrite(gen.expr(5), symbolic());
    EXPECT_EQ(graph_rewrite(once, symbolic()).get(), once.get());
  }
}

TEST(Symbolic, DivModOfAffineIndexFold) {
  UOpRef i = uop(Ops::RANGE, kIndexDType, {const_int(4)}, int64_t{0});
  UOpRef j = uop(Ops::RANGE, kIndexDType, {const_int(6)}, int64_t{1});
  UOpRef flat = uop(Ops::ADD, kIndexDType, {uop(Ops::MUL, kIndexDType, {i, const_int(6)}), j});
  EXPECT_EQ(graph_rewrite(uop(Ops::IDIV, kIndexDType, {flat, const_int(6)}), symbolic()).get(), i.get());
  EXPECT_EQ(graph_rewrite(uop(Ops::MOD, kIndexDType, {flat, const_int(6)}), symbolic()).get(), j.get());
  Bounds b = bounds(flat);
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 23);
}

std::string show(const UOpRef& x) {
  auto b = [&](const char* op) { return "(" + show(x->src[0]) + op + show(x->src[1]) + ")"; };
  switch (x->op) {
    case Ops::CONST: return std::holds_alternative<int64_t>(x->arg) ? std::to_string(x->arg_int()) : "c";
    case Ops::RANGE: return "r" + std::to_string(x->arg_int());
    case Ops::ADD: return b(" + ");
    case Ops::MUL: return b("*");
    case Ops::IDIV: return b("//");
    case Ops::MOD: return b("%");
    case Ops::SUB: return b(" - ");
    default: {
      std::string s = std::string(op_name(x->op)) + "(";
      for (const auto& c : x->src) s += show(c) + ", ";
      return s + ")";
    }
  }
}

// Whether evaluating x at env leaves int64 anywhere inside it (the generated C's undefined behaviour).
bool overflows(const UOpRef& x, const Env& env, i128& value) {
  i128 v[3] = {0, 0, 0};
  for (size_t i = 0; i < x->src.size() && x->op != Ops::RANGE; ++i)
    if (overflows(x->src[i], env, v[i])) return true;
  switch (x->op) {
    case Ops::CONST: value = x->arg_int(); break;
    case Ops::RANGE: value = env.at(x->arg_int()); break;
    case Ops::ADD: value = v[0] + v[1]; break;
    case Ops::MUL: value = v[0] * v[1]; break;
    default: ADD_FAILURE() << "unexpected " << x->str(); return true;
  }
  return value < std::numeric_limits<int64_t>::min() || value > std::numeric_limits<int64_t>::max();
}

TEST(Symbolic, ReorderingASumNeverCreatesAnOverflow) {
  // (v*2^62 + -2^62) + w*2^62 stays within int64 for v, w in {0, 1}; its canonical order
  // v*2^62 + w*2^62 + -2^62 does not (2^63 at v = w = 1), so the sum must keep its order.
  UOpRef v = uop(Ops::RANGE, kIndexDType, {const_int(2)}, int64_t{0});
  UOpRef w = uop(Ops::RANGE, kIndexDType, {const_int(2)}, int64_t{1});
  const int64_t big = int64_t{1} << 62;
  auto scaled = [&](const UOpRef& x) { return uop(Ops::MUL, kIndexDType, {x, const_int(big)}); };
  for (bool v_first : {true, false}) {
    UOpRef a = scaled(v_first ? v : w), b = scaled(v_first ? w : v);
    UOpRef before = uop(Ops::ADD, kIndexDType, {uop(Ops::ADD, kIndexDType, {a, const_int(-big)}), b});
    UOpRef after = graph_rewrite(before, symbolic());
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        i128 want = 0, got = 0;
        ASSERT_FALSE(overflows(before, {{0, i}, {1, j}}, want));
        ASSERT_FALSE(overflows(after, {{0, i}, {1, j}}, got)) << "after: " << show(after);
        EXPECT_TRUE(want == got);
      }
  }
}

int count_divmod(const UOpRef& root) {
  int n = 0;
  for (const UOp* u : toposort({root})) n += u->op == Ops::IDIV || u->op == Ops::MOD;
  return n;
}

TEST(Symbolic, ContiguousReshapeChainsLeaveNoDivMod) {
  UOpRef x = *frontend::buffer(1, DType::Float32, {4, 6, 5});
  UOpRef v = *frontend::reshape(x, {24, 5});
  v = *frontend::reshape(v, {2, 12, 5});
  v = *frontend::reshape(v, {120});
  v = *frontend::reshape(v, {4, 30});
  v = *frontend::alu(Ops::NEG, {v});
  auto ast = lower_kernel(v, [&](const UOp* n) { return n == x.get() || n == v.get(); });
  ASSERT_TRUE(ast.ok()) << ast.status();
  UOpRef simple = graph_rewrite(ast->sink, symbolic());
  EXPECT_EQ(count_divmod(simple), 0) << show(simple);
}

TEST(Symbolic, PermutedReshapeKeepsOnlyTheNecessaryDivMod) {
  // (4,6,5) -> permute -> (4,5,6) -> reshape (4,30): the source index is
  // r0*30 + (r1 % 6)*5 + r1 // 6, which needs exactly one division and one modulo.
  UOpRef x = *frontend::buffer(1, DType::Float32, {4, 6, 5});
  UOpRef v = *frontend::reshape(*frontend::permute(x, {0, 2, 1}), {4, 30});
  v = *frontend::alu(Ops::NEG, {v});
  auto ast = lower_kernel(v, [&](const UOp* n) { return n == x.get() || n == v.get(); });
  ASSERT_TRUE(ast.ok()) << ast.status();
  UOpRef before = ast->sink, after = graph_rewrite(before, symbolic());
  EXPECT_GT(count_divmod(before), 2);
  EXPECT_EQ(count_divmod(after), 2) << show(after);
  // And the simplified load index is still the permuted one, everywhere.
  auto load_index = [](const UOpRef& sink) {
    for (const UOp* u : toposort({sink}))
      if (u->op == Ops::LOAD) return u->src[1];
    return UOpRef();
  };
  for (int64_t r0 = 0; r0 < 4; ++r0)
    for (int64_t r1 = 0; r1 < 30; ++r1) {
      Env env{{0, r0}, {1, r1}};
      EXPECT_EQ(eval(load_index(after), env), r0 * 30 + (r1 % 6) * 5 + r1 / 6);
      EXPECT_EQ(eval(load_index(before), env), eval(load_index(after), env));
    }
}

}  // namespace
}  // namespace polygrad
