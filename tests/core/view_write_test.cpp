// core/frontend/view_write.h: writing through random chains of movement ops, against the index map
// the same chain gives (each view element's position in the target), and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/frontend/tensor_ops.h"
#include "core/frontend/view_write.h"
#include "tests/core/realize_fixture.h"

namespace polygrad {
namespace {

namespace fe = frontend;

using ViewWriteTest = testing::RealizeFixture;

// One random movement step over x that keeps it writable (no expand): shrink, pad, permute, flip,
// or a reshape that merges or splits the first axis.
UOpRef random_step(const UOpRef& x, std::mt19937& rng) {
  const size_t rank = x->shape.size();
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  switch (pick(0, 4)) {
    case 0: {
      fe::Pairs p;
      for (int64_t n : x->shape) {
        int64_t b = pick(0, n / 2);
        p.emplace_back(b, pick(b, n));
      }
      return *fe::shrink(x, p);
    }
    case 1: {
      fe::Pairs p;
      for (size_t i = 0; i < rank; ++i) p.emplace_back(pick(0, 1), pick(0, 2));
      return *fe::pad(x, p);
    }
    case 2: {
      std::vector<int64_t> order(rank);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      return *fe::permute(x, order);
    }
    case 3:
      return *fe::flip(x, {pick(0, static_cast<int64_t>(rank) - 1)});
    default: {
      Shape s = x->shape;
      if (rank >= 2 && pick(0, 1)) {  // merge the first two axes
        s[1] *= s[0];
        s.erase(s.begin());
      } else if (s[0] % 2 == 0 && s[0] > 0) {  // split the first axis
        s[0] /= 2;
        s.insert(s.begin(), 2);
      }
      return *fe::reshape(x, s);
    }
  }
}

TEST_F(ViewWriteTest, RandomChainsWriteWhereTheViewReads) {
  std::mt19937 rng(7);
  const Shape shape = {4, 6, 5};
  const int64_t n = 4 * 6 * 5;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<double> x, pos(n);
    UOpRef target = randd(shape, x);
    // pos: each element's flat position + 1, so a padded element reads 0 (no position).
    std::iota(pos.begin(), pos.end(), 1.0);
    std::vector<double> unused;
    UOpRef positions = leaf<double>(DType::Float64, shape, unused, [&, i = 0]() mutable { return pos[i++]; });
    // One chain of steps, applied to the target and to the positions alike.
    std::vector<std::mt19937::result_type> seeds;
    const int length = std::uniform_int_distribution<int>(0, 4)(rng);
    for (int i = 0; i < length; ++i) seeds.push_back(rng());
    UOpRef view = target, map = positions;
    for (auto s : seeds) {
      std::mt19937 a(s), b(s);
      view = random_step(view, a);
      map = random_step(map, b);
    }
    ASSERT_EQ(view->shape, map->shape);
    std::vector<double> value;
    UOpRef v = randd(view->shape, value, 2, 3);
    auto where = run<double>(map, map->shape);
    std::vector<double> want = x;
    for (size_t j = 0; j < where.size(); ++j)
      if (where[j] > 0) want[static_cast<size_t>(where[j]) - 1] = value[j];
    auto got = run<double>(fe::write_view(target, view, v), shape);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "trial " << trial << " at " << i;
  }
}

// slice_at reads `count` elements from a begin held in a buffer; writing through it puts them back.
TEST_F(ViewWriteTest, ASliceAtARunTimeBeginReadsAndWritesThere) {
  const Shape shape = {3, 7, 2};
  for (int32_t at : {0, 2, 5, 6}) {
    for (int64_t axis : {0, 1, 2}) {
      const int64_t count = std::min<int64_t>(2, shape[axis]);
      std::vector<double> x, value;
      UOpRef target = randd(shape, x);
      std::vector<int32_t> begin_value;
      UOpRef begin = leaf<int32_t>(DType::Int32, {}, begin_value, [&] { return at; });
      UOpRef view = *fe::slice_at(target, axis, begin, count);
      Shape vs = shape;
      vs[axis] = count;
      ASSERT_EQ(view->shape, vs);
      auto read = run<double>(view, vs);
      UOpRef v = randd(vs, value, 2, 3);
      auto written = run<double>(fe::write_view(target, view, v), shape);
      std::vector<double> want_write = x;
      // Row-major walk of the view: position k along `axis` reads target's at + k, 0 past the axis.
      const int64_t inner = axis == 2 ? 1 : (axis == 1 ? shape[2] : shape[1] * shape[2]);
      const int64_t outer = axis == 0 ? 1 : (axis == 1 ? shape[0] : shape[0] * shape[1]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < count; ++k)
          for (int64_t i = 0; i < inner; ++i) {
            const size_t j = static_cast<size_t>((o * count + k) * inner + i);
            const int64_t pos = at + k;
            const bool inside = pos < shape[axis];
            const size_t t = static_cast<size_t>((o * shape[axis] + pos) * inner + i);
            EXPECT_EQ(read[j], inside ? x[t] : 0.0) << "at " << at << " axis " << axis << " element " << j;
            if (inside) want_write[t] = value[j];
          }
      EXPECT_EQ(written, want_write) << "at " << at << " axis " << axis;
    }
  }
}

TEST_F(ViewWriteTest, RefusesWhatIsNotAWritableView) {
  std::vector<double> x, v1, v2;
  UOpRef target = randd({3, 4}, x);
  UOpRef row = *fe::shrink(target, {{1, 2}, {0, 4}});
  UOpRef wide = *fe::expand(row, {5, 4});
  EXPECT_NE(message(fe::write_view(target, wide, randd({5, 4}, v1))).find("expands (1, 4) to (5, 4)"), std::string::npos);
  UOpRef doubled = *fe::alu(Ops::ADD, {target, target});
  UOpRef part = *fe::shrink(doubled, {{0, 1}, {0, 4}});
  EXPECT_NE(message(fe::write_view(target, part, randd({1, 4}, v2))).find("reaches ADD"), std::string::npos);
  EXPECT_NE(message(fe::write_view(target, row, randd({2, 4}, v2))).find("shape (2, 4) differs from the view's (1, 4)"),
            std::string::npos);
  std::vector<int32_t> i;
  EXPECT_NE(message(fe::write_view(target, row, ints({1, 4}, i, 0, 3))).find("the value is int32, the target float64"),
            std::string::npos);
}

}  // namespace
}  // namespace polygrad
