// Autograd checked against central finite differences in float64, one case per op, plus a
// gradient of a gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "core/engine/engine.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad {
namespace {

namespace fe = frontend;

UOpRef ok(absl::StatusOr<UOpRef> r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nullptr;
}

class GradientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = Engine::create({.threads = 1});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e).release();
  }
  static void TearDownTestSuite() { delete engine_; }

  // A float64 leaf with values from `gen`.
  UOpRef leaf(Shape shape, const std::function<double()>& gen) {
    BufferPtr buf = *engine_->allocate(DType::Float64, shape);
    double* d = static_cast<double*>(buf->data());
    for (int64_t i = 0; i < buf->numel(); ++i) d[i] = gen();
    UOpRef x = *fe::buffer(buf->id(), DType::Float64, shape);
    bound_[x.get()] = buf;
    leaves_.push_back(x);  // binding keys are addresses: keep the nodes alive
    return x;
  }

  double scalar(const UOpRef& y) {
    auto r = engine_->realize({y}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *static_cast<const double*>(r->outputs[0]->data()) : NAN;
  }

  std::vector<double> values(const UOpRef& y) {
    auto r = engine_->realize({y}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    const double* d = static_cast<const double*>(r->outputs[0]->data());
    return std::vector<double>(d, d + r->outputs[0]->numel());
  }

  // loss = sum(f(x) * w) for a fixed random w; compares d loss / dx with central differences.
  void check(const std::function<UOpRef(const UOpRef&)>& f, Shape shape, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi), wdist(-1, 1);
    UOpRef x = leaf(shape, [&] { return dist(rng_); });
    UOpRef y = f(x);
    ASSERT_TRUE(y);
    UOpRef w = leaf(y->shape, [&] { return wdist(rng_); });
    std::vector<int64_t> all;
    for (size_t i = 0; i < y->shape.size(); ++i) all.push_back(static_cast<int64_t>(i));
    UOpRef loss = ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {y, w})), all));
    auto g = fe::gradient(loss, {x});
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ((*g)[0]->shape, x->shape);
    std::vector<double> analytic = values((*g)[0]);
    double* data = static_cast<double*>(bound_[x.get()]->data());
    const double eps = 1e-6;
    for (size_t i = 0; i < analytic.size(); ++i) {
      double keep = data[i];
      data[i] = keep + eps;
      double up = scalar(loss);
      data[i] = keep - eps;
      double down = scalar(loss);
      data[i] = keep;
      double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << "element " << i;
    }
  }

  static inline Engine* engine_ = nullptr;
  Bindings bound_;
  std::vector<UOpRef> leaves_;
  std::mt19937 rng_{7};
};

UOpRef c(double v, const UOpRef& like) { return ok(fe::constant(v, like->dtype, like->shape)); }

TEST_F(GradientTest, Arithmetic) {
  check([](const UOpRef& x) { return ok(fe::alu(Ops::ADD, {ok(fe::alu(Ops::MUL, {x, x})), x})); }, {2, 3}, -2, 2);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::SUB, {c(1, x), ok(fe::alu(Ops::NEG, {x}))})); }, {5}, -2, 2);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::FDIV, {ok(fe::alu(Ops::SIN, {x})), x})); }, {4}, 0.5, 2);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::RECIP, {x})); }, {4}, 0.5, 2);
}

TEST_F(GradientTest, Transcendental) {
  check([](const UOpRef& x) { return ok(fe::alu(Ops::EXP2, {x})); }, {6}, -2, 2);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::LOG2, {x})); }, {6}, 0.5, 3);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::SQRT, {x})); }, {6}, 0.5, 3);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::SIN, {x})); }, {6}, -3, 3);
}

TEST_F(GradientTest, MaxAndWhere) {
  check([](const UOpRef& x) { return ok(fe::alu(Ops::MAX, {x, ok(fe::alu(Ops::NEG, {x}))})); }, {6}, 0.1, 2);
  check([](const UOpRef& x) {
    UOpRef pos = ok(fe::alu(Ops::CMPLT, {c(0, x), x}));
    return ok(fe::alu(Ops::WHERE, {pos, ok(fe::alu(Ops::MUL, {x, x})), ok(fe::alu(Ops::NEG, {x}))}));
  }, {8}, -2, 2);
}

TEST_F(GradientTest, Reductions) {
  check([](const UOpRef& x) { return ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {x, x})), {1})); }, {3, 4}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::reduce(Ops::MAX, x, {0})); }, {3, 4}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::reduce(Ops::MAX, x, {0, 1})); }, {3, 4}, -1, 1);
}

