// Device placement: device names, COPY nodes realized as transfers, kernels refused when their
// inputs live on two devices, and (with a GPU) graphs computed on CUDA against the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/engine/engine.h"
#include "core/engine/placement.h"
#include "core/engine/plan.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/runtime/cuda/discovery.h"

namespace polygrad {
namespace {

namespace fe = frontend;

TEST(DeviceNames, ParseAndPrint) {
  EXPECT_EQ(*device_code("cpu"), kCpuDevice);
  EXPECT_EQ(*device_code("CPU:0"), kCpuDevice);
  EXPECT_EQ(*device_code("cuda"), 1);
  EXPECT_EQ(*device_code("CUDA:0"), 1);
  EXPECT_EQ(*device_code("Cuda:3"), 4);
  for (const char* bad : {"", "gpu", "cuda:", "cuda:x", "cuda:-1", "CPU:1", "cuda:0:1", "cuda:99999"})
    EXPECT_EQ(device_code(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_EQ(device_name(kCpuDevice), "CPU");
  EXPECT_EQ(device_name(1), "CUDA:0");
  EXPECT_EQ(device_name(4), "CUDA:3");
}

class PlacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::create({.threads = 1});
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
  }
  UOpRef host_leaf(Shape shape, std::vector<float>& v) {
    BufferPtr b = *engine_->allocate(DType::Float32, shape);
    v.resize(b->numel());
    std::uniform_real_distribution<float> d(-2, 2);
    for (float& x : v) x = d(rng_);
    std::memcpy(b->data(), v.data(), b->nbytes());
    UOpRef x = *fe::buffer(b->id(), DType::Float32, shape);
    bound_[x.get()] = b;
    leaves_.push_back(x);
    return x;
  }
  std::vector<float> read(const BufferPtr& b) {
    EXPECT_TRUE(b->on_host());
    std::vector<float> out(b->numel());
    std::memcpy(out.data(), b->data(), b->nbytes());
    return out;
  }
  std::unique_ptr<Engine> engine_;
  Bindings bound_;
  std::vector<UOpRef> leaves_;
  std::mt19937 rng_{7};
};

TEST_F(PlacementTest, CopyToTheCpuIsATransferBetweenKernels) {
  std::vector<float> a, b;
  UOpRef x = host_leaf({4, 5}, a), y = host_leaf({4, 5}, b);
  UOpRef moved = *fe::copy(*fe::alu(Ops::MUL, {x, y}), kCpuDevice);
  UOpRef out = *fe::alu(Ops::ADD, {moved, x});
  EXPECT_FALSE(needs_placement({*fe::alu(Ops::ADD, {x, y})}, bound_));
  EXPECT_TRUE(needs_placement({out}, bound_));
  auto r = engine_->realize({out, moved}, bound_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.kernels, 2u);  // x*y, then moved+x: the copy is no kernel
  std::vector<float> got = read(r->outputs[0]), copied = read(r->outputs[1]);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(copied[i], a[i] * b[i]);
    EXPECT_EQ(got[i], a[i] * b[i] + a[i]);
  }
}

TEST_F(PlacementTest, CopyToCudaWithoutCudaFailsWithTheReason) {
  if (cuda_availability().available) GTEST_SKIP() << "CUDA is available here";
  std::vector<float> a;
  UOpRef x = host_leaf({8}, a);
  auto r = engine_->realize({*fe::copy(x, 1)}, bound_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("CUDA:0 is not available: "), std::string::npos) << r.status();
}

// A buffer that says it is on CUDA:0 beside a host buffer in one kernel: refused, naming the
// node, before anything touches the (here fake) device memory.
TEST_F(PlacementTest, MixingDevicesInOneKernelIsRefused) {
  std::vector<float> a, fake(6);
  UOpRef x = host_leaf({2, 3}, a);
  BufferPtr on_gpu = Buffer::adopt_device(DType::Float32, {2, 3}, fake.data(), "CUDA:0", [](void*) {});
  UOpRef g = *fe::buffer(on_gpu->id(), DType::Float32, {2, 3});
  bound_[g.get()] = on_gpu;
  UOpRef c = *fe::constant(2.0, DType::Float32, {2, 3});
  // A constant takes its consumer's device; the sum mixes the two.
  auto placed = place({*fe::alu(Ops::MUL, {g, c})}, bound_);
  ASSERT_TRUE(placed.ok()) << placed.status();
  auto r = engine_->realize({*fe::alu(Ops::ADD, {x, *fe::alu(Ops::MUL, {g, c})})}, bound_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("node ADD float32[2,3] reads tensors on CPU and CUDA:0"), std::string::npos)
      << r.status();
  // A compiled step with a device buffer is refused as not implemented, not run on the CPU.
  auto plan = engine_->plan(PlanSpec{.outputs = {*fe::alu(Ops::MUL, {g, c})}, .bound = bound_});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
}

// With a GPU: a small MLP-shaped graph and softmax computed on CUDA:0 match the CPU.
TEST_F(PlacementTest, GraphsOnCudaMatchTheCpu) {
  if (!cuda_availability().available) GTEST_SKIP() << "CUDA unavailable: " << cuda_availability().detail;
  std::vector<float> a, w;
  UOpRef x = host_leaf({33, 70}, a), wt = host_leaf({70, 19}, w);
  auto graph = [&](const UOpRef& xx, const UOpRef& ww) {
    return *fe::softmax(*fe::alu(Ops::MAX, {*fe::matmul(xx, ww), *fe::constant(0.0, DType::Float32, {33, 19})}), -1);
  };
  auto cpu = engine_->realize({graph(x, wt)}, bound_);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  UOpRef on_gpu = graph(*fe::copy(x, 1), *fe::copy(wt, 1));
  auto gpu = engine_->realize({on_gpu}, bound_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->outputs[0]->device(), "CUDA:0");
  auto back = engine_->realize({*fe::copy(on_gpu, kCpuDevice)}, bound_);
  ASSERT_TRUE(back.ok()) << back.status();
  std::vector<float> want = read(cpu->outputs[0]), got = read(back->outputs[0]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
}

}  // namespace
}  // namespace polygrad
