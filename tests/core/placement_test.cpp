// Device placement: device names, COPY nodes realized as transfers, kernels refused when their
// inputs live on two devices, and (with a GPU) graphs computed on CUDA against the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

#include "core/engine/device_streams.h"
#include "core/engine/engine.h"
#include "core/engine/placement.h"
#include "core/engine/step_program.h"
#include "core/frontend/composites.h"
#include "core/frontend/gradient.h"
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

// A session's streams: one per GPU, refused with the reason where the GPU is absent.
TEST(DeviceStreams, OnePerGpuOrTheReason) {
  DeviceStreams streams;
  EXPECT_EQ(streams.on(kCpuDevice).status().code(), absl::StatusCode::kInvalidArgument);
  if (cuda_availability().available) {
    auto a = streams.on(1), b = streams.on(1);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    return;
  }
  auto s = streams.on(1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("CUDA:0 is not available: "), std::string::npos) << s.status();
}

// Memory per device, as the device-memory metrics show it: one entry per GPU that has held a
// buffer, kept at zero after.
TEST(DeviceUsage, OneEntryPerDevice) {
  auto usage_of = [](const std::string& device) {
    for (const Buffer::DeviceUsage& u : Buffer::live_by_device())
      if (u.device == device) return std::optional<Buffer::DeviceUsage>(u);
    return std::optional<Buffer::DeviceUsage>();
  };
  EXPECT_EQ(Buffer::live_by_device().front().device, "CPU");
  std::vector<float> fake(10);
  int freed = 0;
  {
    // A device name no real GPU of this process has, so other tests' buffers do not count.
    BufferPtr b = Buffer::adopt_device(DType::Float32, {10}, fake.data(), "CUDA:97", [&](void*) { ++freed; });
    auto u = usage_of("CUDA:97");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->count, 1);
    EXPECT_EQ(u->bytes, 40);
  }
  EXPECT_EQ(freed, 1);
  auto after = usage_of("CUDA:97");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->count, 0);
  EXPECT_EQ(after->bytes, 0);
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

// A gradient returns through a COPY to the device its source lives on: the gradient of x moved
// to CUDA:0 is a copy back to x's device (the CPU), so the update of x reads one device. Placement
// decides that without a GPU; on the CPU alone the same graph runs and gives the plain gradient.
TEST_F(PlacementTest, GradientsReturnThroughACopyToTheSourceDevice) {
  std::vector<float> a;
  UOpRef x = host_leaf({2, 3}, a);
  UOpRef on_gpu = *fe::copy(x, 1);
  auto grads = fe::gradient(*fe::sum(*fe::alu(Ops::MUL, {on_gpu, on_gpu}), {}, false), {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  const UOpRef& gx = (*grads)[0];
  ASSERT_EQ(gx->op, Ops::COPY);
  EXPECT_EQ(gx->arg_int(), fe::kCopyToSourceDevice);
  auto placed = place({gx, *fe::alu(Ops::SUB, {x, gx})}, bound_);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->at(gx.get()), kCpuDevice);
  EXPECT_EQ(placed->at(gx->src[0].get()), 1) << "the gradient itself is computed on CUDA:0";
  EXPECT_EQ(copy_target(*gx, *placed), kCpuDevice);
  // A copy back from a node with no device of its own stays where its consumer is.
  std::unordered_map<const UOp*, int64_t> nowhere{{x.get(), kAnyDevice}};
  EXPECT_EQ(copy_target(*gx, nowhere), kAnyDevice);

  // Moved to the CPU instead: the whole graph runs here, the copy back is a transfer.
  auto cpu_grads = fe::gradient(*fe::sum(*fe::alu(Ops::MUL, {*fe::copy(x, kCpuDevice), x}), {}, false), {x});
  ASSERT_TRUE(cpu_grads.ok()) << cpu_grads.status();
  auto r = engine_->realize({(*cpu_grads)[0]}, bound_);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> got = read(r->outputs[0]);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], 2 * a[i]);
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
  // A compiled step over the mixed graph is refused the same way, before any device is opened.
  auto compiled = engine_->compile_step(StepSpec{.outputs = {*fe::alu(Ops::ADD, {x, *fe::alu(Ops::MUL, {g, c})})}, .bound = bound_});
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument) << compiled.status();
}

