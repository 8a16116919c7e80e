// The kernel cache with real compiled kernels: memory and disk tiers, corrupt entries discarded
// and rebuilt, one compile per key under concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/cache/cache_entry.h"
#include "core/cache/kernel_cache.h"
#include "core/cache/sha256.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/process.h"
#include "tests/eventually.h"
#include "tests/processes.h"

namespace polygrad {
namespace {

using testing::eventually;
using testing::running;

const char* kSource = R"(#include <stdint.h>
void pg_kernel(void** bufs, int64_t start, int64_t end) {
  float* out = (float*)bufs[0];
  for (int64_t i = start; i < end; i++) out[i] = (float)i * 2.0f;
})";

// The entry layout alone (fuzz/fuzz_cache_entry.cpp tries it with any bytes).
TEST(CacheEntry, ReadsBackWhatWasWrittenForItsKeyOnly) {
  const std::string key = raw_cache_key(KernelCache::key("CPU", "cc 1", "source"));
  ASSERT_EQ(key.size(), 32u);
  EXPECT_EQ(raw_cache_key(sha256_hex("x")), sha256_raw("x"));
  const std::string entry = encode_cache_entry(key, "payload");
  EXPECT_EQ(decode_cache_entry(entry, key), "payload");
  EXPECT_EQ(decode_cache_entry(encode_cache_entry(key, ""), key), "");
  std::string other = key;
  other[0] ^= 1;
  EXPECT_FALSE(decode_cache_entry(entry, other));
  EXPECT_FALSE(decode_cache_entry(entry.substr(0, entry.size() - 1), key));
  EXPECT_FALSE(decode_cache_entry(entry + "x", key));
  std::string flipped = entry;
  flipped.back() ^= 1;
  EXPECT_FALSE(decode_cache_entry(flipped, key));
  EXPECT_FALSE(decode_cache_entry("", key));
}

// Issue 18: an entry that only carries its payload's hash can be forged by anyone who can write
// the directory (a valid hash over another kernel's payload). A signed entry names its writer.
TEST(CacheEntry, WithASigningKeyOnlyEntriesItSignedAreRead) {
  const std::string key = raw_cache_key(KernelCache::key("CPU", "cc 1", "source"));
  const std::string secret = "a secret of the deployment";
  const std::string entry = encode_cache_entry(key, "payload", secret);
  EXPECT_EQ(decode_cache_entry(entry, key, secret), "payload");
  EXPECT_EQ(decode_cache_entry(encode_cache_entry(key, "", secret), key, secret), "");
  // A forged entry: well formed, the right key, a correct sha256 of its payload, but unsigned.
  EXPECT_FALSE(decode_cache_entry(encode_cache_entry(key, "other kernel"), key, secret));
  // Signed with another secret, or signed for another key and renamed.
  EXPECT_FALSE(decode_cache_entry(encode_cache_entry(key, "payload", "another secret!!"), key, secret));
  std::string other = key;
  other[3] ^= 1;
  std::string moved = encode_cache_entry(other, "payload", secret);
  moved.replace(16, 32, key);  // the header now claims the key the file was moved to
  EXPECT_FALSE(decode_cache_entry(moved, key, secret));
  // A signed entry cannot be checked without the key, so a daemon without one does not load it.
  EXPECT_FALSE(decode_cache_entry(entry, key));
  std::string flipped = entry;
  flipped.back() ^= 1;
  EXPECT_FALSE(decode_cache_entry(flipped, key, secret));
  // The flags field is checked too (it was reserved and ignored).
  std::string flagged = encode_cache_entry(key, "payload");
  flagged[13] = 1;
  EXPECT_FALSE(decode_cache_entry(flagged, key));
}

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
    return [this](const KernelCache::StopFn&) {
      ++compiles_;
      return compiler_->compile(kSource);
    };
  }

  static void expect_runs(const ProgramPtr& p) {
    float out[4] = {};
    void* bufs[1] = {out};
    ASSERT_TRUE(p->launch(bufs, 0, 4).ok());
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

TEST_F(KernelCacheTest, ASignedCacheRebuildsEntriesItDidNotSign) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  KernelCache(dir_).get_or_build(key, compile(), CpuCompiler::load).IgnoreError();  // hashed only
  EXPECT_EQ(compiles_, 1);
  KernelCache signed_cache(dir_, KernelCache::kDefaultMaxBytes, "first secret 0123");
  auto r = signed_cache.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result, CacheResult::Miss);
  EXPECT_EQ(compiles_, 2);
  expect_runs(r->program);
  EXPECT_EQ(KernelCache(dir_, KernelCache::kDefaultMaxBytes, "first secret 0123").get_or_build(key, compile(),
                                                                                               CpuCompiler::load)->result,
            CacheResult::DiskHit);
  EXPECT_EQ(KernelCache(dir_, KernelCache::kDefaultMaxBytes, "second secret 456").get_or_build(key, compile(),
                                                                                               CpuCompiler::load)->result,
            CacheResult::Miss);
  EXPECT_EQ(compiles_, 3);
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

