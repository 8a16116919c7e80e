#include "core/cache/kernel_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/cache/cache_entry.h"
#include "core/cache/sha256.h"

namespace polygrad {
namespace {

// How often a caller waiting for another request's build asks whether it should stop.
constexpr std::chrono::milliseconds kStopPoll{50};

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// One entry file found by a directory scan.
struct DiskEntry {
  std::filesystem::path path;
  uint64_t bytes;
  std::filesystem::file_time_type used;
};

// Every entry file under `vdir` (temporary files skipped). Entries may vanish while we look:
// another daemon evicts or replaces them, so every error just skips the file.
std::vector<DiskEntry> scan(const std::filesystem::path& vdir) {
  std::vector<DiskEntry> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(vdir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::filesystem::path& p = it->path();
    if (p.extension() != ".pgk" || p.filename().string().front() == '.') continue;
    std::error_code fe;
    uint64_t size = std::filesystem::file_size(p, fe);
    if (fe) continue;
    auto t = std::filesystem::last_write_time(p, fe);
    if (fe) continue;
    out.push_back(DiskEntry{p, size, t});
  }
  return out;
}

// Temporary files a writer left behind when it was killed between creating and renaming them
// (`.<key>.<pid>.<n>.tmp`): removed when that pid runs no more on this host, or after an hour
// (a writer in another pid namespace on a shared volume; a write takes milliseconds).
void remove_abandoned_temporaries(const std::filesystem::path& vdir) {
  const auto stale_before = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  std::vector<std::filesystem::path> doomed;
  for (auto it = std::filesystem::recursive_directory_iterator(vdir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.front() != '.' || name.substr(name.size() - 4) != ".tmp") continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
    int64_t pid = 0;
    const bool writer_gone = parts.size() == 5 && absl::SimpleAtoi(parts[2], &pid) && pid > 0 &&
                             kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    std::error_code fe;
    const auto written = std::filesystem::last_write_time(it->path(), fe);
    if (writer_gone || (!fe && written < stale_before)) doomed.push_back(it->path());
  }
  for (const std::filesystem::path& p : doomed) std::filesystem::remove(p, ec);
}

}  // namespace

KernelCache::KernelCache(std::filesystem::path dir, uint64_t max_bytes, std::string signing_key)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes),
      signing_key_(std::move(signing_key)),
      // Each background build holds one of its owner's compile slots while it compiles; threads
      // beyond the cores would only wait for one.
      background_(std::thread::hardware_concurrency()) {
  if (!dir_.empty()) {
    remove_abandoned_temporaries(version_dir());
    rescan();
  }
}

KernelCache::~KernelCache() { stop_background_builds(); }