// Compiled steps run on the one device their tensors live on. What can be decided without a GPU:
// a step on a GPU that is absent fails with the reason, a transfer inside a step or parts on two
// devices are refused naming the node, and an assign across devices names both.
TEST_F(PlacementTest, CompiledStepsRunOnOneDevice) {
  std::vector<float> a, fake(6);
  UOpRef x = host_leaf({2, 3}, a);
  BufferPtr on_gpu = Buffer::adopt_device(DType::Float32, {2, 3}, fake.data(), "CUDA:0", [](void*) {});
  UOpRef g = *fe::buffer(on_gpu->id(), DType::Float32, {2, 3});
  bound_[g.get()] = on_gpu;
  UOpRef twice = *fe::alu(Ops::MUL, {g, *fe::constant(2.0, DType::Float32, {2, 3})});

  auto copy = engine_->compile_step(StepSpec{.outputs = {*fe::copy(*fe::alu(Ops::NEG, {x}), kCpuDevice)}, .bound = bound_});
  EXPECT_EQ(copy.status().code(), absl::StatusCode::kUnimplemented) << copy.status();
  EXPECT_NE(copy.status().message().find("node COPY float32[2,3] copies a computed NEG float32[2,3] to CPU"),
            std::string::npos)
      << copy.status();

  auto two = engine_->compile_step(StepSpec{.outputs = {*fe::alu(Ops::NEG, {x}), twice}, .bound = bound_});
  EXPECT_EQ(two.status().code(), absl::StatusCode::kUnimplemented) << two.status();
  EXPECT_NE(two.status().message().find("a compiled step runs on one device"), std::string::npos) << two.status();

  BufferPtr host_target = *engine_->allocate(DType::Float32, {2, 3});
  auto across = engine_->compile_step(StepSpec{.bound = bound_, .assigns = {StepAssign{host_target, twice}}});
  EXPECT_EQ(across.status().code(), absl::StatusCode::kInvalidArgument) << across.status();
  EXPECT_NE(across.status().message().find("assign 0: the target buffer is on CPU but the step runs on CUDA:0"),
            std::string::npos)
      << across.status();

  if (cuda_availability().available) return;  // the fake buffer must never reach a real GPU
  auto absent = engine_->compile_step(StepSpec{.outputs = {twice}, .bound = bound_});
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kFailedPrecondition) << absent.status();
  EXPECT_NE(absent.status().message().find("CUDA:0 is not available: "), std::string::npos) << absent.status();
  // Constants only, with the GPU as the default device: the same reason.
  RealizeOptions on_gpu_default;
  on_gpu_default.default_device = 1;
  auto consts = engine_->compile_step(StepSpec{.outputs = {*fe::constant(1.0, DType::Float32, {4})}}, on_gpu_default);
  EXPECT_EQ(consts.status().code(), absl::StatusCode::kFailedPrecondition) << consts.status();
}

// A COPY of a tensor with a buffer inside a step is a transfer before every run: the kernels see
// what the source holds at that run (here CPU to CPU; a GPU step's uploads take the same path).
TEST_F(PlacementTest, CompiledStepsTransferBufferedInputsOnEveryRun) {
  std::vector<float> a;
  UOpRef x = host_leaf({5}, a);
  UOpRef twice = *fe::alu(Ops::ADD, {*fe::copy(x, kCpuDevice), *fe::copy(x, kCpuDevice)});
  auto compiled = engine_->compile_step(StepSpec{.outputs = {twice}, .bound = bound_});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ((*compiled)->device(), "CPU");
  for (int run = 0; run < 3; ++run) {
    for (float& v : a) v += 1.5f;
    std::memcpy(bound_.at(x.get())->data(), a.data(), a.size() * 4);
    ASSERT_TRUE((*compiled)->run().ok());
    std::vector<float> got = read((*compiled)->outputs()[0]);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i] + a[i]) << run << " " << i;
  }
}

