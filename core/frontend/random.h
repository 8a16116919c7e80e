// Seeded random numbers computed on the device: threefry2x32-20 (the counter-based generator of
// Random123, JAX and tinygrad) built from uint32 ADD/XOR/OR, with shifts written as multiplies
// and divisions by powers of two. Element i of a call draws threefry(key = seed, counter =
// (i, call counter)), so a (seed, counter) pair names one reproducible stream on every client
// and device, and different seeds or counters give independent streams.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// Which stream a random op draws from. `counter` must fit in 32 bits.
struct RandomKey {
  uint64_t seed = 0;
  uint64_t counter = 0;
  // When set, a uint32 tensor of shape [3] holding random_key_words(seed, counter), which the
  // kernels read in place of compiled-in constants: one compiled kernel then serves every seed and
  // counter (an eager loop drawing a new stream each step compiles nothing after its first), and
  // a compiled step can be handed another key per run by rewriting the tensor's buffer.
  UOpRef words;
};

// The words of a key: the seed's low and high 32 bits, then the counter (which must fit 32 bits).
absl::StatusOr<std::array<uint32_t, 3>> random_key_words(uint64_t seed, uint64_t counter);

// The two threefry output words of every element, as uint32 tensors of `shape`.
struct RandomBits {
  UOpRef lo, hi;
};
absl::StatusOr<RandomBits> random_bits(const Shape& shape, RandomKey key);

// Uniform in [0, 1) of a float dtype, every value a multiple of 2^-k exactly representable in
// the dtype (k = 32 float64, 24 float32, 11 float16, 8 bfloat16), so 1 is never produced.
absl::StatusOr<UOpRef> rand(const Shape& shape, DType dtype, RandomKey key);
// Standard normal (Box-Muller on the two words, computed in float32, float64 for float64).
absl::StatusOr<UOpRef> randn(const Shape& shape, DType dtype, RandomKey key);
// Integers uniform in [low, high) of an integer dtype; high - low <= 2^32 and both ends
// representable in the dtype.
absl::StatusOr<UOpRef> randint(const Shape& shape, DType dtype, int64_t low, int64_t high, RandomKey key);
// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p).
absl::StatusOr<UOpRef> dropout(const UOpRef& x, double p, RandomKey key);

}  // namespace polygrad::frontend
