#include "core/render/cstyle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/render/cstyle_emitter.h"

namespace polygrad {
namespace {

bool is_half(DType dt) { return dt == DType::Float16 || dt == DType::BFloat16; }

constexpr double kLog2E = 1.4426950408889634, kLn2 = 0.6931471805599453;

// For MUL(x, c) or MUL(c, x) with c a float constant within float rounding of `want`: x.
const UOpRef* scaled_operand(const UOp& mul, double want) {
  if (mul.op != Ops::MUL || !dtype_is_float(mul.dtype)) return nullptr;
  for (int i = 0; i < 2; ++i) {
    const UOp& c = *mul.src[i];
    if (c.op == Ops::CONST && std::holds_alternative<double>(c.arg) &&
        std::abs(c.arg_float() - want) <= 1e-7 * std::abs(want))
      return &mul.src[1 - i];
  }
  return nullptr;
}

// An integer constant equal to `v`.
bool is_int_const(const UOpRef& u, int64_t v) {
  return u->op == Ops::CONST && std::holds_alternative<int64_t>(u->arg) && u->arg_int() == v;
}

// exp(x) as the frontend spells it, exp2(x * +-log2(e)): x, with `negate` for the minus sign.
const UOpRef* natural_exp_arg(const UOp& exp2, bool& negate) {
  if (exp2.op != Ops::EXP2) return nullptr;
  negate = false;
  if (const UOpRef* x = scaled_operand(*exp2.src[0], kLog2E)) return x;
  negate = true;
  return scaled_operand(*exp2.src[0], -kLog2E);
}

// log(x) as the frontend spells it, log2(x) * ln(2): the LOG2 node.
const UOpRef* natural_log_of(const UOp& mul) {
  const UOpRef* l = scaled_operand(mul, kLn2);
  return l != nullptr && (*l)->op == Ops::LOG2 ? l : nullptr;
}

const char* suffix(DType dt) {
  switch (dt) {
    case DType::Int8: return "i8";
    case DType::Int16: return "i16";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::UInt8: return "u8";
    case DType::UInt16: return "u16";
    case DType::UInt32: return "u32";
    default: return "u64";
  }
}

// `v` rounded to float as IEEE does (out of range is infinity; a plain cast would be undefined).
double to_float(double v) {
  if (std::isfinite(v) && std::fabs(v) >= 0x1.ffffffp+127) return std::copysign(HUGE_VAL, v);
  return std::isfinite(v) ? static_cast<double>(static_cast<float>(v)) : v;
}

// Rounds a float-held value to the precision of a 16-bit float dtype.
std::string round_to(DType dt, const std::string& expr) {
  if (dt == DType::Float16) return absl::StrCat("pg_rh(", expr, ")");
  if (dt == DType::BFloat16) return absl::StrCat("pg_rbf(", expr, ")");
  return expr;
}

// Whether the loop opened by k.ops[at] (a RANGE) is innermost (no loop inside) and its body
// calls a math function: exp, log (EXP2, LOG2 and the frontend's spellings of exp and log) or sin.
bool calls_math_innermost(const LinearKernel& k, size_t at) {
  bool math = false;
  for (size_t i = at + 1; i < k.ops.size(); ++i) {
    const Ops op = k.ops[i]->op;
    if (op == Ops::RANGE) return false;
    if (op == Ops::END_RANGE) return math;
    math = math || op == Ops::EXP2 || op == Ops::LOG2 || op == Ops::SIN;
  }
  return false;
}

}  // namespace

const char* CStyleRenderer::scalar_type(DType dt) const { return dtype_c_type(dt); }

std::string CStyleRenderer::value_type(DType dt) const { return is_half(dt) ? "float" : scalar_type(dt); }
std::string CStyleRenderer::storage_type(DType dt) const { return is_half(dt) ? "uint16_t" : scalar_type(dt); }

std::string CStyleRenderer::math_call(const char* fn, DType dt, const std::string& x) const {
  if (dt == DType::Float64) return absl::StrCat(fn, "(", x, ")");
  return absl::StrCat(fn, "f(", x, ")");
}

// Division that never traps: x / 0 is 0, and x / -1 negates in unsigned arithmetic, so INT_MIN / -1
// wraps to INT_MIN without signed overflow (undefined in C and CUDA; NVRTC has no -fwrapv).
std::string CStyleRenderer::divmod_helpers(const char* q) {
  return absl::StrFormat(
      R"(#define PG_SIGNED_DIVMOD(T, N) \
  %s T pg_idiv_##N(T a, T b) { return b == 0 ? (T)0 : (b == (T)-1 ? (T)(0ull - (unsigned long long)a) : (T)(a / b)); } \
  %s T pg_mod_##N(T a, T b) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a %% b); }
#define PG_UNSIGNED_DIVMOD(T, N) \
  %s T pg_idiv_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); } \
  %s T pg_mod_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a %% b); }
