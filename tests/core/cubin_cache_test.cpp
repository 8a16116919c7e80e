// CUBIN entries in the kernel cache: corpus kernels compiled by NVRTC for sm_90 through the
// cache, keyed by architecture and NVRTC version, verified on load. Needs no GPU (the "load"
// here checks the ELF image instead of handing it to a driver); skips where NVRTC is absent.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/cache/sha256.h"
#include "core/engine/kernels_for.h"
#include "core/frontend/composites.h"
#include "core/frontend/tensor_ops.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cuda/cubin.h"

namespace polygrad {
namespace {

namespace fe = frontend;

bool is_buffer(const UOp* n) { return n->op == Ops::BUFFER; }

// What a GPU-less load can do with a CUBIN: hold the checked image.
class CubinImage final : public Program {
 public:
  explicit CubinImage(std::string bytes) : bytes(std::move(bytes)) {}
  absl::Status launch(void**, int64_t, int64_t) const override { return absl::OkStatus(); }
  std::string bytes;
};

absl::StatusOr<ProgramPtr> load_image(const std::string& bytes) { return std::make_shared<CubinImage>(bytes); }

// A few corpus kernels: elementwise, reduction with broadcast (softmax), matmul, half matmul.
std::vector<std::string> corpus_sources() {
  std::vector<std::vector<UOpRef>> graphs;
  UOpRef a = *fe::buffer(1, DType::Float32, {16, 32}), b = *fe::buffer(2, DType::Float32, {32, 8});
  UOpRef h = *fe::buffer(3, DType::Float16, {8, 16}), g = *fe::buffer(4, DType::Float16, {16, 8});
  graphs.push_back({*fe::alu(Ops::ADD, {a, *fe::alu(Ops::MUL, {a, a})})});
  graphs.push_back({*fe::softmax(a, -1)});
  graphs.push_back({*fe::matmul(a, b)});
  graphs.push_back({*fe::matmul(h, g)});
  std::vector<std::string> out;
  for (const auto& graph : graphs) {
    auto ks = kernels_for(graph, is_buffer);
    EXPECT_TRUE(ks.ok()) << ks.status();
    if (!ks.ok()) continue;
    for (const LinearKernel& k : *ks) out.push_back(*render_cuda(k));
  }
  return out;
}

class CubinCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = Nvrtc::get();
    if (!n.ok()) GTEST_SKIP() << "NVRTC is not available: " << n.status().message();
    nvrtc_ = *n;
    dir_ = std::filesystem::temp_directory_path() /
           ("polygrad-cubin-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  absl::StatusOr<KernelCache::Found> get(KernelCache& cache, const std::string& src, int arch = 90) {
    return cubin_from_cache(cache, *nvrtc_, src, arch, load_image, [this](double, bool ok) {
      EXPECT_TRUE(ok);
      ++compiles_;
    });
  }
  const Nvrtc* nvrtc_ = nullptr;
  std::filesystem::path dir_;
  std::atomic<int> compiles_{0};
};

TEST_F(CubinCacheTest, CorpusKernelsCompileOnceThenHit) {
  std::vector<std::string> sources = corpus_sources();
  ASSERT_GE(sources.size(), 4u);
  {
    KernelCache cache(dir_);
    for (const std::string& src : sources) {
      auto r = get(cache, src);
      ASSERT_TRUE(r.ok()) << r.status() << "\n" << src;
      EXPECT_EQ(r->result, CacheResult::Miss);
      const auto& image = static_cast<const CubinImage&>(*r->program);
      EXPECT_TRUE(check_cubin(image.bytes).ok()) << check_cubin(image.bytes);
    }
    const int compiled = compiles_.load();
    EXPECT_EQ(compiled, static_cast<int>(sources.size()));  // distinct kernels, distinct keys
    for (const std::string& src : sources) {
      auto r = get(cache, src);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->result, CacheResult::MemoryHit);
    }
    EXPECT_EQ(compiles_.load(), compiled);
  }
  // A fresh process's cache over the same directory: disk hits, still no compile.
  KernelCache reopened(dir_);
  const int before = compiles_.load();
  for (const std::string& src : sources) {
    auto r = get(reopened, src);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->result, CacheResult::DiskHit);
  }
  EXPECT_EQ(compiles_.load(), before);
}