// A writer killed between creating its temporary file and renaming it leaves `.<key>.<pid>.<n>.tmp`:
// the next cache to open the directory removes those of writers that are gone (or an hour old),
// and leaves a live writer's alone.
TEST_F(KernelCacheTest, TemporariesOfKilledWritersAreRemovedWhenTheDirectoryIsOpened) {
  const std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  const std::filesystem::path sub = KernelCache(dir_).entry_path(key).parent_path();
  std::filesystem::create_directories(sub);
  // A pid that ran and is gone: a shell that said its pid, exited and was reaped.
  pid_t gone = 0;
  {
    FILE* f = popen("sh -c 'echo $$'", "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fscanf(f, "%d", &gone), 1);
    pclose(f);
  }
  ASSERT_FALSE(running(gone));
  const auto tmp = [&](pid_t pid, int n) { return sub / absl::StrCat(".", key, ".", pid, ".", n, ".tmp"); };
  std::ofstream(tmp(gone, 1)) << "half an entry";
  std::ofstream(tmp(getpid(), 2)) << "a live writer's entry";
  std::ofstream(tmp(getpid(), 3)) << "a live pid, but written two hours ago";
  std::filesystem::last_write_time(tmp(getpid(), 3),
                                   std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  KernelCache cache(dir_);
  EXPECT_FALSE(std::filesystem::exists(tmp(gone, 1)));
  EXPECT_TRUE(std::filesystem::exists(tmp(getpid(), 2)));
  EXPECT_FALSE(std::filesystem::exists(tmp(getpid(), 3)));
  EXPECT_EQ(cache.stats().disk_entries, 0u);
}

// A build shared by two callers goes on while one of them still waits, and is given up (its
// compile told so) once both have stopped; a later caller builds it afresh.
TEST_F(KernelCacheTest, ASharedBuildIsAbandonedOnlyWhenEveryWaiterStops) {
  KernelCache cache(dir_);
  const std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  std::atomic<bool> a_stops{false}, b_stops{false}, in_compile{false}, gave_up{false};
  KernelCache::StopFn abandoned_seen;
  std::mutex seen_mu;
  // The compile runs until it is abandoned: the test, not the clock, decides when that is.
  auto held = [&](const KernelCache::StopFn& abandoned) -> absl::StatusOr<std::string> {
    {
      std::lock_guard lock(seen_mu);
      abandoned_seen = abandoned;
    }
    in_compile = true;
    while (!abandoned()) std::this_thread::yield();
    gave_up = true;
    return absl::CancelledError("compile abandoned");
  };
  KernelCache::StopFn a_stop = [&] { return a_stops.load(); };
  KernelCache::StopFn b_stop = [&] { return b_stops.load(); };
  auto a = std::async(std::launch::async, [&] { return cache.get_or_build(key, held, CpuCompiler::load, a_stop); });
  ASSERT_TRUE(eventually([&] { return in_compile.load(); }));
  auto b = std::async(std::launch::async, [&] { return cache.get_or_build(key, held, CpuCompiler::load, b_stop); });
  b_stops = true;  // B leaves the wait on its own: CANCELLED, and the build goes on for A
  absl::StatusOr<KernelCache::Found> rb = b.get();
  EXPECT_EQ(rb.status().code(), absl::StatusCode::kCancelled) << rb.status();
  {
    std::lock_guard lock(seen_mu);
    EXPECT_FALSE(abandoned_seen());
  }
  EXPECT_FALSE(gave_up.load());
  a_stops = true;  // now nobody waits
  absl::StatusOr<KernelCache::Found> ra = a.get();
  EXPECT_EQ(ra.status().code(), absl::StatusCode::kCancelled) << ra.status();
  EXPECT_TRUE(gave_up.load());
  // Nothing was kept of the abandoned build: the next caller compiles for real.
  absl::StatusOr<KernelCache::Found> rc = cache.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->result, CacheResult::Miss);
  expect_runs(rc->program);
}

// A compiler that is abandoned is killed with everything it started: the process group goes.
TEST(RunProcessTest, AbandonedProgramIsKilledWithItsChildren) {
  const std::filesystem::path pid_file =
      std::filesystem::temp_directory_path() / absl::StrCat("polygrad-abandon-", getpid(), ".pid");
  std::filesystem::remove(pid_file);
  // The shell starts a child that would outlive it by ten minutes, says its pid, and waits.
  std::atomic<bool> give_up{false};
  auto run = std::async(std::launch::async, [&] {
    return run_process({"sh", "-c", absl::StrCat("sleep 600 & echo $! > ", pid_file.string(), ".part && mv ",
                                                 pid_file.string(), ".part ", pid_file.string(), "; wait")},
                       std::chrono::seconds(600), [&] { return give_up.load(); });
  });
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(pid_file); }));
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  EXPECT_TRUE(running(child));  // alive while the program is wanted
  give_up = true;
  absl::StatusOr<ProcessResult> r = run.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  // The grandchild got SIGKILL with its group.
  EXPECT_TRUE(eventually([&] { return !running(child); }));
  std::filesystem::remove(pid_file);
}