PG_SIGNED_DIVMOD(int8_t, i8) PG_SIGNED_DIVMOD(int16_t, i16) PG_SIGNED_DIVMOD(int32_t, i32) PG_SIGNED_DIVMOD(int64_t, i64)
PG_UNSIGNED_DIVMOD(uint8_t, u8) PG_UNSIGNED_DIVMOD(uint16_t, u16) PG_UNSIGNED_DIVMOD(uint32_t, u32) PG_UNSIGNED_DIVMOD(uint64_t, u64)
)",
      q, q, q, q);
}

absl::StatusOr<std::string> CStyleRenderer::Emitter::run(const LinearKernel& k) {
  std::string body;
  int indent = 1;
  auto line = [&](const std::string& s) { absl::StrAppend(&body, std::string(2 * indent, ' '), s, "\n"); };
  skip_absorbed(k);
  const std::vector<int64_t> lanes = t_.lane_ranges(k);
  if (lanes.empty()) plan_staging_for(k);
  if (lanes.empty() && !staging_) plan_panel_for(k);
  int staged_loop_depth = -1;  // open_loops' size inside the staged reduction loop
  const bool warp = !lanes.empty();
  const int group = warp ? t_.group_lanes(k) : 1;
  std::string pending_acc;  // the accumulator whose first loop opens next
  // Per open loop: the accumulator its lanes combine when it closes ("" for other loops).
  std::vector<std::pair<std::string, const UOp*>> open_loops;
  const UOp* pending_reduce = nullptr;
  for (const UOpRef& u : k.ops) {
    const UOp& n = *u;
    if (absorbed_.count(&n) || skipped_.count(static_cast<size_t>(&u - k.ops.data()))) continue;
    switch (n.op) {
      case Ops::CONST:
      case Ops::DEFINE_GLOBAL:
        continue;
      case Ops::RANGE: {
        std::string r = absl::StrCat("r", n.arg_int());
        names_[&n] = r;
        const bool lane = warp && std::find(lanes.begin(), lanes.end(), n.arg_int()) != lanes.end();
        open_loops.emplace_back(lane ? pending_acc : std::string(), lane ? pending_reduce : nullptr);
        pending_acc.clear();
        pending_reduce = nullptr;
        if (!lane && n.arg_int() != k.outer_range_id &&
            std::binary_search(k.upcast_ranges.begin(), k.upcast_ranges.end(), n.arg_int()))
          for (const std::string& l : vector_loads(k, static_cast<size_t>(&u - k.ops.data()))) line(l);
        if (staging_ && static_cast<size_t>(&u - k.ops.data()) == staging_->loop_at) {
          for (const std::string& l : staged_loop_open(r)) line(l);
          ++indent;  // the chunk loop's
          staged_loop_depth = static_cast<int>(open_loops.size());
        } else if (panel_ && static_cast<size_t>(&u - k.ops.data()) == panel_->outer_at) {
          line(t_.panel_array(t_.storage_type(panel_->load->dtype), "pg_panel", panel_->trip * panel_->cols));
          line(t_.outer_loop(r, name(n.src[0])));
          for (const std::string& l : panel_fill(r)) line(absl::StrCat("  ", l));
        } else if (n.arg_int() == k.outer_range_id)
          line(warp ? t_.group_outer_loop(r, name(n.src[0]), group) : t_.outer_loop(r, name(n.src[0])));
        else if (lane)
          line(t_.lane_loop(r, name(n.src[0]), group));
        else {
          if (std::binary_search(k.upcast_ranges.begin(), k.upcast_ranges.end(), n.arg_int()))
            line(calls_math_innermost(k, static_cast<size_t>(&u - k.ops.data()))
                     ? t_.math_lane_pragma(n.src[0]->arg_int())
                     : t_.unroll_pragma(n.src[0]->arg_int()));
          // A loop that may stop early (lower.h) stops at its bound when the bound was computed.
          const bool stops = n.src.size() > 1 && (n.src[1]->op == Ops::CONST || names_.count(n.src[1].get()));
          // One bound, so the loop keeps a single exit the compiler can vectorize.
          std::string end = name(n.src[0]);
          if (stops) {
            line(absl::StrFormat("const int64_t %s_end = %s < %s ? %s : %s;", r, name(n.src[1]), end, name(n.src[1]), end));
            end = absl::StrCat(r, "_end");
          }
          line(absl::StrFormat("for (int64_t %s = 0; %s < %s; %s++) {", r, r, end, r));
        }
        ++indent;
        continue;
      }
      case Ops::END_RANGE: {
        --indent;
        line("}");
        if (static_cast<int>(open_loops.size()) == staged_loop_depth) {  // and the chunk loop around it
          --indent;
          line("}");
          staged_loop_depth = -1;
        }
        auto [acc, red] = open_loops.back();
        open_loops.pop_back();
        if (red != nullptr)
          for (absl::string_view l : absl::StrSplit(t_.group_combine(acc, static_cast<Ops>(red->arg_int()),
                                                                      t_.value_type(red->dtype), group),
                                                     '\n'))
            line(std::string(l));
        continue;
      }
      case Ops::DEFINE_ACC: {
        // A scalar, or an array with one slot per combination of its upcast lanes.
        std::string a = absl::StrCat("acc", n.arg_int());
        const UOp& red = *n.src[0];
        std::string init = reduce_identity(static_cast<Ops>(red.arg_int()), n.dtype);
        if (n.src.size() == 1) {
          line(absl::StrFormat("%s %s = %s;", t_.value_type(n.dtype), a, init));
          names_[&n] = names_[&red] = a;
          pending_acc = a;
          pending_reduce = &red;
          continue;
        }
        int64_t slots = 1;
        std::string index;
        for (size_t i = 1; i < n.src.size(); ++i) {
          int64_t size = n.src[i]->src[0]->arg_int();
          index = index.empty() ? name(n.src[i]) : absl::StrCat("(", index, ")*", size, "+", name(n.src[i]));
          slots *= size;
        }
        line(absl::StrFormat("%s %s[%d];", t_.value_type(n.dtype), a, slots));
        line(t_.unroll_pragma(slots));
        line(absl::StrFormat("for (int i = 0; i < %d; i++) %s[i] = %s;", slots, a, init));
        names_[&n] = names_[&red] = absl::StrCat(a, "[", index, "]");
        continue;
      }
      case Ops::ACCUMULATE: {
        std::string a = name(n.src[0]), v = name(n.src[1]);
        if (static_cast<Ops>(n.arg_int()) == Ops::ADD)
          line(absl::StrFormat("%s = %s + %s;", a, a, v));
        else if (static_cast<Ops>(n.arg_int()) == Ops::MUL)
          line(absl::StrFormat("%s = %s * %s;", a, a, v));
        else if (dtype_is_float(n.src[0]->dtype))  // a NaN, once seen, stays (torch's max)
          line(absl::StrFormat("%s = (%s > %s || %s != %s) ? %s : %s;", a, v, a, v, v, v, a));
        else
          line(absl::StrFormat("%s = %s > %s ? %s : %s;", a, v, a, v, a));
        continue;
      }
      case Ops::STORE: {
        DType dt = n.src[0]->dtype;
        std::string v = is_half(dt) ? half_bits(n.src[2]) : name(n.src[2]);
        line(absl::StrFormat("%s%s[%s] = %s;", warp ? t_.lane_store_guard() : "", name(n.src[0]), name(n.src[1]), v));
        continue;
      }
      default:
        break;
    }
    auto expr = expression(n);
    if (!expr.ok()) return expr.status();
    std::string v = absl::StrCat("v", next_var_++);
    names_[&n] = v;
    line(absl::StrFormat("const %s %s = %s;", t_.value_type(n.dtype), v, *expr));
  }
  return absl::StrCat(t_.prelude(), t_.kernel_open(k), body, "}\n");
}

