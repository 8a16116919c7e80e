// The CUDA runtime: launch geometry, device-buffer accounting and, where a GPU exists, a kernel
// from the cache run on it against the same graph on the CPU. Without a GPU the GPU test skips
// saying why; the rest runs everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/cache/kernel_cache.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/cubin.h"
#include "core/runtime/cuda/device.h"
#include "core/runtime/cuda/discovery.h"

namespace polygrad {
namespace {

namespace fe = frontend;

TEST(LaunchDims, OneThreadPerIterationUpToAFullGpuThenGridStride) {
  EXPECT_EQ(launch_dims(0, 132).grid, 1u);  // a kernel without an outer loop still runs once
  EXPECT_EQ(launch_dims(1, 132).grid, 1u);
  EXPECT_EQ(launch_dims(256, 132).grid, 1u);
  EXPECT_EQ(launch_dims(257, 132).grid, 2u);
  EXPECT_EQ(launch_dims(1000, 132).block, 256u);
  EXPECT_EQ(launch_dims(int64_t{1} << 40, 132).grid, 132u * 32u);
  EXPECT_EQ(launch_dims(int64_t{1} << 40, 0).grid, 32u);  // an unknown SM count still launches
  for (int64_t n : {1, 255, 256, 70000, 1 << 24}) {
    LaunchDims d = launch_dims(n, 132);
    EXPECT_GE(d.grid, 1u);
    EXPECT_LE(d.grid * int64_t{d.block}, std::max<int64_t>(n, 256) + 255);
  }
}

TEST(DeviceBuffer, AccountedApartFromHostAndReleasedToItsOwner) {
  const int64_t host_bytes = Buffer::live_bytes() - Buffer::live_device_bytes();
  const int64_t device_bytes = Buffer::live_device_bytes();
  std::vector<float> backing(24);
  void* released = nullptr;
  {
    BufferPtr b = Buffer::adopt_device(DType::Float32, {4, 6}, backing.data(), "CUDA:0",
                                       [&](void* p) { released = p; });
    EXPECT_EQ(b->device(), "CUDA:0");
    EXPECT_FALSE(b->on_host());
    EXPECT_EQ(b->nbytes(), 96u);
    EXPECT_EQ(Buffer::live_device_bytes(), device_bytes + 96);
    EXPECT_EQ(Buffer::live_bytes() - Buffer::live_device_bytes(), host_bytes);
    EXPECT_TRUE(Buffer::allocate_host(DType::Float32, {2})->on_host());
  }
  EXPECT_EQ(released, backing.data());
  EXPECT_EQ(Buffer::live_device_bytes(), device_bytes);
}

TEST(CudaDevice, WithoutCudaSaysWhy) {
  if (cuda_availability().available) GTEST_SKIP() << "CUDA is available here: " << cuda_availability().detail;
  auto d = CudaDevice::get(0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(d.status().message().empty());
}

// A rendered kernel through NVRTC, the kernel cache and the driver: out = a * b + a.
TEST(CudaDevice, RunsACachedKernelOnTheGpu) {
  if (!cuda_availability().available) GTEST_SKIP() << "CUDA unavailable: " << cuda_availability().detail;
  auto dev = CudaDevice::get(0);
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto stream = CudaStream::create(**dev);
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr int64_t kN = 100003;  // not a multiple of the block: the tail threads must idle
  UOpRef a = *fe::buffer(1, DType::Float32, {kN}), b = *fe::buffer(2, DType::Float32, {kN});
  auto ks = kernels_for({*fe::alu(Ops::ADD, {*fe::alu(Ops::MUL, {a, b}), a})},
                        [](const UOp* n) { return n->op == Ops::BUFFER; });
  ASSERT_TRUE(ks.ok() && ks->size() == 1u);
  std::string src = *render_cuda((*ks)[0]);
  KernelCache cache("");
  auto found = cubin_from_cache(cache, **Nvrtc::get(), src, (*dev)->props().arch(),
                                [&](const std::string& bin) { return (*dev)->load(bin, 3); });
  ASSERT_TRUE(found.ok()) << found.status();
  std::vector<float> ha(kN), hb(kN), out(kN);
  for (int64_t i = 0; i < kN; ++i) {
    ha[i] = static_cast<float>(i % 97) * 0.5f;
    hb[i] = static_cast<float>(i % 13) - 6.0f;
  }
  auto ba = (*dev)->allocate(DType::Float32, {kN}, **stream), bb = (*dev)->allocate(DType::Float32, {kN}, **stream),
       bo = (*dev)->allocate(DType::Float32, {kN}, **stream);
  ASSERT_TRUE(ba.ok() && bb.ok() && bo.ok());
  auto addr = [](const BufferPtr& p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p->data())); };
  ASSERT_TRUE((*dev)->upload(ha.data(), addr(*ba), kN * 4, **stream).ok());
  ASSERT_TRUE((*dev)->upload(hb.data(), addr(*bb), kN * 4, **stream).ok());
  auto timer = CudaDevice::Timer::start(**stream);
  ASSERT_TRUE(timer.ok()) << timer.status();
  const void* args[] = {(*bo)->data(), (*ba)->data(), (*bb)->data()};
  const auto& program = static_cast<const CudaProgram&>(*found->program);
  ASSERT_TRUE(program.run(**stream, args, 3, (*ks)[0].outer_size).ok());
  ASSERT_TRUE((*timer)->record_end().ok());
  auto secs = (*timer)->seconds();
  ASSERT_TRUE(secs.ok()) << secs.status();
  EXPECT_GE(*secs, 0.0);
  ASSERT_TRUE((*dev)->download(addr(*bo), out.data(), kN * 4, **stream).ok());
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(out[i], ha[i] * hb[i] + ha[i]) << i;
  EXPECT_GT((*dev)->allocator().bytes_in_use(), 0u);
}

}  // namespace
}  // namespace polygrad