// Moving contents between buffers through the engine: host buffers here; a GPU buffer without
// a GPU fails with the reason and is never dereferenced.
TEST_F(PlacementTest, EngineTransfers) {
  std::vector<float> a, b;
  UOpRef x = host_leaf({3, 4}, a), y = host_leaf({3, 4}, b);
  BufferPtr bx = bound_.at(x.get()), by = bound_.at(y.get());
  auto cloned = engine_->clone(bx);
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  EXPECT_NE((*cloned)->id(), bx->id());
  EXPECT_EQ(read(*cloned), a);
  ASSERT_TRUE(engine_->copy(**cloned, *by).ok());
  EXPECT_EQ(read(*cloned), b);
  EXPECT_EQ(read(bx), a);
  ASSERT_TRUE(engine_->write(*bx, b.data(), b.size() * 4).ok());
  EXPECT_EQ(read(bx), b);
  EXPECT_EQ(engine_->write(*bx, b.data(), 4).code(), absl::StatusCode::kInternal);
  auto same = engine_->to_host(bx);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->get(), bx.get());

  if (cuda_availability().available) return;
  std::vector<float> fake(12);
  BufferPtr on_gpu = Buffer::adopt_device(DType::Float32, {3, 4}, fake.data(), "CUDA:0", [](void*) {});
  for (absl::Status s : {engine_->write(*on_gpu, a.data(), a.size() * 4), engine_->copy(*on_gpu, *bx),
                         engine_->copy(*bx, *on_gpu), engine_->to_host(on_gpu).status(), engine_->clone(on_gpu).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("CUDA:0 is not available: "), std::string::npos) << s;
  }
  EXPECT_EQ(fake, std::vector<float>(12, 0.0f));
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
  // The same structure again: the GPU program comes from the schedule cache, with fresh outputs.
  auto again = engine_->realize({graph(*fe::copy(x, 1), *fe::copy(wt, 1))}, bound_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->stats.schedule_cache_hit);
  EXPECT_EQ(again->stats.compiled, 0u);
  EXPECT_NE(again->outputs[0].get(), gpu->outputs[0].get());
  auto back = engine_->realize({*fe::copy(on_gpu, kCpuDevice)}, bound_);
  ASSERT_TRUE(back.ok()) << back.status();
  std::vector<float> want = read(cpu->outputs[0]), got = read(back->outputs[0]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
}

// With a GPU: a compiled SGD step on CUDA:0 (parameters, inputs and the update all there) runs
// like the same step on the CPU, run after run, and reads its parameters back unchanged between.
TEST_F(PlacementTest, CompiledStepOnCudaMatchesTheCpu) {
  if (!cuda_availability().available) GTEST_SKIP() << "CUDA unavailable: " << cuda_availability().detail;
  std::vector<float> xv, wv;
  UOpRef x = host_leaf({16, 24}, xv), w = host_leaf({24, 8}, wv);
  auto step = [&](const UOpRef& xx, const UOpRef& ww) {
    UOpRef loss = *fe::mean(*fe::alu(Ops::MUL, {*fe::matmul(xx, ww), *fe::matmul(xx, ww)}), {0, 1}, false);
    UOpRef grad = (*fe::gradient(loss, {ww}))[0];
    return std::pair{loss, *fe::alu(Ops::SUB, {ww, *fe::alu(Ops::MUL, {grad, *fe::constant(0.05, DType::Float32, {24, 8})})})};
  };
  // The same values on the GPU, as bound leaves of their own.
  auto upload = [&](const UOpRef& leaf) {
    auto r = engine_->realize({*fe::copy(leaf, 1)}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    BufferPtr b = r->outputs[0];
    UOpRef g = *fe::buffer(b->id(), DType::Float32, leaf->shape);
    bound_[g.get()] = b;
    leaves_.push_back(g);
    return g;
  };
  UOpRef gx = upload(x), gw = upload(w);
  auto [cpu_loss, cpu_w] = step(x, w);
  auto [gpu_loss, gpu_w] = step(gx, gw);
  auto cpu = engine_->compile_step(StepSpec{.outputs = {cpu_loss}, .bound = bound_, .assigns = {StepAssign{bound_.at(w.get()), cpu_w}}});
  auto gpu = engine_->compile_step(StepSpec{.outputs = {gpu_loss}, .bound = bound_, .assigns = {StepAssign{bound_.at(gw.get()), gpu_w}}});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->device(), "CUDA:0");
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE((*cpu)->run().ok());
    ASSERT_TRUE((*gpu)->run().ok());
    auto loss = engine_->to_host((*gpu)->outputs()[0]);
    auto weights = engine_->to_host(bound_.at(gw.get()));
    ASSERT_TRUE(loss.ok() && weights.ok());
    EXPECT_NEAR(read(*loss)[0], read((*cpu)->outputs()[0])[0], 1e-4f) << run;
    std::vector<float> want = read(bound_.at(w.get())), got = read(*weights);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << run << " " << i;
  }
}

}  // namespace
}  // namespace polygrad
