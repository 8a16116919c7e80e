// Compiled steps: a step's run must equal a fresh realize of the same graph, step after step, with
// assigns applied after every kernel read the old values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "bench/mlp_step.h"
#include "core/engine/engine.h"
#include "core/engine/step_program.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/frontend/view_write.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class StepProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = std::move(*Engine::create({.threads = 2})).release(); }
  static void TearDownTestSuite() { delete engine_; }

  UOpRef leaf(const std::vector<float>& values, Shape shape) {
    BufferPtr buf = *engine_->allocate(DType::Float32, shape);
    std::memcpy(buf->data(), values.data(), values.size() * 4);
    UOpRef x = *fe::buffer(buf->id(), DType::Float32, shape);
    bound_[x.get()] = buf;
    leaves_.push_back(x);
    return x;
  }
  // A 0-d int32 leaf holding `v` (a symbolic dim's extent or begin, which a test rewrites between runs).
  UOpRef int_scalar(int32_t v) {
    BufferPtr buf = *engine_->allocate(DType::Int32, {});
    std::memcpy(buf->data(), &v, sizeof v);
    UOpRef x = *fe::buffer(buf->id(), DType::Int32, {});
    bound_[x.get()] = buf;
    leaves_.push_back(x);
    return x;
  }
  BufferPtr buf(const UOpRef& x) { return bound_.at(x.get()); }
  static std::vector<float> values(const BufferPtr& b) {
    const float* p = static_cast<const float*>(b->data());
    return std::vector<float>(p, p + b->numel());
  }

  static inline Engine* engine_ = nullptr;
  Bindings bound_;
  std::vector<UOpRef> leaves_;
};

std::vector<float> copy_of(const BufferPtr& b) {
  const float* p = static_cast<const float*>(b->data());
  return std::vector<float>(p, p + b->numel());
}

// Ten SGD steps of a small MLP through one compiled step equal ten eager steps (realize, then copy the
// new parameters back), and the inputs can change between runs.
TEST_F(StepProgramTest, MlpStepsMatchEagerRealize) {
  auto stepped = bench::make_mlp_step(*engine_, 16, 20, 12, 5, 0.1f, 7);
  auto eager = bench::make_mlp_step(*engine_, 16, 20, 12, 5, 0.1f, 7);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  ASSERT_TRUE(eager.ok()) << eager.status();
  auto compiled = engine_->compile_step(stepped->spec());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_GT((*compiled)->stats().kernels, 4u);
  ASSERT_EQ((*compiled)->outputs().size(), 1u);

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(0, 1);
  for (int step = 0; step < 10; ++step) {
    // New inputs for both, as a training loop feeds batches.
    for (int64_t i = 0; i < stepped->buffers[0]->numel(); ++i) {
      const float v = d(rng);
      static_cast<float*>(stepped->buffers[0]->data())[i] = v;
      static_cast<float*>(eager->buffers[0]->data())[i] = v;
    }
    ASSERT_TRUE((*compiled)->run().ok());
    std::vector<UOpRef> outs = {eager->loss};
    outs.insert(outs.end(), eager->new_params.begin(), eager->new_params.end());
    auto r = engine_->realize(outs, eager->bindings());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(copy_of((*compiled)->outputs()[0])[0], copy_of(r->outputs[0])[0], 1e-5) << "step " << step;
    for (size_t p = 0; p < 4; ++p) {
      std::memcpy(eager->buffers[2 + p]->data(), r->outputs[1 + p]->data(), eager->buffers[2 + p]->nbytes());
      std::vector<float> a = copy_of(stepped->buffers[2 + p]), b = copy_of(eager->buffers[2 + p]);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-5) << "step " << step << " param " << p;
    }
  }
}

