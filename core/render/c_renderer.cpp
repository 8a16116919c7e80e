#include "core/render/c_renderer.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace polygrad {
namespace {

// Division and modulo of client data: division by zero yields 0 and INT_MIN / -1 wraps, instead
// of trapping (a client's graph must never bring the daemon's worker down).
constexpr const char* kPrelude = R"(#include <stdint.h>
#include <string.h>
#include <math.h>
/* float16 and bfloat16 are stored as their bits and computed in float, rounded back to the
   element type after every operation; round-to-nearest-even, IEEE special values kept. */
static inline float pg_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
  if (e == 0) { float v = (float)m * 0x1p-24f; return s ? -v : v; }
  f = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float out; memcpy(&out, &f, 4); return out;
}
static inline uint16_t pg_f2h(float x) {
  uint32_t f; memcpy(&f, &x, 4);
  uint32_t s = (f >> 16) & 0x8000u, m = f & 0x7fffffu; int32_t be = (int32_t)((f >> 23) & 0xffu);
  if (be == 0xff) return (uint16_t)(s | 0x7c00u | (m ? 0x200u : 0u));
  int32_t e = be - 127 + 15;
  if (e >= 31) return (uint16_t)(s | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)s;
    m |= 0x800000u; uint32_t shift = (uint32_t)(14 - e), hm = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (hm & 1u))) hm++;
    return (uint16_t)(s | hm);
  }
  uint32_t out = s | ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) out++;
  return (uint16_t)out;
}
static inline float pg_bf2f(uint16_t b) { uint32_t f = (uint32_t)b << 16; float o; memcpy(&o, &f, 4); return o; }
static inline uint16_t pg_f2bf(float x) {
  uint32_t f; memcpy(&f, &x, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x40u);
  f += 0x7fffu + ((f >> 16) & 1u); return (uint16_t)(f >> 16);
}
static inline float pg_rh(float x) { return pg_h2f(pg_f2h(x)); }
static inline float pg_rbf(float x) { return pg_bf2f(pg_f2bf(x)); }
#define PG_SIGNED_DIVMOD(T, N) \
  static inline T pg_idiv_##N(T a, T b) { return b == 0 ? (T)0 : (b == (T)-1 ? (T)(0 - a) : (T)(a / b)); } \
  static inline T pg_mod_##N(T a, T b) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a % b); }
#define PG_UNSIGNED_DIVMOD(T, N) \
  static inline T pg_idiv_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); } \
  static inline T pg_mod_##N(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
PG_SIGNED_DIVMOD(int8_t, i8) PG_SIGNED_DIVMOD(int16_t, i16) PG_SIGNED_DIVMOD(int32_t, i32) PG_SIGNED_DIVMOD(int64_t, i64)
PG_UNSIGNED_DIVMOD(uint8_t, u8) PG_UNSIGNED_DIVMOD(uint16_t, u16) PG_UNSIGNED_DIVMOD(uint32_t, u32) PG_UNSIGNED_DIVMOD(uint64_t, u64)
)";

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

bool is_half(DType dt) { return dt == DType::Float16 || dt == DType::BFloat16; }

// How a dtype is held in memory, and in a C variable.
const char* storage_type(DType dt) { return is_half(dt) ? "uint16_t" : dtype_c_type(dt); }
const char* value_type(DType dt) { return is_half(dt) ? "float" : dtype_c_type(dt); }

// Rounds a float-held value to the precision of a 16-bit float dtype.
std::string round_to(DType dt, const std::string& expr) {
  if (dt == DType::Float16) return absl::StrCat("pg_rh(", expr, ")");
  if (dt == DType::BFloat16) return absl::StrCat("pg_rbf(", expr, ")");
  return expr;
}

std::string render_const(const UOp& c) {
  DType dt = c.dtype;
  if (dtype_is_float(dt)) {
    double v = std::holds_alternative<double>(c.arg) ? c.arg_float() : static_cast<double>(c.arg_int());
    std::string lit;
    if (std::isnan(v)) lit = "NAN";
    else if (std::isinf(v)) lit = v > 0 ? "INFINITY" : "(-INFINITY)";
    else if (dt == DType::Float64) lit = absl::StrFormat("%a", v);
    else lit = absl::StrFormat("%af", static_cast<double>(static_cast<float>(v)));
    if (is_half(dt)) return round_to(dt, lit);
    if (dt == DType::Float64 && (std::isnan(v) || std::isinf(v))) return absl::StrCat("((double)", lit, ")");
    return lit;
  }
  int64_t v = c.arg_int();
  if (dt == DType::Bool) return v ? "1" : "0";
  if (dtype_is_unsigned(dt)) return absl::StrFormat("((%s)%lluULL)", dtype_c_type(dt), static_cast<unsigned long long>(v));
  if (v == std::numeric_limits<int64_t>::min()) return absl::StrCat("((", dtype_c_type(dt), ")(-9223372036854775807LL-1))");
  return absl::StrFormat("((%s)%lldLL)", dtype_c_type(dt), static_cast<long long>(v));
}

