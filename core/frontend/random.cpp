#include "core/frontend/random.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/composites.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

absl::StatusOr<UOpRef> u32(uint32_t v, const Shape& shape) {
  return constant(static_cast<int64_t>(v), DType::UInt32, shape);
}

absl::StatusOr<UOpRef> binary(Ops op, const UOpRef& a, uint32_t v) {
  PG_ASSIGN(c, u32(v, a->shape));
  return alu(op, {a, c});
}

// Rotate left by r (0 < r < 32): (x << r) | (x >> (32 - r)), uint32 arithmetic wrapping.
absl::StatusOr<UOpRef> rotl(const UOpRef& x, int r) {
  PG_ASSIGN(hi, binary(Ops::MUL, x, uint32_t{1} << r));
  PG_ASSIGN(lo, binary(Ops::IDIV, x, uint32_t{1} << (32 - r)));
  return alu(Ops::OR, {hi, lo});
}

// The row-major position of every element of `shape` as uint32, built in `shape` itself from one
// arange per axis: movement ops stay at the leaves, and the 20 rounds above them (which use every
// intermediate twice) never sit under a reshape that would re-index the whole chain.
absl::StatusOr<UOpRef> row_major_index(const Shape& shape) {
  PG_ASSIGN(acc, u32(0, shape));
  UOpRef index = acc;
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] > 1) {
      PG_ASSIGN(a, arange(shape[i], DType::UInt32));
      Shape axis(shape.size(), 1);
      axis[i] = shape[i];
      PG_ASSIGN(r, reshape(a, axis));
      PG_ASSIGN(e, expand(r, shape));
      PG_ASSIGN(s, binary(Ops::MUL, e, static_cast<uint32_t>(stride)));
      PG_ASSIGN(sum, alu(Ops::ADD, {index, s}));
      index = sum;
    }
    stride *= shape[i];
  }
  return index;
}

int fraction_bits(DType dt) {
  switch (dt) {
    case DType::Float64: return 32;
    case DType::Float32: return 24;
    case DType::Float16: return 11;
    default: return 8;  // bfloat16
  }
}

// bits -> [0, 1) in dt: the top fraction_bits(dt) bits times 2^-k, exact in dt.
absl::StatusOr<UOpRef> unit_interval(const UOpRef& bits, DType dt) {
  int k = fraction_bits(dt);
  UOpRef top = bits;
  if (k < 32) {
    PG_ASSIGN(t, binary(Ops::IDIV, bits, uint32_t{1} << (32 - k)));
    top = t;
  }
  PG_ASSIGN(f, cast(top, dt));
  PG_ASSIGN(scale, constant(std::ldexp(1.0, -k), dt, f->shape));
  return alu(Ops::MUL, {f, scale});
}

bool dtype_holds(DType dt, int64_t v) {
  const size_t bits = dtype_itemsize(dt) * 8;
  if (dtype_is_unsigned(dt)) return v >= 0 && (bits >= 64 || v < (int64_t{1} << bits));
  return bits >= 64 || (v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1)));
}