// Materialized values are kernel boundaries only: the same results, more kernels, and their
// buffers are intermediates.
TEST_F(StepProgramTest, MaterializeAddsKernelsNotResults) {
  auto a = bench::make_mlp_step(*engine_, 16, 20, 12, 5, 0.1f, 9);
  auto b = bench::make_mlp_step(*engine_, 16, 20, 12, 5, 0.1f, 9);
  ASSERT_TRUE(a.ok() && b.ok());
  auto fused = engine_->compile_step(a->spec(false));
  auto split = engine_->compile_step(b->spec(true));
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_GT((*split)->stats().kernels, (*fused)->stats().kernels);
  EXPECT_EQ((*split)->outputs().size(), 1u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*fused)->run().ok());
    ASSERT_TRUE((*split)->run().ok());
    EXPECT_NEAR(copy_of((*fused)->outputs()[0])[0], copy_of((*split)->outputs()[0])[0], 1e-5);
  }
  for (size_t p = 2; p < 6; ++p) {
    std::vector<float> x = copy_of(a->buffers[p]), y = copy_of(b->buffers[p]);
    for (size_t k = 0; k < x.size(); ++k) ASSERT_NEAR(x[k], y[k], 1e-5) << "param " << p;
  }
}

// Intermediates with disjoint lifetimes share buffers: a chain of materialized reductions needs
// at most two live intermediates at a time, however long it is.
TEST_F(StepProgramTest, IntermediatesShareMemory) {
  std::vector<float> v(64 * 64, 0.5f);
  UOpRef x = leaf(v, {64, 64});
  UOpRef cur = x;
  for (int i = 0; i < 6; ++i) {
    UOpRef s = *fe::sum(cur, {0}, true);               // a column sum broadcast: its own kernel
    UOpRef e = *fe::broadcast_to(s, {64, 64});
    cur = *fe::alu(Ops::SUB, {x, e});
  }
  UOpRef out = *fe::sum(cur, {0, 1}, false);
  auto compiled = engine_->compile_step(StepSpec{{out}, bound_, {}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const StepStats& st = (*compiled)->stats();
  EXPECT_GE(st.kernels, 7u);
  EXPECT_LE(st.intermediates, 2u) << st.kernels << " kernels";
  auto r = engine_->realize({out}, bound_);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_NEAR(copy_of((*compiled)->outputs()[0])[0], copy_of(r->outputs[0])[0], 1e-3);
}

// a <- b and b <- a in one step swap the two: every value is read before any target is written.
TEST_F(StepProgramTest, AssignsReadOldValues) {
  UOpRef a = leaf({1, 2, 3}, {3});
  UOpRef b = leaf({10, 20, 30}, {3});
  UOpRef c = leaf({100, 200, 300}, {3});
  UOpRef sum = *fe::alu(Ops::ADD, {a, b});
  StepSpec spec{{sum}, bound_, {{buf(a), b}, {buf(b), a}, {buf(c), *fe::alu(Ops::ADD, {c, a})}}};
  auto compiled = engine_->compile_step(spec);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_EQ(values(buf(a)), (std::vector<float>{10, 20, 30}));
  EXPECT_EQ(values(buf(b)), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values(buf(c)), (std::vector<float>{101, 202, 303}));
  EXPECT_EQ(values((*compiled)->outputs()[0]), (std::vector<float>{11, 22, 33}));
  ASSERT_TRUE((*compiled)->run().ok());  // and back
  EXPECT_EQ(values(buf(a)), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values(buf(c)), (std::vector<float>{111, 222, 333}));
}

// A value with a symbolic dim is computed only below its extent: the assign writes that part, per
// outer row, and leaves the rest of the target as it was; the extent is read at each run.
TEST_F(StepProgramTest, ASymbolicValueWritesItsValidPartOnly) {
  UOpRef a = leaf({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  UOpRef extent = int_scalar(2);
  BufferPtr n = buf(extent);
  UOpRef doubled = *fe::alu(Ops::ADD, {*fe::bound(a, 1, extent), *fe::bound(a, 1, extent)});
  auto compiled = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), doubled}}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_EQ(values(buf(a)), (std::vector<float>{2, 4, 3, 4, 10, 12, 7, 8}));
  const int32_t three = 3;
  std::memcpy(n->data(), &three, sizeof three);
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_EQ(values(buf(a)), (std::vector<float>{4, 8, 6, 4, 20, 24, 14, 8}));
  // Two symbolic dims in one value: refused, naming the assign.
  UOpRef both = *fe::bound(*fe::bound(a, 1, extent), 0, extent);
  auto refused = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), *fe::alu(Ops::NEG, {both})}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("assign 0: a value with 2 symbolic dims"), std::string::npos) << refused.status();
}