TEST_F(CubinCacheTest, ArchitectureAndNvrtcVersionAreInTheKey) {
  const std::string src = corpus_sources().front();
  const std::string v = nvrtc_->version();
  EXPECT_NE(cubin_cache_key(src, 90, v), cubin_cache_key(src, 80, v));
  EXPECT_NE(cubin_cache_key(src, 90, v), cubin_cache_key(src, 90, "12.4"));
  EXPECT_NE(cubin_cache_key(src, 90, v), cubin_cache_key(src + " ", 90, v));
  EXPECT_EQ(cubin_cache_key(src, 90, v), cubin_cache_key(src, 90, v));
  // Not a CPU key for the same text either.
  EXPECT_NE(cubin_cache_key(src, 90, v), KernelCache::key("CPU", v, src));

  KernelCache cache(dir_);
  auto sm90 = get(cache, src, 90);
  auto sm80 = get(cache, src, 80);
  ASSERT_TRUE(sm90.ok() && sm80.ok());
  EXPECT_EQ(sm80->result, CacheResult::Miss);  // sm_90 machine code does not serve sm_80
  EXPECT_EQ(compiles_.load(), 2);
  EXPECT_NE(static_cast<const CubinImage&>(*sm90->program).bytes, static_cast<const CubinImage&>(*sm80->program).bytes);
}

TEST_F(CubinCacheTest, TruncatedEntriesAreDiscardedAndRebuilt) {
  const std::string src = corpus_sources().back();
  const std::string key = cubin_cache_key(src, 90, nvrtc_->version());
  std::string good;
  {
    KernelCache cache(dir_);
    auto r = get(cache, src);
    ASSERT_TRUE(r.ok()) << r.status();
    good = static_cast<const CubinImage&>(*r->program).bytes;
  }
  // 1. The entry file cut short: its checksum no longer matches.
  {
    std::filesystem::resize_file(KernelCache(dir_).entry_path(key), 200);
    KernelCache cache(dir_);
    auto r = get(cache, src);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->result, CacheResult::Miss);
    EXPECT_EQ(cache.stats().discarded, 1u);
    EXPECT_EQ(static_cast<const CubinImage&>(*r->program).bytes, good);
  }
  // 2. A well-formed entry (say, imported) whose payload is a CUBIN cut short: the checksum
  // matches, the ELF check does not, and the entry is rebuilt rather than handed to a driver.
  {
    std::filesystem::remove_all(dir_);
    KernelCache cache(dir_);
    const std::string cut = good.substr(0, good.size() / 2);
    EXPECT_FALSE(check_cubin(cut).ok());
    ASSERT_TRUE(cache.import_entry(key, cut, sha256_raw(cut)).ok());
    const int before = compiles_.load();
    auto r = get(cache, src);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->result, CacheResult::Miss);
    EXPECT_EQ(compiles_.load(), before + 1);
    EXPECT_EQ(static_cast<const CubinImage&>(*r->program).bytes, good);
    EXPECT_EQ(*cache.read_entry(key), good);  // the rebuilt entry replaced the bad one
  }
}

TEST(CheckCubin, RefusesWhatIsNotAWholeCudaElf) {
  EXPECT_EQ(check_cubin("").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(check_cubin(std::string(64, '\0')).code(), absl::StatusCode::kDataLoss);
  std::string x86(64, '\0');
  x86.replace(0, 6, "\x7f" "ELF\x02\x01");
  x86[18] = 62;  // EM_X86_64
  auto s = check_cubin(x86);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("not CUDA"), std::string::npos) << s;
}

}  // namespace
}  // namespace polygrad