absl::Status need_float_dtype(DType dt, const char* what) {
  if (!dtype_is_float(dt))
    return absl::InvalidArgumentError(absl::StrCat(what, " makes float tensors, got dtype ", dtype_name(dt)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::array<uint32_t, 3>> random_key_words(uint64_t seed, uint64_t counter) {
  if (counter > std::numeric_limits<uint32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("random counter ", counter, " does not fit in 32 bits"));
  return std::array<uint32_t, 3>{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                                 static_cast<uint32_t>(counter)};
}

namespace {

// The key's three words as uint32 scalars (shape []): read from key.words, or constants.
absl::StatusOr<std::array<UOpRef, 3>> key_scalars(const RandomKey& key) {
  PG_ASSIGN(w, random_key_words(key.seed, key.counter));
  std::array<UOpRef, 3> out;
  for (int i = 0; i < 3; ++i) {
    if (key.words == nullptr) {
      PG_ASSIGN(c, u32(w[i], {}));
      out[i] = c;
      continue;
    }
    if (key.words->dtype != DType::UInt32 || key.words->shape != Shape{3})
      return absl::InternalError("a random key's words must be a uint32 tensor of shape [3]");
    PG_ASSIGN(one, shrink(key.words, {{i, i + 1}}));
    PG_ASSIGN(scalar, reshape(one, {}));
    out[i] = scalar;
  }
  return out;
}

}  // namespace

absl::StatusOr<RandomBits> random_bits(const Shape& shape, RandomKey key) {
  PG_ASSIGN(words, key_scalars(key));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError("random tensor shape has a negative dimension");
    n *= d;
    if (n > std::numeric_limits<uint32_t>::max())
      return absl::InvalidArgumentError("random tensors are limited to 2^32 - 1 elements");
  }
  PG_ASSIGN(index, row_major_index(shape));
  // threefry's key schedule: k0, k1 and their parity word, as scalars spread over `shape`.
  const auto& [k0, k1, counter] = words;
  PG_ASSIGN(k01, alu(Ops::XOR, {k0, k1}));
  PG_ASSIGN(parity, binary(Ops::XOR, k01, 0x1BD11BDAu));
  const UOpRef ks[3] = {k0, k1, parity};
  const auto spread = [&](const UOpRef& scalar) { return broadcast_to(scalar, shape); };
  constexpr int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  PG_ASSIGN(k0s, spread(ks[0]));
  PG_ASSIGN(x0_init, alu(Ops::ADD, {index, k0s}));
  PG_ASSIGN(x1_scalar, alu(Ops::ADD, {counter, ks[1]}));
  PG_ASSIGN(x1_init, spread(x1_scalar));
  UOpRef x0 = x0_init, x1 = x1_init;
  for (int group = 0; group < 5; ++group) {  // 20 rounds, a key injection after every 4
    for (int r : kRotations[group % 2]) {
      PG_ASSIGN(sum, alu(Ops::ADD, {x0, x1}));
      PG_ASSIGN(rot, rotl(x1, r));
      PG_ASSIGN(mixed, alu(Ops::XOR, {rot, sum}));
      x0 = sum;
      x1 = mixed;
    }
    PG_ASSIGN(inject0, spread(ks[(group + 1) % 3]));
    PG_ASSIGN(inject1_scalar, binary(Ops::ADD, ks[(group + 2) % 3], static_cast<uint32_t>(group + 1)));
    PG_ASSIGN(inject1, spread(inject1_scalar));
    PG_ASSIGN(a, alu(Ops::ADD, {x0, inject0}));
    PG_ASSIGN(b, alu(Ops::ADD, {x1, inject1}));
    x0 = a;
    x1 = b;
  }
  return RandomBits{x0, x1};
}

absl::StatusOr<UOpRef> rand(const Shape& shape, DType dtype, RandomKey key) {
  if (auto s = need_float_dtype(dtype, "rand"); !s.ok()) return s;
  PG_ASSIGN(bits, random_bits(shape, key));
  return unit_interval(bits.lo, dtype);
}

absl::StatusOr<UOpRef> randn(const Shape& shape, DType dtype, RandomKey key) {
  if (auto s = need_float_dtype(dtype, "randn"); !s.ok()) return s;
  const DType work = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  PG_ASSIGN(bits, random_bits(shape, key));
  PG_ASSIGN(u1, unit_interval(bits.lo, work));
  PG_ASSIGN(u2, unit_interval(bits.hi, work));
  auto c = [&](double v) { return constant(v, work, shape); };
  // sqrt(-2 ln(1 - u1)) * cos(2 pi u2); 1 - u1 is in (0, 1], so the log is finite.
  PG_ASSIGN(one, c(1));
  PG_ASSIGN(v, alu(Ops::SUB, {one, u1}));
  PG_ASSIGN(l2, alu(Ops::LOG2, {v}));
  PG_ASSIGN(k, c(-2.0 * 0.6931471805599453));
  PG_ASSIGN(r2, alu(Ops::MUL, {l2, k}));
  PG_ASSIGN(r, alu(Ops::SQRT, {r2}));
  PG_ASSIGN(two_pi, c(2 * M_PI));
  PG_ASSIGN(theta, alu(Ops::MUL, {u2, two_pi}));
  PG_ASSIGN(half_pi, c(M_PI / 2));
  PG_ASSIGN(shifted, alu(Ops::SUB, {half_pi, theta}));
  PG_ASSIGN(cosine, alu(Ops::SIN, {shifted}));
  PG_ASSIGN(z, alu(Ops::MUL, {r, cosine}));
  return cast(z, dtype);
}

absl::StatusOr<UOpRef> randint(const Shape& shape, DType dtype, int64_t low, int64_t high, RandomKey key) {
  if (!dtype_is_int(dtype))
    return absl::InvalidArgumentError(absl::StrCat("randint makes integer tensors, got dtype ", dtype_name(dtype)));
  if (high <= low) return absl::InvalidArgumentError(absl::StrCat("randint needs low < high, got [", low, ", ", high, ")"));
  // Both ends must fit the dtype; the span must fit 32 bits (the draw is bits % span).
  if (static_cast<double>(high) - static_cast<double>(low) > 4294967296.0)
    return absl::InvalidArgumentError(absl::StrCat("randint range [", low, ", ", high, ") spans more than 2^32 values"));
  if (!dtype_holds(dtype, low) || !dtype_holds(dtype, high - 1))
    return absl::InvalidArgumentError(
        absl::StrCat("randint range [", low, ", ", high, ") does not fit dtype ", dtype_name(dtype)));
  PG_ASSIGN(bits, random_bits(shape, key));
  const auto span = static_cast<uint64_t>(high - low);
  UOpRef m = bits.lo;
  if (span < (uint64_t{1} << 32)) {
    PG_ASSIGN(r, binary(Ops::MOD, bits.lo, static_cast<uint32_t>(span)));
    m = r;
  }
  PG_ASSIGN(wide, cast(m, DType::Int64));
  PG_ASSIGN(lo, constant(low, DType::Int64, shape));
  PG_ASSIGN(v, alu(Ops::ADD, {wide, lo}));
  return cast(v, dtype);
}

absl::StatusOr<UOpRef> dropout(const UOpRef& x, double p, RandomKey key) {
  if (!dtype_is_float(x->dtype))
    return absl::InvalidArgumentError(absl::StrCat("dropout needs a float tensor, got ", dtype_name(x->dtype)));
  if (!(p >= 0 && p <= 1)) return absl::InvalidArgumentError(absl::StrCat("dropout probability ", p, " is not in [0, 1]"));
  if (p == 0) return x;
  PG_ASSIGN(zero, constant(0.0, x->dtype, x->shape));
  if (p == 1) return zero;
  PG_ASSIGN(bits, random_bits(x->shape, key));
  PG_ASSIGN(u, unit_interval(bits.lo, DType::Float32));  // fine-grained p even for half inputs
  PG_ASSIGN(pc, constant(p, DType::Float32, x->shape));
  PG_ASSIGN(drop, alu(Ops::CMPLT, {u, pc}));
  PG_ASSIGN(s, constant(1.0 / (1.0 - p), x->dtype, x->shape));
  PG_ASSIGN(scaled, alu(Ops::MUL, {x, s}));
  return alu(Ops::WHERE, {drop, zero, scaled});
}

}  // namespace polygrad::frontend
