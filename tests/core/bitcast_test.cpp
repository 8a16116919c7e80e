// BITCAST end to end on the CPU engine: every bit pattern of the 16-bit types (all NaNs
// included) and random and special patterns of the 4- and 8-byte ones survive a bitcast and a
// round trip unchanged; a bitcast fuses into an elementwise chain; the frontend's rules and
// errors; and that no gradient passes a bitcast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class BitcastTest : public testing::RealizeFixture {
 protected:
  // A leaf of `dt` holding every 16-bit pattern once.
  UOpRef all_16bit_patterns(DType dt, std::vector<uint16_t>& v) {
    uint32_t next = 0;
    return leaf<uint16_t>(dt, {65536}, v, [&] { return static_cast<uint16_t>(next++); });
  }

  // A leaf of `dt` (4 or 8 bytes) of random patterns, then the special encodings of the float
  // of that size: signed zeros, infinities, subnormals, quiet and signaling NaNs with payloads.
  template <typename U>
  UOpRef random_and_special(DType dt, std::vector<U>& v) {
    std::vector<U> special;
    if constexpr (sizeof(U) == 4) {
      special = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 1u, 0x807fffffu, 0x7fc00000u, 0xffc00001u,
                 0x7f800001u, 0xffa5a5a5u, 0x7f7fffffu, 0x00800000u};
    } else {
      special = {0ull, 1ull << 63, 0x7ff0000000000000ull, 0xfff0000000000000ull, 1ull, 0x800fffffffffffffull,
                 0x7ff8000000000000ull, 0xfff8000000000123ull, 0x7ff0000000000001ull, 0xfff5a5a5a5a5a5a5ull};
    }
    std::uniform_int_distribution<U> d;
    size_t i = 0;
    return leaf<U>(dt, {1000}, v, [&] { return i < special.size() ? special[i++] : d(rng_); });
  }
};

TEST_F(BitcastTest, Every16BitPatternSurvives) {
  const DType types[] = {DType::Int16, DType::UInt16, DType::Float16, DType::BFloat16};
  for (DType from : types) {
    for (DType to : types) {
      if (to == from) continue;
      std::vector<uint16_t> v;
      UOpRef x = all_16bit_patterns(from, v);
      // One way, and there and back through the other type within one kernel.
      EXPECT_EQ(run<uint16_t>(fe::bitcast(x, to), {65536}), v) << dtype_name(from) << " -> " << dtype_name(to);
      EXPECT_EQ(run<uint16_t>(fe::bitcast(*fe::bitcast(x, to), from), {65536}), v)
          << dtype_name(from) << " -> " << dtype_name(to) << " -> " << dtype_name(from);
    }
  }
}

TEST_F(BitcastTest, Float32AndFloat64PatternsSurviveRoundTrips) {
  for (DType i32 : {DType::Int32, DType::UInt32}) {
    std::vector<uint32_t> v;
    UOpRef x = random_and_special<uint32_t>(DType::Float32, v);
    EXPECT_EQ(run<uint32_t>(fe::bitcast(x, i32), {1000}), v);
    EXPECT_EQ(run<uint32_t>(fe::bitcast(*fe::bitcast(x, i32), DType::Float32), {1000}), v);
    UOpRef bits = random_and_special<uint32_t>(i32, v);
    EXPECT_EQ(run<uint32_t>(fe::bitcast(bits, DType::Float32), {1000}), v);
  }
  for (DType i64 : {DType::Int64, DType::UInt64}) {
    std::vector<uint64_t> v;
    UOpRef x = random_and_special<uint64_t>(DType::Float64, v);
    EXPECT_EQ(run<uint64_t>(fe::bitcast(x, i64), {1000}), v);
    EXPECT_EQ(run<uint64_t>(fe::bitcast(*fe::bitcast(x, i64), DType::Float64), {1000}), v);
    UOpRef bits = random_and_special<uint64_t>(i64, v);
    EXPECT_EQ(run<uint64_t>(fe::bitcast(bits, DType::Float64), {1000}), v);
  }
}

