// Error tests: a kernel launch that fails (as a GPU's cuLaunchKernel can) fails the realize or
// compiled step that made it, with the launch's status — never a message on stderr and a
// result computed from garbage. The failing program is put into the engine's kernel cache under
// the key the engine's own kernel has, so every path that launches it is the engine's own.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/cache/kernel_cache.h"
#include "core/engine/engine.h"
#include "core/engine/kernels_for.h"
#include "core/engine/step_program.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cpu/compiler.h"

namespace polygrad {
namespace {

namespace fe = frontend;

// A loaded kernel whose every launch fails the way a device reports it.
class FailingProgram final : public Program {
 public:
  absl::Status launch(void**, int64_t, int64_t) const override {
    return absl::InternalError("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED (719): emulated");
  }
};

class LaunchStatusTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    auto e = Engine::create({.threads = 4});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
    const int64_t n = GetParam();
    a_ = *engine_->allocate(DType::Float32, {n});
    x_ = *fe::buffer(a_->id(), DType::Float32, {n});
    bound_[x_.get()] = a_;
    y_ = *fe::alu(Ops::ADD, {*fe::alu(Ops::MUL, {x_, x_}), x_});
    // The engine's key for y's one kernel, as Engine::Impl::render makes it.
    auto cc = CpuCompiler::find("", std::chrono::seconds(120));
    ASSERT_TRUE(cc.ok()) << cc.status();
    auto kernels = kernels_for({y_}, [&](const UOp* u) { return bound_.count(u) > 0; });
    ASSERT_TRUE(kernels.ok() && kernels->size() == 1u);
    const std::string key = KernelCache::key("CPU", cc->identity(), *render_c((*kernels)[0]));
    auto put = engine_->kernel_cache().get_or_build(
        key, [](const KernelCache::StopFn&) -> absl::StatusOr<std::string> { return std::string("emulated"); },
        [](const std::string&) -> absl::StatusOr<ProgramPtr> { return std::make_shared<FailingProgram>(); });
    ASSERT_TRUE(put.ok()) << put.status();
  }

  static void expect_launch_error(const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_NE(s.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string_view::npos) << s;
  }

  std::unique_ptr<Engine> engine_;
  BufferPtr a_;
  UOpRef x_, y_;
  Bindings bound_;
};

TEST_P(LaunchStatusTest, RealizeFailsWithTheLaunchStatus) {
  auto r = engine_->realize({y_}, bound_);
  ASSERT_FALSE(r.ok());
  expect_launch_error(r.status());
  // The program the schedule cache kept launches the same kernel: the same error.
  auto again = engine_->realize({y_}, bound_);
  ASSERT_FALSE(again.ok());
  expect_launch_error(again.status());
  EXPECT_EQ(engine_->schedule_cache_entries(), 1u);
}

TEST_P(LaunchStatusTest, StepRunFailsAndLeavesItsTargetsAlone) {
  std::vector<float> before(a_->numel(), 1.5f);
  std::memcpy(a_->data(), before.data(), a_->nbytes());
  auto compiled = engine_->compile_step(StepSpec{{}, bound_, {{a_, y_}}, {}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  expect_launch_error((*compiled)->run());
  EXPECT_EQ(std::memcmp(a_->data(), before.data(), a_->nbytes()), 0);
}

// One chunk on the calling thread, and a launch split across the pool (the first failure wins).
INSTANTIATE_TEST_SUITE_P(Sizes, LaunchStatusTest, ::testing::Values(int64_t{64}, int64_t{1} << 17));

}  // namespace
}  // namespace polygrad