// Kernels call libm (and libmvec where clang vectorises through it), so whatever links them,
// the compiler driver or its linker run directly, must link those in; the identity says which.
TEST_F(KernelCacheTest, CompiledKernelsLinkTheMathLibraries) {
  const char* source = R"(#include <math.h>
#include <stdint.h>
void pg_kernel(void** bufs, int64_t start, int64_t end) {
  float* out = (float*)bufs[0];
  for (int64_t i = start; i < end; i++) out[i] = expf(out[i]) + sinf(out[i]) + logf(1.0f + out[i] * out[i]);
})";
  auto bytes = compiler_->compile(source);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto program = CpuCompiler::load(*bytes);
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / 250.0f - 2.0f;
  std::vector<float> in = v;
  void* bufs[1] = {v.data()};
  ASSERT_TRUE((*program)->launch(bufs, 0, static_cast<int64_t>(v.size())).ok());
  for (size_t i = 0; i < v.size(); ++i) {
    float want = std::exp(in[i]) + std::sin(in[i]) + std::log(1.0f + in[i] * in[i]);
    EXPECT_NEAR(v[i], want, 1e-5f * (1.0f + std::abs(want))) << "x = " << in[i];
  }
  const std::string& id = compiler_->identity();
  EXPECT_TRUE(id.find("linked by the compiler") != std::string::npos || id.find(" ld") != std::string::npos ||
              id.find("LLD") != std::string::npos)
      << "the identity does not say how kernels are linked:\n" << id;
}

