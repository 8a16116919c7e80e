// The pipeline's passes (core/engine/pipeline.h) as an observer sees them: every pass of a
// realize and of a compiled step on the CPU reports its name, in pipeline order, and a repeated
// realize runs only the schedule-cache lookup and the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/step_program.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad {
namespace {

namespace fe = frontend;

class PassNames final : public EngineObserver {
 public:
  void on_pass(std::string_view pass, double seconds) override {
    std::lock_guard lock(mu_);
    EXPECT_GE(seconds, 0.0);
    // Per-kernel passes repeat; consecutive repeats of one name are folded for the comparison.
    if (names_.empty() || names_.back() != pass) names_.emplace_back(pass);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu_);
    return std::exchange(names_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::string> names_;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::create({.threads = 2, .observer = &passes_});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
    a_ = *engine_->allocate(DType::Float32, {8, 16});
    x_ = *fe::buffer(a_->id(), DType::Float32, {8, 16});
    bound_[x_.get()] = a_;
  }
  PassNames passes_;
  std::unique_ptr<Engine> engine_;
  BufferPtr a_;
  UOpRef x_;
  Bindings bound_;
};

// One kernel's passes, in order.
const std::vector<std::string> kKernelPasses = {"lower", "simplify", "store_reuse", "optimize", "linearize", "render", "tune"};

TEST_F(PipelineTest, RealizeReportsEveryPassInOrder) {
  UOpRef y = *fe::alu(Ops::ADD, {*fe::alu(Ops::MUL, {x_, x_}), x_});  // one kernel
  ASSERT_TRUE(engine_->realize({y}, bound_).ok());
  std::vector<std::string> want = {"schedule_cache", "schedule"};
  want.insert(want.end(), kKernelPasses.begin(), kKernelPasses.end());
  want.insert(want.end(), {"compile", "run"});
  EXPECT_EQ(passes_.take(), want);
  // The same structure again: the stored program runs.
  ASSERT_TRUE(engine_->realize({y}, bound_).ok());
  EXPECT_EQ(passes_.take(), (std::vector<std::string>{"schedule_cache", "run"}));
}

TEST_F(PipelineTest, SeveralKernelsRunThePassesPerKernel) {
  auto y = fe::softmax(x_, 0);  // three kernels: column reductions broadcast back are materialized
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(engine_->realize({*y}, bound_).ok());
  std::vector<std::string> got = passes_.take();
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got.front(), "schedule_cache");
  EXPECT_EQ(got.back(), "run");
  EXPECT_EQ(std::count(got.begin(), got.end(), "lower"), 3);
  EXPECT_EQ(std::count(got.begin(), got.end(), "render"), 3);
}

TEST_F(PipelineTest, CompiledStepReportsItsPasses) {
  UOpRef next = *fe::alu(Ops::MUL, {x_, x_});
  auto compiled = engine_->compile_step(StepSpec{{}, bound_, {{a_, next}}, {}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::vector<std::string> want = {"schedule"};
  want.insert(want.end(), kKernelPasses.begin(), kKernelPasses.end());
  want.insert(want.end(), {"compile", "plan_memory"});
  EXPECT_EQ(passes_.take(), want);
  // A run launches; it compiles nothing.
  ASSERT_TRUE((*compiled)->run().ok());
  EXPECT_TRUE(passes_.take().empty());
}

}  // namespace
}  // namespace polygrad