// A region assign (a write through a shrink view) writes its box from the part alone, at a begin
// read per run; what would fall past the axis is not written. The value's full form (the target
// with the box replaced, here write_view's) is what the box copy must equal.
TEST_F(StepProgramTest, ARegionWritesItsBoxAtABeginReadPerRun) {
  UOpRef a = leaf({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  UOpRef part = leaf({-1, -2, -3, -4}, {2, 1, 2});
  UOpRef begin = int_scalar(1);
  BufferPtr at = buf(begin);
  UOpRef value = *fe::write_view(a, *fe::slice_at(a, 1, begin, 1), part);
  auto region = std::make_shared<StepRegion>(StepRegion{part, {0, 0, 0}, {2, 1, 2}, 1, begin});
  UOpRef total = *fe::sum(value, {0, 1, 2}, false);
  auto compiled = engine_->compile_step(StepSpec{{total}, bound_, {{buf(a), value, region}}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ((*compiled)->stats().kernels, 1u);  // the sum: the full value is never computed
  EXPECT_EQ((*compiled)->stats().box_assigns, 1u);
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_EQ(values(buf(a)), (std::vector<float>{1, 2, -1, -2, 5, 6, 7, 8, -3, -4, 11, 12}));
  EXPECT_EQ(values((*compiled)->outputs()[0]), (std::vector<float>{1 + 2 + 5 + 6 + 7 + 8 + 11 + 12 - 10}));
  for (int32_t b : {2, 3, 7}) {  // the last row, then past the axis: nothing written
    std::memcpy(at->data(), &b, sizeof b);
    ASSERT_TRUE((*compiled)->run().ok());
  }
  EXPECT_EQ(values(buf(a)), (std::vector<float>{1, 2, -1, -2, -1, -2, 7, 8, -3, -4, -3, -4}));
  // A box that does not fit the target is refused, naming the assign.
  auto wide = std::make_shared<StepRegion>(StepRegion{part, {0, 2, 0}, {2, 2, 2}, -1, nullptr});
  auto refused = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), value, wide}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("assign 0: its region does not describe a box"), std::string::npos)
      << refused.status();
}

TEST_F(StepProgramTest, CancelledRunChangesNoTarget) {
  UOpRef a = leaf({1, 2, 3}, {3});
  UOpRef big = *fe::sum(*fe::alu(Ops::MUL, {a, a}), {0}, true);
  UOpRef next = *fe::alu(Ops::ADD, {a, *fe::broadcast_to(big, {3})});
  auto compiled = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), next}}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::Status s = (*compiled)->run([] { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(values(buf(a)), (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_EQ(values(buf(a)), (std::vector<float>{15, 16, 17}));
}

TEST_F(StepProgramTest, BadAssignsAreInvalidArgument) {
  UOpRef a = leaf({1, 2, 3}, {3});
  UOpRef b = leaf({1, 2, 3, 4}, {4});
  auto wrong_shape = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), b}}});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_EQ(wrong_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_shape.status().message().find("assign 0"), std::string::npos) << wrong_shape.status();
  UOpRef a2 = *fe::alu(Ops::ADD, {a, a});
  auto twice = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), a2}, {buf(a), a}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("assigned twice"), std::string::npos) << twice.status();
  auto as_int = fe::cast(a, DType::Int32);
  auto wrong_dtype = engine_->compile_step(StepSpec{{}, bound_, {{buf(a), *as_int}}});
  EXPECT_EQ(wrong_dtype.status().code(), absl::StatusCode::kInvalidArgument);
}

// A step keeps what it needs alive: its buffers outlive the caller's bindings, and releasing the
// step returns every buffer it allocated.
TEST_F(StepProgramTest, StepOwnsItsBuffers) {
  const int64_t before = Buffer::live_count();
  {
    auto m = bench::make_mlp_step(*engine_, 8, 6, 5, 3, 0.1f, 1);
    ASSERT_TRUE(m.ok());
    auto compiled = engine_->compile_step(m->spec());
    ASSERT_TRUE(compiled.ok());
    std::vector<BufferPtr> params(m->buffers.begin() + 2, m->buffers.end());
    std::vector<float> w_before = copy_of(params[0]);
    m = absl::InternalError("dropped");  // the caller's graph and bindings are gone
    ASSERT_TRUE((*compiled)->run().ok());
    EXPECT_NE(copy_of(params[0]), w_before);
  }
  EXPECT_EQ(Buffer::live_count(), before);
}

}  // namespace
}  // namespace polygrad