// Math functions by float width; half precision computes in float.
std::string math_call(const char* fn, DType dt, const std::string& x) {
  if (dt == DType::Float64) return absl::StrCat(fn, "(", x, ")");
  return absl::StrCat(fn, "f(", x, ")");
}

std::string reduce_identity(Ops op, DType dt) {
  if (op == Ops::ADD) return dt == DType::Bool ? "0" : absl::StrCat("((", value_type(dt), ")0)");
  if (dtype_is_float(dt)) return dt == DType::Float64 ? "(-(double)INFINITY)" : "(-INFINITY)";
  switch (dt) {
    case DType::Bool: return "0";
    case DType::Int8: return "((int8_t)-128)";
    case DType::Int16: return "((int16_t)-32768)";
    case DType::Int32: return "((int32_t)(-2147483647-1))";
    case DType::Int64: return "((int64_t)(-9223372036854775807LL-1))";
    default: return absl::StrCat("((", dtype_c_type(dt), ")0)");
  }
}

class CRenderer {
 public:
  absl::StatusOr<std::string> run(const LinearKernel& k) {
    std::string body;
    int indent = 1;
    auto line = [&](const std::string& s) { absl::StrAppend(&body, std::string(2 * indent, ' '), s, "\n"); };
    for (size_t i = 0; i < k.params.size(); ++i) {
      const char* qual = i == 0 ? "" : "const ";
      line(absl::StrFormat("%s%s* restrict b%d = (%s%s*)bufs[%d];", qual, storage_type(k.params[i]), i, qual,
                           storage_type(k.params[i]), i));
    }
    for (const UOpRef& u : k.ops) {
      const UOp& n = *u;
      switch (n.op) {
        case Ops::CONST:
        case Ops::DEFINE_GLOBAL:
          continue;
        case Ops::RANGE: {
          std::string r = absl::StrCat("r", n.arg_int());
          names_[&n] = r;
          if (n.arg_int() == k.outer_range_id)
            line(absl::StrFormat("for (int64_t %s = start; %s < end; %s++) {", r, r, r));
          else
            line(absl::StrFormat("for (int64_t %s = 0; %s < %s; %s++) {", r, r, name(n.src[0]), r));
          ++indent;
          continue;
        }
        case Ops::END_RANGE:
          --indent;
          line("}");
          continue;
        case Ops::DEFINE_ACC: {
          // A scalar, or an array with one slot per combination of its upcast lanes.
          std::string a = absl::StrCat("acc", n.arg_int());
          const UOp& red = *n.src[0];
          std::string init = reduce_identity(static_cast<Ops>(red.arg_int()), n.dtype);
          if (n.src.size() == 1) {
            line(absl::StrFormat("%s %s = %s;", value_type(n.dtype), a, init));
            names_[&n] = names_[&red] = a;
            continue;
          }
          int64_t slots = 1;
          std::string index;
          for (size_t i = 1; i < n.src.size(); ++i) {
            int64_t size = n.src[i]->src[0]->arg_int();
            index = index.empty() ? name(n.src[i]) : absl::StrCat("(", index, ")*", size, "+", name(n.src[i]));
            slots *= size;
          }
          line(absl::StrFormat("%s %s[%d];", value_type(n.dtype), a, slots));
          line(absl::StrFormat("for (int i = 0; i < %d; i++) %s[i] = %s;", slots, a, init));
          names_[&n] = names_[&red] = absl::StrCat(a, "[", index, "]");
          continue;
        }
        case Ops::ACCUMULATE: {
          std::string a = name(n.src[0]), v = name(n.src[1]);
          if (static_cast<Ops>(n.arg_int()) == Ops::ADD)
            line(absl::StrFormat("%s = %s + %s;", a, a, v));
          else
            line(absl::StrFormat("%s = %s > %s ? %s : %s;", a, v, a, v, a));
          continue;
        }
        case Ops::STORE: {
          DType dt = n.src[0]->dtype;
          std::string v = name(n.src[2]);
          if (dt == DType::Float16) v = absl::StrCat("pg_f2h(", v, ")");
          if (dt == DType::BFloat16) v = absl::StrCat("pg_f2bf(", v, ")");
          line(absl::StrFormat("%s[%s] = %s;", name(n.src[0]), name(n.src[1]), v));
          continue;
        }
        default:
          break;
      }
      auto expr = expression(n);
      if (!expr.ok()) return expr.status();
      std::string v = absl::StrCat("v", next_var_++);
      names_[&n] = v;
      line(absl::StrFormat("const %s %s = %s;", value_type(n.dtype), v, *expr));
    }
    return absl::StrCat(kPrelude, "void ", kKernelEntry, "(void** bufs, int64_t start, int64_t end) {\n",
                        "  (void)start; (void)end;\n", body, "}\n");
  }

