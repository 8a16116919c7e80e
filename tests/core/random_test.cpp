// The on-device generator against Random123's threefry2x32-20 known answers, and its argument
// checks. Statistics and the per-element layout are checked end to end in tests/e2e/test_random.py.
#include <gtest/gtest.h>

#include "core/frontend/random.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class RandomTest : public testing::RealizeFixture {
 protected:
  // Both threefry words of the element at row-major position `index` of a stream.
  std::pair<uint32_t, uint32_t> words_at(const Shape& shape, size_t index, fe::RandomKey key) {
    auto bits = fe::random_bits(shape, key);
    EXPECT_TRUE(bits.ok()) << bits.status();
    if (!bits.ok()) return {};
    auto lo = run<uint32_t>(bits->lo, shape), hi = run<uint32_t>(bits->hi, shape);
    return {lo.at(index), hi.at(index)};
  }
};

TEST_F(RandomTest, MatchesRandom123KnownAnswerAndIndexesRowMajor) {
  // counter (element 0, call 0), key 0 -> Random123's kat vector for threefry2x32_20.
  EXPECT_EQ(words_at({1}, 0, {0, 0}), std::make_pair(0x6B200159u, 0x99BA4EFEu));
  // An element draws from its row-major position, whatever the shape.
  auto [a, b] = words_at({2, 3}, 5, {0, 0});
  auto [c, d] = words_at({6}, 5, {0, 0});
  EXPECT_EQ(a, c);
  EXPECT_EQ(b, d);
}

// A key read from data (random_key_words in a uint32 [3] buffer, as the daemon sends it) draws the
// same bits as the key compiled in, for seeds with both words set and counters up to 2^32 - 1.
TEST_F(RandomTest, AKeyReadFromDataDrawsTheCompiledKeysBits) {
  const Shape shape{3, 70};
  for (auto [seed, counter] : {std::pair<uint64_t, uint64_t>{0, 0}, {42, 7}, {0xDEADBEEF12345678u, 0xFFFFFFFFu},
                               {uint64_t{1} << 63, 123456789}}) {
    auto w = fe::random_key_words(seed, counter);
    ASSERT_TRUE(w.ok()) << w.status();
    std::vector<uint32_t> values;
    size_t i = 0;
    UOpRef words = leaf<uint32_t>(DType::UInt32, {3}, values, [&] { return (*w)[i++]; });
    for (size_t at : {size_t{0}, size_t{69}, size_t{209}}) {
      EXPECT_EQ(words_at(shape, at, {seed, counter, words}), words_at(shape, at, {seed, counter}))
          << "seed " << seed << " counter " << counter << " element " << at;
    }
  }
  EXPECT_EQ(fe::random_key_words(1, uint64_t{1} << 32).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RandomTest, RejectsBadArguments) {
  EXPECT_EQ(fe::rand({3}, DType::Int32, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::randint({3}, DType::Int8, 0, 300, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::randint({3}, DType::Int32, 5, 5, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fe::random_bits({3}, {0, uint64_t{1} << 32}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<double> v;
  UOpRef x = randd({4}, v);
  EXPECT_EQ(fe::dropout(x, 1.5, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace polygrad