// The classic abs via bits, (x.bitcast(int32) & 0x7fffffff).bitcast(float32): one kernel, and
// exactly fabs on every pattern (a NaN keeps its payload, loses its sign).
TEST_F(BitcastTest, AbsThroughBitsFusesIntoOneKernel) {
  std::vector<uint32_t> v;
  UOpRef x = random_and_special<uint32_t>(DType::Float32, v);
  auto bits = fe::bitcast(x, DType::Int32);
  auto mask = fe::constant(int64_t{0x7fffffff}, DType::Int32, {1000});
  auto abs = fe::bitcast(*fe::alu(Ops::AND, {*bits, *mask}), DType::Float32);
  std::vector<uint32_t> got = run<uint32_t>(abs, {1000});
  EXPECT_EQ(last_kernels_, 1u);
  ASSERT_EQ(got.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(got[i], v[i] & 0x7fffffffu) << i;
}

// A bitcast value used by arithmetic as well: the float it stands for is the bits' value.
TEST_F(BitcastTest, BitcastValueComputesLikeItsBits) {
  std::vector<uint16_t> v;
  UOpRef x = leaf<uint16_t>(DType::Int16, {4}, v, [n = 0]() mutable {
    const uint16_t h[] = {0x3c00, 0xc000, 0x0001, 0x7bff};  // 1, -2, the smallest subnormal, 65504
    return h[n++];
  });
  auto h = fe::bitcast(x, DType::Float16);
  auto twice = fe::cast(*fe::alu(Ops::ADD, {*h, *h}), DType::Float32);
  std::vector<float> got = run<float>(twice, {4});
  EXPECT_EQ(got, (std::vector<float>{2.0f, -4.0f, 0x1p-23f, std::numeric_limits<float>::infinity()}));
}

// The documented exception: a 16-bit NaN an op computed (here WHERE, which picks a loaded NaN)
// lives as a float and reaches the bitcast as a NaN, payload not promised.
TEST_F(BitcastTest, ComputedHalfNanStaysANan) {
  for (auto [dt, exp_bits, man_bits] :
       {std::tuple{DType::Float16, 0x7c00u, 0x3ffu}, std::tuple{DType::BFloat16, 0x7f80u, 0x7fu}}) {
    const uint32_t e = exp_bits, m = man_bits;
    std::vector<uint16_t> v;
    UOpRef x = leaf<uint16_t>(dt, {4}, v, [e, m, n = 0]() mutable {
      uint32_t sign = n == 3 ? 0x8000u : 0u;
      return static_cast<uint16_t>(sign | e | (n++ == 0 ? 1u : m));
    });
    std::vector<uint8_t> c;
    UOpRef cond = leaf<uint8_t>(DType::Bool, {4}, c, [] { return uint8_t{1}; });
    auto picked = fe::alu(Ops::WHERE, {cond, x, *fe::constant(0.0, dt, {4})});
    for (uint16_t b : run<uint16_t>(fe::bitcast(*picked, DType::UInt16), {4})) {
      EXPECT_EQ(b & e, e) << std::hex << b;
      EXPECT_NE(b & m, 0u) << std::hex << b;
    }
  }
}

TEST_F(BitcastTest, FrontendRules) {
  UOpRef f = *fe::buffer(1, DType::Float32, {2, 3});
  EXPECT_EQ(*fe::bitcast(f, DType::Float32), f);  // the identity
  auto b = fe::bitcast(f, DType::UInt32);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->op, Ops::BITCAST);
  EXPECT_EQ((*b)->shape, (Shape{2, 3}));
  // Between integers (and bool) it is the wrapping CAST.
  UOpRef i = *fe::buffer(2, DType::Int8, {4});
  EXPECT_EQ((*fe::bitcast(i, DType::UInt8))->op, Ops::CAST);
  EXPECT_EQ((*fe::bitcast(i, DType::Bool))->op, Ops::CAST);
  // Differing itemsizes regroup the last axis.
  EXPECT_EQ((*fe::bitcast(f, DType::Float16))->shape, (Shape{2, 6}));
  EXPECT_EQ((*fe::bitcast(*fe::buffer(3, DType::Bool, {8}), DType::Int64))->shape, (Shape{1}));
  // A 0-d tensor or a last axis that does not divide is refused, naming both dtypes and sizes.
  for (auto [x, to, why] : {std::tuple{*fe::buffer(4, DType::Float32, {}), DType::Float16, "0-d"},
                            std::tuple{f, DType::Float64, "must be a multiple of 2"}}) {
    auto bad = fe::bitcast(x, to);
    ASSERT_FALSE(bad.ok()) << why;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("float32 (4 bytes)"), std::string_view::npos) << bad.status();
    EXPECT_NE(bad.status().message().find(absl::StrCat(dtype_name(to), " (", dtype_itemsize(to), " bytes)")),
              std::string_view::npos)
        << bad.status();
    EXPECT_NE(bad.status().message().find(why), std::string_view::npos) << bad.status();
  }
  EXPECT_FALSE(fe::bitcast(f, DType::Void).ok());
  EXPECT_FALSE(fe::alu(Ops::BITCAST, {f}).ok());  // not an elementwise op of its own
}