bool KernelCache::valid_key(std::string_view key) {
  return key.size() == 64 &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::filesystem::path KernelCache::version_dir() const { return dir_ / absl::StrCat("v", kCacheFormatVersion); }

KernelCache::Stats KernelCache::stats() const {
  Stats s;
  s.disk_bytes = disk_bytes_.load();
  s.disk_entries = disk_entries_.load();
  s.memory_entries = memory_entries();
  s.max_bytes = max_bytes_;
  s.evictions = evictions_.load();
  s.discarded = discarded_.load();
  s.imported = imported_.load();
  s.write_failures_no_space = write_no_space_.load();
  s.write_failures_read_only = write_read_only_.load();
  s.write_failures_permission = write_permission_.load();
  s.write_failures_other = write_other_.load();
  s.quick_builds = quick_builds_.load();
  s.optimized_builds = optimized_builds_.load();
  s.background_failures = background_failures_.load();
  s.background_pending = background_.pending();
  s.quick_failures = quick_failures_.load();
  s.quick_launches = quick_launches_.load();
  return s;
}

KernelCache::Stats KernelCache::rescan() {
  if (!dir_.empty()) {
    std::lock_guard lock(evict_mu_);
    uint64_t bytes = 0;
    std::vector<DiskEntry> entries = scan(version_dir());
    for (const DiskEntry& e : entries) bytes += e.bytes;
    disk_bytes_.store(bytes);
    disk_entries_.store(entries.size());
  }
  return stats();
}

void KernelCache::evict() {
  std::lock_guard lock(evict_mu_);
  std::vector<DiskEntry> entries = scan(version_dir());
  uint64_t bytes = 0;
  for (const DiskEntry& e : entries) bytes += e.bytes;
  const uint64_t target = max_bytes_ / 10 * 9;  // headroom, so not every write rescans
  if (bytes > max_bytes_) {
    std::sort(entries.begin(), entries.end(), [](const DiskEntry& a, const DiskEntry& b) { return a.used < b.used; });
    size_t kept = entries.size();
    for (const DiskEntry& e : entries) {
      if (bytes <= target) break;
      std::error_code ec;
      // Gone already (another daemon evicted it) counts as evicted: the bytes are free either way.
      const bool removed = std::filesystem::remove(e.path, ec);
      if (ec) continue;
      bytes -= e.bytes;
      --kept;
      if (removed) evictions_.fetch_add(1);
    }
    disk_entries_.store(kept);
  } else {
    disk_entries_.store(entries.size());
  }
  disk_bytes_.store(bytes);
}

std::vector<std::string> KernelCache::disk_keys() {
  std::vector<std::string> keys;
  if (dir_.empty()) return keys;
  std::vector<DiskEntry> entries;
  {
    std::lock_guard lock(evict_mu_);
    entries = scan(version_dir());
  }
  for (const DiskEntry& e : entries) {
    std::string key = e.path.stem().string();
    if (valid_key(key)) keys.push_back(std::move(key));
  }
  return keys;
}

std::optional<std::string> KernelCache::read_entry(const std::string& key) {
  if (dir_.empty() || !valid_key(key)) return std::nullopt;
  return read_disk(key, /*touch=*/false);
}

absl::Status KernelCache::import_entry(const std::string& key, const std::string& payload,
                                       std::string_view payload_sha256) {
  if (dir_.empty()) return absl::FailedPreconditionError("the kernel cache is memory-only (no --cache-dir): nothing to import into");
  if (!valid_key(key)) return absl::InvalidArgumentError("cache entry key is not 64 lowercase hex digits");
  if (payload.empty()) return absl::InvalidArgumentError(absl::StrCat("cache entry ", key, ": empty payload"));
  if (sha256_raw(payload) != payload_sha256)
    return absl::InvalidArgumentError(absl::StrCat("cache entry ", key, ": payload does not match its sha256"));
  std::error_code ec;
  if (std::filesystem::exists(entry_path(key), ec)) return absl::OkStatus();
  if (!write_disk(key, payload))
    return absl::UnavailableError(absl::StrCat("cache entry ", key, ": cannot write to the cache directory"));
  imported_.fetch_add(1);
  return absl::OkStatus();
}

std::string KernelCache::key(std::string_view device, std::string_view compiler_identity, std::string_view source) {
  // Length-prefixed fields, so no two different triples can concatenate to the same bytes.
  std::string material;
  for (std::string_view part : {device, compiler_identity, source}) {
    absl::StrAppend(&material, part.size(), ":");
    material.append(part);
  }
  return sha256_hex(material);
}

std::filesystem::path KernelCache::entry_path(const std::string& key) const {
  return dir_ / absl::StrCat("v", kCacheFormatVersion) / key.substr(0, 2) / absl::StrCat(key, ".pgk");
}

size_t KernelCache::memory_entries() const {
  std::lock_guard lock(mu_);
  return memory_.size();
}

ProgramPtr KernelCache::in_memory(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = memory_.find(key);
  return it == memory_.end() ? nullptr : it->second;
}

// The callers waiting for one build (the builder among them), each by its stop predicate.
struct KernelCache::Build {
  std::shared_future<absl::StatusOr<Found>> result;
  std::mutex mu;
  std::vector<const StopFn*> waiters;

  void join(const StopFn* w) {
    std::lock_guard lock(mu);
    waiters.push_back(w);
  }
  void leave(const StopFn* w) {
    std::lock_guard lock(mu);
    waiters.erase(std::find(waiters.begin(), waiters.end(), w));
  }
  // True when nobody waits, or every waiter has stopped; a waiter that can't stop keeps it.
  bool abandoned() {
    std::lock_guard lock(mu);
    return std::all_of(waiters.begin(), waiters.end(), [](const StopFn* w) { return *w && (*w)(); });
  }
};

absl::StatusOr<KernelCache::Found> KernelCache::get_or_build(const std::string& key, const Compile& compile,
                                                             const Load& load, const StopFn& should_stop,
                                                             const QuickBuild& quick) {
  const auto stopped = [&] { return should_stop && should_stop(); };
  while (true) {
    std::promise<absl::StatusOr<Found>> promise;
    std::shared_ptr<Build> build;
    bool building = false;
    {
      std::lock_guard lock(mu_);
      if (auto it = memory_.find(key); it != memory_.end()) return Found{it->second, CacheResult::MemoryHit};
      if (auto it = in_flight_.find(key); it != in_flight_.end()) {
        build = it->second;
      } else {
        build = std::make_shared<Build>();
        build->result = promise.get_future().share();
        in_flight_.emplace(key, build);
        building = true;
      }
      build->join(&should_stop);  // under mu_: the builder cannot finish and be forgotten first
    }
    if (building) {
      auto r = lookup_or_build(key, compile, load, [&build] { return build->abandoned(); }, quick);
      {
        std::lock_guard lock(mu_);
        if (r.ok()) memory_.emplace(key, r->program);
        in_flight_.erase(key);
      }
      build->leave(&should_stop);
      promise.set_value(r);
      return r;
    }
    // Another request is building this key: share its result. To this caller it was a hit.
    while (build->result.wait_for(kStopPoll) != std::future_status::ready) {
      if (stopped()) {
        build->leave(&should_stop);
        return absl::CancelledError("stopped while waiting for a kernel another request is compiling");
      }
    }
    build->leave(&should_stop);
    const auto& r = build->result.get();
    if (r.ok()) return Found{r->program, CacheResult::MemoryHit};
    // The others all stopped and gave the build up, but this caller still wants it: build anew.
    if (r.status().code() == absl::StatusCode::kCancelled && !stopped()) continue;
    return r.status();
  }
}

absl::StatusOr<KernelCache::Found> KernelCache::lookup_or_build(const std::string& key, const Compile& compile,
                                                                const Load& load, const StopFn& abandoned,
                                                                const QuickBuild& quick) {
  if (!dir_.empty()) {
    if (auto bytes = read_disk(key)) {
      auto program = load(*bytes);
      if (program.ok()) return Found{*program, CacheResult::DiskHit};
      std::error_code ec;
      std::filesystem::remove(entry_path(key), ec);  // verified yet unloadable: rebuild it
    }
  }
  if (remote_) {
    ProgramPtr loaded;
    const auto usable = [&](const std::string& payload) {
      auto program = load(payload);
      if (program.ok()) loaded = *std::move(program);
      return program.ok();
    };
    if (std::optional<std::string> bytes = remote_->fetch(key, usable)) {
      if (!dir_.empty()) write_disk(key, *bytes);  // the next lookup stays local
      return Found{std::move(loaded), CacheResult::RemoteHit};
    }
  }
  if (quick)
    if (ProgramPtr tiered = build_tiered(key, compile, load, quick)) return Found{std::move(tiered), CacheResult::Miss};
  auto program = compile_and_store(key, compile, load, abandoned);
  if (!program.ok()) return program.status();
  return Found{*std::move(program), CacheResult::Miss};
}

std::optional<std::string> KernelCache::find_record(const std::string& key,
                                                    const std::function<bool(const std::string&)>& usable) {
  {
    std::lock_guard lock(mu_);
    if (auto it = records_.find(key); it != records_.end() && usable(it->second)) return it->second;
  }
  std::optional<std::string> found;
  if (!dir_.empty())
    if (auto bytes = read_disk(key); bytes && usable(*bytes)) found = std::move(bytes);
  if (!found && remote_) {
    found = remote_->fetch(key, usable);
    if (found && !dir_.empty()) write_disk(key, *found);  // the next lookup stays local
  }
  if (found) {
    std::lock_guard lock(mu_);
    records_.insert_or_assign(key, *found);
  }
  return found;
}

void KernelCache::store_record(const std::string& key, const std::string& payload) {
  {
    std::lock_guard lock(mu_);
    records_.insert_or_assign(key, payload);
  }
  if (!dir_.empty()) write_disk(key, payload);  // a failed write costs another search later
  if (remote_) remote_->upload(key, payload);
}

absl::StatusOr<ProgramPtr> KernelCache::compile_and_store(const std::string& key, const Compile& compile,
                                                          const Load& load, const StopFn& abandoned) {
  auto bytes = compile(abandoned);
  if (!bytes.ok()) return bytes.status();
  auto program = load(*bytes);
  if (!program.ok()) return program.status();
  optimized_builds_.fetch_add(1);
  if (!dir_.empty()) write_disk(key, *bytes);  // a failed write costs a recompile later
  if (remote_) remote_->upload(key, *bytes);
  return program;
}

ProgramPtr KernelCache::build_tiered(const std::string& key, const Compile& compile, const Load& load,
                                     const QuickBuild& quick) {
  auto program = quick();
  if (!program.ok()) {
    // The optimized compiler decides: a kernel it compiles runs as it always did.
    quick_failures_.fetch_add(1);
    std::fprintf(stderr, "polygrad: quick build of kernel %s failed, waiting for the optimized one: %s\n",
                 key.c_str(), std::string(program.status().message()).c_str());
    return nullptr;
  }
  quick_builds_.fetch_add(1);
  auto tiered = std::make_shared<TieredProgram>(*std::move(program), &quick_launches_);
  // The job owns copies of what it uses; `this` outlives it (the destructor stops the builds).
  background_.submit([this, key, compile, load, tiered](const StopFn& stopping) {
    auto optimized = compile_and_store(key, compile, load, stopping);
    if (optimized.ok()) {
      tiered->swap_in(*std::move(optimized));
    } else if (!stopping()) {
      // The quick program stays: the kernel still runs, at the quick tier's speed.
      background_failures_.fetch_add(1);
      std::fprintf(stderr, "polygrad: background optimized build of kernel %s failed, keeping its quick build: %s\n",
                   key.c_str(), optimized.status().ToString().c_str());
    }
  });
  return tiered;  // refused (stopping): the quick program simply stays
}

std::optional<std::string> KernelCache::read_disk(const std::string& key, bool touch) {
  std::filesystem::path path = entry_path(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  std::optional<std::string> payload = decode_cache_entry(ss.str(), raw_cache_key(key), signing_key_);
  if (!payload) {
    std::error_code ec;
    if (std::filesystem::remove(path, ec)) discarded_.fetch_add(1);
    return std::nullopt;
  }
  // A hit makes the entry recently used for every daemon sharing the directory.
  if (touch) utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return payload;
}

void KernelCache::count_write_failure(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG: write_no_space_.fetch_add(1); break;
    case EROFS: write_read_only_.fetch_add(1); break;
    case EACCES:
    case EPERM: write_permission_.fetch_add(1); break;
    default: write_other_.fetch_add(1); break;
  }
}

bool KernelCache::write_disk(const std::string& key, const std::string& bytes) {
  // Best effort: a full or read-only disk costs a recompile later, never a failed request; the
  // failure is counted by its reason so an operator can see why nothing is cached.
  std::filesystem::path path = entry_path(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    count_write_failure(ec.value());
    return false;
  }
  const std::string data = encode_cache_entry(raw_cache_key(key), bytes, signing_key_);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::filesystem::path tmp = path.parent_path() / absl::StrCat(".", key, ".", getpid(), ".", rng(), ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    count_write_failure(errno);
    return false;
  }
  int error = 0;
  errno = 0;
  if (!write_all(fd, data) || fsync(fd) != 0) error = errno != 0 ? errno : EIO;  // a 0-byte write sets none
  if (close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && rename(tmp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    std::filesystem::remove(tmp, ec);
    count_write_failure(error);
    return false;
  }
  disk_entries_.fetch_add(1);
  if (disk_bytes_.fetch_add(data.size()) + data.size() > max_bytes_ && max_bytes_ > 0) evict();
  return true;
}

}  // namespace polygrad