TEST_F(KernelCacheTest, KeysDependOnEveryPart) {
  std::string k = KernelCache::key("CPU", "cc 1", "src");
  EXPECT_NE(k, KernelCache::key("CUDA", "cc 1", "src"));
  EXPECT_NE(k, KernelCache::key("CPU", "cc 2", "src"));
  EXPECT_NE(k, KernelCache::key("CPU", "cc 1", "src2"));
  EXPECT_NE(KernelCache::key("ab", "c", ""), KernelCache::key("a", "bc", ""));
  EXPECT_EQ(k.size(), 64u);
}

// A kernel source that differs by one constant: distinct keys, same size class.
std::string variant_source(int i) {
  return std::string(R"(#include <stdint.h>
void pg_kernel(void** bufs, int64_t start, int64_t end) {
  float* out = (float*)bufs[0];
  for (int64_t i = start; i < end; i++) out[i] = (float)i * )") + std::to_string(i) + R"(.0f;
})";
}

TEST_F(KernelCacheTest, DiskTierStaysUnderTheCapEvictingLeastRecentlyUsed) {
  // Measure one entry, then cap the cache at a little over three of them.
  std::string k0 = KernelCache::key("CPU", compiler_->identity(), variant_source(0));
  auto build = [&](KernelCache& c, int i) {
    std::string src = variant_source(i);
    return c.get_or_build(KernelCache::key("CPU", compiler_->identity(), src),
                          [&](const KernelCache::StopFn&) { return compiler_->compile(src); }, CpuCompiler::load);
  };
  uint64_t entry_bytes;
  {
    KernelCache probe(dir_, 0);
    ASSERT_TRUE(build(probe, 0).ok());
    entry_bytes = std::filesystem::file_size(probe.entry_path(k0));
    EXPECT_EQ(probe.stats().disk_entries, 1u);
    EXPECT_EQ(probe.stats().disk_bytes, entry_bytes);
  }
  const uint64_t cap = entry_bytes * 3 + entry_bytes / 2;
  KernelCache cache(dir_, cap);
  EXPECT_EQ(cache.stats().disk_entries, 1u);  // counted at start
  // Entry 0 is the oldest; make its mtime clearly older, then use it (a disk hit touches it).
  std::filesystem::last_write_time(cache.entry_path(k0), std::filesystem::file_time_type::clock::now() -
                                                             std::chrono::hours(1));
  for (int i = 1; i <= 2; ++i) ASSERT_TRUE(build(cache, i).ok());
  auto older = std::filesystem::file_time_type::clock::now() - std::chrono::minutes(30);
  for (int i = 1; i <= 2; ++i)
    std::filesystem::last_write_time(cache.entry_path(KernelCache::key("CPU", compiler_->identity(), variant_source(i))),
                                     older - std::chrono::minutes(i));
  KernelCache reader(dir_, cap);
  EXPECT_EQ(build(reader, 0)->result, CacheResult::DiskHit);  // touches entry 0: now the newest
  // Entries 3 and 4 push the directory over the cap: the least recently used (2, then 1) go.
  ASSERT_TRUE(build(cache, 3).ok());
  ASSERT_TRUE(build(cache, 4).ok());
  KernelCache::Stats s = cache.rescan();
  EXPECT_LE(s.disk_bytes, cap);
  EXPECT_GE(s.evictions, 1u);
  EXPECT_TRUE(std::filesystem::exists(cache.entry_path(k0)));
  EXPECT_FALSE(std::filesystem::exists(
      cache.entry_path(KernelCache::key("CPU", compiler_->identity(), variant_source(2)))));
  EXPECT_TRUE(std::filesystem::exists(
      cache.entry_path(KernelCache::key("CPU", compiler_->identity(), variant_source(4)))));
}