TEST_F(GradientTest, Product) {
  check([](const UOpRef& x) { return ok(fe::reduce(Ops::MUL, x, {1})); }, {3, 4}, 0.5, 1.5);
  check([](const UOpRef& x) { return ok(fe::reduce(Ops::MUL, x, {0, 1})); }, {2, 3}, -1.5, 1.5);
}

TEST_F(GradientTest, ProductWithZerosIsTheProductOfTheOthers) {
  // Rows with no zero, one zero and two zeros: d prod / d x_i = prod_{j != i} x_j exactly.
  const std::vector<double> rows = {2, 3, 0.5, -1, /**/ 2, 0, 3, -2, /**/ 0, 4, 0, 5};
  size_t k = 0;
  UOpRef x = leaf({3, 4}, [&] { return rows[k++]; });
  auto g = fe::gradient(ok(fe::reduce(Ops::ADD, ok(fe::reduce(Ops::MUL, x, {1})), {0, 1})), {x});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> got = values((*g)[0]);
  for (size_t r = 0; r < 3; ++r)
    for (size_t i = 0; i < 4; ++i) {
      double others = 1;
      for (size_t j = 0; j < 4; ++j)
        if (j != i) others *= rows[r * 4 + j];
      EXPECT_EQ(got[r * 4 + i], others) << "row " << r << " element " << i;
    }
}

TEST_F(GradientTest, Movement) {
  check([](const UOpRef& x) { return ok(fe::reshape(ok(fe::alu(Ops::MUL, {x, x})), {6, 2})); }, {3, 4}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::MUL, {ok(fe::permute(x, {1, 0})), ok(fe::permute(x, {1, 0}))})); }, {3, 4}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::expand(ok(fe::alu(Ops::MUL, {x, x})), {3, 5})); }, {3, 1}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::pad(ok(fe::alu(Ops::MUL, {x, x})), {{1, 2}, {0, 1}})); }, {2, 3}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::shrink(ok(fe::alu(Ops::MUL, {x, x})), {{1, 3}, {0, 2}})); }, {4, 3}, -1, 1);
  check([](const UOpRef& x) { return ok(fe::alu(Ops::MUL, {ok(fe::flip(x, {0})), x})); }, {5, 2}, -1, 1);
}

TEST_F(GradientTest, SoftmaxComposite) {
  check([](const UOpRef& x) {
    UOpRef m = ok(fe::expand(ok(fe::reduce(Ops::MAX, x, {1})), x->shape));
    UOpRef e = ok(fe::alu(Ops::EXP2, {ok(fe::alu(Ops::SUB, {x, m}))}));
    UOpRef s = ok(fe::expand(ok(fe::reduce(Ops::ADD, e, {1})), x->shape));
    return ok(fe::alu(Ops::FDIV, {e, s}));
  }, {3, 5}, -2, 2);
}

TEST_F(GradientTest, GradientOfGradient) {
  // f = sum(x^3): df/dx = 3x^2, and d(sum(df/dx))/dx = 6x.
  std::uniform_real_distribution<double> dist(-2, 2);
  UOpRef x = leaf({5}, [&] { return dist(rng_); });
  UOpRef f = ok(fe::reduce(Ops::ADD, ok(fe::alu(Ops::MUL, {ok(fe::alu(Ops::MUL, {x, x})), x})), {0}));
  auto g1 = fe::gradient(f, {x});
  ASSERT_TRUE(g1.ok());
  auto g2 = fe::gradient(ok(fe::reduce(Ops::ADD, (*g1)[0], {0})), {x});
  ASSERT_TRUE(g2.ok());
  std::vector<double> xs = values(x), d1 = values((*g1)[0]), d2 = values((*g2)[0]);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(d1[i], 3 * xs[i] * xs[i], 1e-12);
    EXPECT_NEAR(d2[i], 6 * xs[i], 1e-12);
  }
}

TEST_F(GradientTest, UnrelatedTargetGetsZerosAndIntLossIsRejected) {
  UOpRef x = leaf({3}, [] { return 1.0; }), y = leaf({3}, [] { return 2.0; });
  auto g = fe::gradient(ok(fe::reduce(Ops::ADD, x, {0})), {y});
  ASSERT_TRUE(g.ok());
  for (double v : values((*g)[0])) EXPECT_EQ(v, 0.0);
  UOpRef i = ok(fe::constant(int64_t{1}, DType::Int32, {3}));
  EXPECT_EQ(fe::gradient(i, {x}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace polygrad