std::string CStyleRenderer::Emitter::name(const UOpRef& u) { return plain_name(*u); }

std::string CStyleRenderer::Emitter::plain_name(const UOp& u) {
  if (u.op == Ops::CONST) return render_const(u);
  if (u.op == Ops::RANGE) return absl::StrCat("r", u.arg_int());
  if (u.op == Ops::DEFINE_GLOBAL) return absl::StrCat("b", u.arg_int());
  return names_.at(&u);
}

std::string CStyleRenderer::Emitter::render_const(const UOp& c) const {
  DType dt = c.dtype;
  if (dtype_is_float(dt)) {
    double v = std::holds_alternative<double>(c.arg) ? c.arg_float() : static_cast<double>(c.arg_int());
    // Narrower floats hold the value as a float: 1e300 is infinity there, not a literal.
    if (dt != DType::Float64) v = to_float(v);
    std::string lit;
    if (std::isnan(v)) lit = "NAN";
    else if (std::isinf(v)) lit = v > 0 ? "INFINITY" : "(-INFINITY)";
    else if (dt == DType::Float64) lit = absl::StrFormat("%a", v);
    else lit = absl::StrFormat("%af", v);
    if (is_half(dt)) return round_to(dt, lit);
    if (dt == DType::Float64 && (std::isnan(v) || std::isinf(v))) return absl::StrCat("((double)", lit, ")");
    return lit;
  }
  int64_t v = c.arg_int();
  const char* type = t_.scalar_type(dt);
  if (dt == DType::Bool) return v ? "1" : "0";
  if (dtype_is_unsigned(dt)) return absl::StrFormat("((%s)%lluULL)", type, static_cast<unsigned long long>(v));
  if (v == std::numeric_limits<int64_t>::min()) return absl::StrCat("((", type, ")(-9223372036854775807LL-1))");
  return absl::StrFormat("((%s)%lldLL)", type, static_cast<long long>(v));
}