TEST_F(KernelCacheTest, EntryVanishingUnderTheCacheIsAMissNotAnError) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  KernelCache(dir_).get_or_build(key, compile(), CpuCompiler::load).IgnoreError();
  KernelCache cache(dir_);
  std::filesystem::remove_all(dir_);  // another daemon (or an operator) emptied the directory
  auto r = cache.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result, CacheResult::Miss);
  EXPECT_TRUE(std::filesystem::exists(cache.entry_path(key)));  // rewritten
}

TEST_F(KernelCacheTest, ExportThenImportIntoAnotherDirectoryServesFromDisk) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  KernelCache source(dir_);
  ASSERT_TRUE(source.get_or_build(key, compile(), CpuCompiler::load).ok());
  const auto old_time = std::filesystem::file_time_type::clock::now() - std::chrono::hours(2);
  std::filesystem::last_write_time(source.entry_path(key), old_time);
  std::vector<std::pair<std::string, std::string>> bundle;  // as Admin.ExportCache reads them
  for (const std::string& k : source.disk_keys())
    if (std::optional<std::string> payload = source.read_entry(k)) bundle.emplace_back(k, *std::move(payload));
  ASSERT_EQ(bundle.size(), 1u);
  EXPECT_EQ(bundle[0].first, key);
  EXPECT_EQ(std::filesystem::last_write_time(source.entry_path(key)), old_time);  // exporting is not a use

  std::filesystem::path other = dir_ / "other";
  KernelCache target(other);
  // Tampered payloads and malformed keys are refused before anything is written.
  std::string tampered = bundle[0].second;
  tampered[tampered.size() / 2] ^= 1;
  EXPECT_EQ(target.import_entry(key, tampered, sha256_raw(bundle[0].second)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(target.import_entry("../../etc/passwd", bundle[0].second, sha256_raw(bundle[0].second)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(target.import_entry(std::string(64, 'A'), bundle[0].second, sha256_raw(bundle[0].second)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(target.entry_path(key)));
  ASSERT_TRUE(target.import_entry(key, bundle[0].second, sha256_raw(bundle[0].second)).ok());
  EXPECT_EQ(target.stats().imported, 1u);
  auto r = target.get_or_build(key, compile(), CpuCompiler::load);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result, CacheResult::DiskHit);
  expect_runs(r->program);
  EXPECT_EQ(compiles_, 1);
  EXPECT_EQ(KernelCache(std::filesystem::path()).import_entry(key, bundle[0].second, sha256_raw(bundle[0].second)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(KernelCacheTest, CorruptEntryIsCountedAsDiscarded) {
  std::string key = KernelCache::key("CPU", compiler_->identity(), kSource);
  KernelCache(dir_).get_or_build(key, compile(), CpuCompiler::load).IgnoreError();
  KernelCache cache(dir_);
  std::filesystem::resize_file(cache.entry_path(key), 10);
  ASSERT_TRUE(cache.get_or_build(key, compile(), CpuCompiler::load).ok());
  EXPECT_EQ(cache.stats().discarded, 1u);
}

TEST(CpuCompiler, CompileErrorsAreReportedNotThrown) {
  auto cc = CpuCompiler::find("", std::chrono::seconds(60));
  ASSERT_TRUE(cc.ok());
  auto r = cc->compile("this is not C");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kernel compilation failed"), std::string::npos);
}

TEST(RunProcess, NamesTheSignalThatKilledTheProgram) {
  auto r = run_process({"sh", "-c", "kill -SEGV $$"}, std::chrono::seconds(600));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->signal, SIGSEGV);
  EXPECT_EQ(r->how_it_ended(), absl::StrCat("killed by signal ", SIGSEGV, " (", strsignal(SIGSEGV), ")"));
  r = run_process({"sh", "-c", "exit 3"}, std::chrono::seconds(600));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->how_it_ended(), "exit 3");
}

TEST(CpuCompiler, MissingCompilerIsFailedPrecondition) {
  auto cc = CpuCompiler::find("definitely-not-a-compiler-polygrad", std::chrono::seconds(5));
  EXPECT_EQ(cc.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace polygrad
