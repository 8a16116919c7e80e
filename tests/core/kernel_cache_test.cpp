// The kernel cache with real compiled kernels: memory and disk tiers, corrupt entries discarded
// and rebuilt, one compile per key under concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/cache/kernel_cache.h"
#include "core/runtime/cpu/compiler.h"

namespace polygrad {
namespace {

const char* kSource = R"(#include <stdint.h>
void pg_kernel(void** bufs, int64_t start, int64_t end) {
  float* out = (float*)bufs[0];
  for (int64_t i = start; i < end; i++) out[i] = (float)i * 2.0f;
})";

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("polygrad-cache-test-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto cc = CpuCompiler::find("", std::chrono::seconds(60));
    ASSERT_TRUE(cc.ok()) << cc.status();
    compiler_ = std::make_unique<CpuCompiler>(*cc);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  KernelCache::Compile compile() {
    return [this]() {
      ++compiles_;
      return compiler_->compile(kSource);
    };
  }

  static void expect_runs(const ProgramPtr& p) {
    float out[4] = {};
    void* bufs[1] = {out};
    p->launch(bufs, 0, 4);
    EXPECT_EQ(out[3], 6.0f);
  }

  std::filesystem::path dir_;
  std::unique_ptr<CpuCompiler> compiler_;
  std::atomic<int> compiles_{0};
};

TEST_F(KernelCacheTest, MemoryThenDiskThenRebuildAfterCorruption) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  {
    KernelCache cache(dir_);
    auto first = cache.get_or_build(key, compile(), CpuCompiler::load);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->result, CacheResult::Miss);
    expect_runs(first->program);
    auto second = cache.get_or_build(key, compile(), CpuCompiler::load);
    EXPECT_EQ(second->result, CacheResult::MemoryHit);
    EXPECT_TRUE(std::filesystem::exists(cache.entry_path(key)));
  }
  {
    KernelCache fresh(dir_);  // a new process's view: memory empty, disk warm
    auto r = fresh.get_or_build(key, compile(), CpuCompiler::load);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->result, CacheResult::DiskHit);
    expect_runs(r->program);
    EXPECT_EQ(compiles_, 1);
  }
  // Truncate the entry: it must be detected, discarded and rebuilt.
  KernelCache probe(dir_);
  auto path = probe.entry_path(key);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  auto r = probe.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result, CacheResult::Miss);
  expect_runs(r->program);
  EXPECT_EQ(compiles_, 2);
  KernelCache again(dir_);
  EXPECT_EQ(again.get_or_build(key, compile(), CpuCompiler::load)->result, CacheResult::DiskHit);
}

TEST_F(KernelCacheTest, FlippedPayloadByteIsRejected) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  KernelCache(dir_).get_or_build(key, compile(), CpuCompiler::load).IgnoreError();
  KernelCache cache(dir_);
  auto path = cache.entry_path(key);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) - 10));
    f.put('\x5a');
  }
  auto r = cache.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result, CacheResult::Miss);
}

TEST_F(KernelCacheTest, ConcurrentRequestsCompileOnce) {
  KernelCache cache(dir_);
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { ok += cache.get_or_build(key, compile(), CpuCompiler::load).ok(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(compiles_, 1);
}

TEST_F(KernelCacheTest, KeysDependOnEveryPart) {
  std::string k = KernelCache::key("CPU", "cc 1", "src");
  EXPECT_NE(k, KernelCache::key("CUDA", "cc 1", "src"));
  EXPECT_NE(k, KernelCache::key("CPU", "cc 2", "src"));
  EXPECT_NE(k, KernelCache::key("CPU", "cc 1", "src2"));
  EXPECT_NE(KernelCache::key("ab", "c", ""), KernelCache::key("a", "bc", ""));
  EXPECT_EQ(k.size(), 64u);
}

TEST(CpuCompiler, CompileErrorsAreReportedNotThrown) {
  auto cc = CpuCompiler::find("", std::chrono::seconds(60));
  ASSERT_TRUE(cc.ok());
  auto r = cc->compile("this is not C");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kernel compilation failed"), std::string::npos);
}

TEST(CpuCompiler, MissingCompilerIsFailedPrecondition) {
  auto cc = CpuCompiler::find("definitely-not-a-compiler-polygrad", std::chrono::seconds(5));
  EXPECT_EQ(cc.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace polygrad