std::string CStyleRenderer::Emitter::reduce_identity(Ops op, DType dt) const {
  if (op == Ops::ADD) return dt == DType::Bool ? "0" : absl::StrCat("((", t_.value_type(dt), ")0)");
  if (op == Ops::MUL) return dt == DType::Bool ? "1" : absl::StrCat("((", t_.value_type(dt), ")1)");
  if (dtype_is_float(dt)) return dt == DType::Float64 ? "(-(double)INFINITY)" : "(-INFINITY)";
  switch (dt) {
    case DType::Bool: return "0";
    case DType::Int8: return "((int8_t)-128)";
    case DType::Int16: return "((int16_t)-32768)";
    case DType::Int32: return "((int32_t)(-2147483647-1))";
    case DType::Int64: return "((int64_t)(-9223372036854775807LL-1))";
    default: return absl::StrCat("((", t_.scalar_type(dt), ")0)");
  }
}

absl::StatusOr<std::string> CStyleRenderer::Emitter::expression(const UOp& n) {
  auto e = raw_expression(n);
  // A loaded or bitcast 16-bit value is a 16-bit value already.
  if (!e.ok() || !is_half(n.dtype) || n.op == Ops::LOAD || n.op == Ops::BITCAST) return e;
  return round_to(n.dtype, *e);
}