// Differing itemsizes: the bytes of the last axis regrouped, as memcpy sees them (little-endian).
TEST_F(BitcastTest, DifferingItemsizesRegroupTheLastAxis) {
  std::vector<uint32_t> f;
  UOpRef x = random_and_special<uint32_t>(DType::Float32, f);  // shape {1000}
  std::vector<uint8_t> bytes(4000);
  std::memcpy(bytes.data(), f.data(), 4000);
  EXPECT_EQ(run<uint8_t>(fe::bitcast(x, DType::UInt8), {4000}), bytes);
  std::vector<uint16_t> halves(2000);
  std::memcpy(halves.data(), f.data(), 4000);
  EXPECT_EQ(run<uint16_t>(fe::bitcast(x, DType::Float16), {2000}), halves);
  std::vector<uint64_t> doubles(500);
  std::memcpy(doubles.data(), f.data(), 4000);
  EXPECT_EQ(run<uint64_t>(fe::bitcast(x, DType::Float64), {500}), doubles);
  // There and back, through a 2-D view whose last axis is not the buffer's.
  auto t = fe::permute(*fe::reshape(x, {10, 100}), {1, 0});
  std::vector<uint32_t> want(1000);
  for (int64_t i = 0; i < 100; ++i)
    for (int64_t j = 0; j < 10; ++j) want[i * 10 + j] = f[j * 100 + i];
  EXPECT_EQ(run<uint32_t>(fe::bitcast(*fe::bitcast(*t, DType::BFloat16), DType::Int32), {100, 10}), want);
  EXPECT_EQ(run<uint32_t>(fe::bitcast(*fe::bitcast(*t, DType::Int8), DType::UInt32), {100, 10}), want);
  EXPECT_EQ(run<uint32_t>(fe::bitcast(*fe::bitcast(*t, DType::UInt64), DType::Float32), {100, 10}), want);
}

TEST_F(BitcastTest, BytesReadAsBoolAreNonzero) {
  std::vector<uint8_t> v;
  UOpRef x = leaf<uint8_t>(DType::UInt8, {6}, v, [n = 0]() mutable {
    const uint8_t b[] = {0, 1, 2, 255, 128, 0};
    return b[n++];
  });
  std::vector<uint8_t> got = run<uint8_t>(fe::bitcast(x, DType::Bool), {6});
  EXPECT_EQ(got, (std::vector<uint8_t>{0, 1, 1, 1, 1, 0}));
}

// d/dx sum(x * bitcast(bitcast(x))) is the bitcast value (= x): the product's other factor.
// The path through the bitcasts passes nothing, or the gradient would be 2x.
TEST_F(BitcastTest, NoGradientPassesABitcast) {
  std::vector<double> v;
  UOpRef x = randd({5}, v);
  UOpRef y = *fe::bitcast(*fe::bitcast(x, DType::Int64), DType::Float64);
  auto loss = fe::reduce(Ops::ADD, *fe::alu(Ops::MUL, {x, y}), {0});
  auto g = fe::gradient(*loss, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(run<double>((*g)[0], {5}), v);
  // A target reached only through a bitcast gets zeros.
  auto only = fe::gradient(*fe::reduce(Ops::ADD, y, {0}), {x});
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ(run<double>((*only)[0], {5}), std::vector<double>(5, 0.0));
}

}  // namespace
}  // namespace polygrad