 private:
  std::string name(const UOpRef& u) {
    if (u->op == Ops::CONST) return render_const(*u);
    if (u->op == Ops::RANGE) return absl::StrCat("r", u->arg_int());
    if (u->op == Ops::DEFINE_GLOBAL) return absl::StrCat("b", u->arg_int());
    return names_.at(u.get());
  }

  absl::StatusOr<std::string> expression(const UOp& n) {
    auto e = raw_expression(n);
    if (!e.ok() || !is_half(n.dtype) || n.op == Ops::LOAD) return e;
    return round_to(n.dtype, *e);
  }

  absl::StatusOr<std::string> raw_expression(const UOp& n) {
    DType dt = n.dtype;
    auto a = [&](size_t i) { return name(n.src[i]); };
    switch (n.op) {
      case Ops::LOAD: {
        std::string v = absl::StrFormat("%s[%s]", a(0), a(1));
        if (dt == DType::Float16) v = absl::StrCat("pg_h2f(", v, ")");
        if (dt == DType::BFloat16) v = absl::StrCat("pg_bf2f(", v, ")");
        if (n.src.size() == 3) return absl::StrFormat("(%s ? %s : (%s)0)", a(2), v, value_type(dt));
        return v;
      }
      case Ops::NEG: return absl::StrCat("(-", a(0), ")");
      case Ops::NOT: return absl::StrCat("(!", a(0), ")");
      case Ops::EXP2: return math_call("exp2", dt, a(0));
      case Ops::LOG2: return math_call("log2", dt, a(0));
      case Ops::SQRT: return math_call("sqrt", dt, a(0));
      case Ops::SIN: return math_call("sin", dt, a(0));
      case Ops::RECIP: return absl::StrFormat("((%s)1 / %s)", value_type(dt), a(0));
      case Ops::CAST: return absl::StrFormat("((%s)%s)", value_type(dt), a(0));
      case Ops::ADD: return absl::StrFormat("(%s + %s)", a(0), a(1));
      case Ops::SUB: return absl::StrFormat("(%s - %s)", a(0), a(1));
      case Ops::MUL: return absl::StrFormat("(%s * %s)", a(0), a(1));
      case Ops::FDIV: return absl::StrFormat("(%s / %s)", a(0), a(1));
      case Ops::IDIV:
      case Ops::MOD: {
        // Index arithmetic divides by positive constants; anything else goes through the guard.
        const UOpRef& d = n.src[1];
        bool safe = d->op == Ops::CONST && d->arg_int() > 0;
        if (safe) return absl::StrFormat("(%s %s %s)", a(0), n.op == Ops::IDIV ? "/" : "%", a(1));
        return absl::StrFormat("pg_%s_%s(%s, %s)", n.op == Ops::IDIV ? "idiv" : "mod", suffix(dt), a(0), a(1));
      }
      case Ops::MAX: return absl::StrFormat("(%s > %s ? %s : %s)", a(0), a(1), a(0), a(1));
      case Ops::CMPLT: return absl::StrFormat("(%s < %s)", a(0), a(1));
      case Ops::CMPNE: return absl::StrFormat("(%s != %s)", a(0), a(1));
      case Ops::AND: return absl::StrFormat("(%s & %s)", a(0), a(1));
      case Ops::OR: return absl::StrFormat("(%s | %s)", a(0), a(1));
      case Ops::XOR: return absl::StrFormat("(%s ^ %s)", a(0), a(1));
      case Ops::WHERE: return absl::StrFormat("(%s ? %s : %s)", a(0), a(1), a(2));
      default:
        return absl::InternalError(absl::StrCat("the C renderer has no rule for ", op_name(n.op)));
    }
  }

  std::unordered_map<const UOp*, std::string> names_;
  int next_var_ = 0;
};

}  // namespace

absl::StatusOr<std::string> render_c(const LinearKernel& kernel) { return CRenderer().run(kernel); }

}  // namespace polygrad