// The bits of a 16-bit float node as a uint16_t expression. A loaded or bitcast value is
// taken from memory or from its integer source, so any bit pattern, a NaN's payload
// included, survives copies and bitcasts; only a computed value is converted from its float
// (pg_f2h gives every NaN the one quiet payload, as arithmetic would anyway).
std::string CStyleRenderer::Emitter::half_bits(const UOpRef& u) {
  const UOp& n = *u;
  if (n.op == Ops::LOAD) {
    std::string v = absl::StrFormat("%s[%s]", name(n.src[0]), name(n.src[1]));
    return n.src.size() == 3 ? absl::StrFormat("(%s ? %s : (uint16_t)0)", name(n.src[2]), v) : v;
  }
  if (n.op == Ops::BITCAST) {
    const UOpRef& x = n.src[0];
    return is_half(x->dtype) ? half_bits(x) : absl::StrCat("((uint16_t)", name(x), ")");
  }
  return absl::StrCat(n.dtype == DType::Float16 ? "pg_f2h(" : "pg_f2bf(", name(u), ")");
}

// x's bits read as dt, a type of the same size. The 4- and 8-byte helpers pg_f2u/pg_u2f and
// pg_d2u/pg_u2d are the target's (memcpy in C, the reinterpreting intrinsics in CUDA).
std::string CStyleRenderer::Emitter::bitcast(const UOpRef& x, DType dt) {
  DType from = x->dtype;
  if (is_half(from) || is_half(dt)) {
    std::string bits = is_half(from) ? half_bits(x) : absl::StrCat("((uint16_t)", name(x), ")");
    if (dt == DType::Float16) return absl::StrCat("pg_h2f(", bits, ")");
    if (dt == DType::BFloat16) return absl::StrCat("pg_bf2f(", bits, ")");
    return absl::StrFormat("((%s)%s)", t_.value_type(dt), bits);
  }
  bool wide = dtype_itemsize(dt) == 8;
  if (dtype_is_float(dt))
    return absl::StrFormat("%s((%s)%s)", wide ? "pg_u2d" : "pg_u2f", wide ? "uint64_t" : "uint32_t", name(x));
  return absl::StrFormat("((%s)%s(%s))", t_.value_type(dt), wide ? "pg_d2u" : "pg_f2u", name(x));
}

absl::StatusOr<std::string> CStyleRenderer::Emitter::raw_expression(const UOp& n) {
  DType dt = n.dtype;
  auto a = [&](size_t i) { return name(n.src[i]); };
  switch (n.op) {
    case Ops::LOAD: {
      auto vec = vector_lane_.find(&n);
      auto staged = staged_element_.find(&n);
      std::string v = vec != vector_lane_.end()       ? vec->second
                      : staged != staged_element_.end() ? staged->second
                                                        : absl::StrFormat("%s[%s]", a(0), a(1));
      if (dt == DType::Float16) v = absl::StrCat("pg_h2f(", v, ")");
      if (dt == DType::BFloat16) v = absl::StrCat("pg_bf2f(", v, ")");
      if (n.src.size() == 3) return absl::StrFormat("(%s ? %s : (%s)0)", a(2), v, t_.value_type(dt));
      return v;
    }
    case Ops::NEG: return t_.negate(dt, a(0));
    case Ops::NOT: return absl::StrCat("(!", a(0), ")");
    case Ops::EXP2: {
      // exp2(x * log2(e)) is how the frontend spells exp(x): render it as exp(x), which is
      // one rounding more accurate and which vector math libraries (libmvec) provide.
      bool negate = false;
      if (const UOpRef* x = natural_exp_arg(n, negate))
        return t_.math_call("exp", dt, negate ? t_.negate(dt, name(*x)) : name(*x));
      return t_.math_call("exp2", dt, a(0));
    }
    case Ops::LOG2: return t_.math_call("log2", dt, a(0));
    case Ops::SQRT: return t_.math_call("sqrt", dt, a(0));
    case Ops::SIN: return t_.math_call("sin", dt, a(0));
    case Ops::RECIP: return absl::StrFormat("((%s)1 / %s)", t_.value_type(dt), a(0));
    case Ops::CAST: return absl::StrFormat("((%s)%s)", t_.value_type(dt), a(0));
    case Ops::BITCAST: return bitcast(n.src[0], dt);
    case Ops::ADD: return absl::StrFormat("(%s + %s)", a(0), a(1));
    case Ops::SUB:
      if (dtype_is_int(dt) && is_int_const(n.src[0], 0)) return t_.negate(dt, a(1));
      return absl::StrFormat("(%s - %s)", a(0), a(1));
    case Ops::MUL:
      // log2(x) * ln(2) is the frontend's log(x); see EXP2.
      if (const UOpRef* l = natural_log_of(n)) return t_.math_call("log", dt, name((*l)->src[0]));
      if (dtype_is_int(dt) && is_int_const(n.src[1], -1)) return t_.negate(dt, a(0));
      if (dtype_is_int(dt) && is_int_const(n.src[0], -1)) return t_.negate(dt, a(1));
      return absl::StrFormat("(%s * %s)", a(0), a(1));
    case Ops::FDIV: return absl::StrFormat("(%s / %s)", a(0), a(1));
    case Ops::IDIV:
    case Ops::MOD: {
      // Index arithmetic divides by positive constants; anything else goes through the guard.
      const UOpRef& d = n.src[1];
      bool safe = d->op == Ops::CONST && d->arg_int() > 0;
      if (safe) return absl::StrFormat("(%s %s %s)", a(0), n.op == Ops::IDIV ? "/" : "%", a(1));
      return absl::StrFormat("pg_%s_%s(%s, %s)", n.op == Ops::IDIV ? "idiv" : "mod", suffix(dt), a(0), a(1));
    }
    case Ops::MAX:
      // A NaN on either side wins, as in torch (max, maximum, clip, a reduction's accumulator);
      // a bare "a > b ? a : b" drops a NaN on the left.
      if (dtype_is_float(dt))
        return absl::StrFormat("((%s > %s || %s != %s) ? %s : %s)", a(0), a(1), a(0), a(0), a(0), a(1));
      return absl::StrFormat("(%s > %s ? %s : %s)", a(0), a(1), a(0), a(1));
    case Ops::CMPLT: return absl::StrFormat("(%s < %s)", a(0), a(1));
    case Ops::CMPNE: return absl::StrFormat("(%s != %s)", a(0), a(1));
    case Ops::AND: return absl::StrFormat("(%s & %s)", a(0), a(1));
    case Ops::OR: return absl::StrFormat("(%s | %s)", a(0), a(1));
    case Ops::XOR: return absl::StrFormat("(%s ^ %s)", a(0), a(1));
    case Ops::WHERE: return absl::StrFormat("(%s ? %s : %s)", a(0), a(1), a(2));
    default:
      return absl::InternalError(absl::StrCat("the C-style renderer has no rule for ", op_name(n.op)));
  }
}

void CStyleRenderer::Emitter::skip_absorbed(const LinearKernel& k) {
  std::unordered_map<const UOp*, int> uses, absorbed_uses;
  auto wants_bits = [&](const UOpRef& v) {
    if (is_half(v->dtype) && (v->op == Ops::LOAD || v->op == Ops::BITCAST)) ++absorbed_uses[v.get()];
  };
  for (const UOpRef& u : k.ops) {
    for (const UOpRef& s : u->src) ++uses[s.get()];
    bool negate = false;
    if (natural_exp_arg(*u, negate) != nullptr) ++absorbed_uses[u->src[0].get()];
    if (const UOpRef* l = natural_log_of(*u)) ++absorbed_uses[l->get()];
    if (u->op == Ops::STORE) wants_bits(u->src[2]);
    if (u->op == Ops::BITCAST && is_half(u->src[0]->dtype)) wants_bits(u->src[0]);
  }
  for (auto [n, count] : absorbed_uses)
    if (count == uses[n]) absorbed_.insert(n);
}

absl::StatusOr<std::string> CStyleRenderer::render(const LinearKernel& kernel) const {
  return Emitter(*this).run(kernel);
}

}  // namespace polygrad
