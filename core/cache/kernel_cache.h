// The kernel cache: compiled kernels by content key, in memory and on disk.
//
// Key: sha256 over the device kind, the compiler identity (version, flags, host CPU) and the
// rendered source — content only, so the same computation finds its kernel from any session,
// process or daemon. Disk entries live at <dir>/v<format>/<2 hex>/<key>.pgk, each a header
// (magic, format version, key, payload length, payload sha256) and the compiled bytes
// (core/cache/cache_entry.h). Writes go to a unique temporary file in the same directory and are
// renamed into place, so concurrent daemons on one directory never see a half-written entry;
// every load is verified, and a corrupt or truncated entry is deleted and rebuilt. Temporary
// files of writers that were killed are removed when a cache opens the directory. Concurrent
// requests for one key compile it once; the compile is abandoned (the compiler killed) only when
// every request waiting for it has stopped, and a request that stops leaves the wait at once.
//
// Size cap: the disk tier is kept under `max_bytes` by evicting least recently used entries.
// "Recently used" is the file's mtime, set when the entry is written and touched on every disk
// hit, so several daemons sharing one directory agree on it without any shared lock; an entry
// that vanishes under one daemon (another evicted it) is simply a miss.
//
// Quick tier: on a full miss (memory, disk and remote) a caller that passes a QuickBuild gets a
// program built by it at once (in milliseconds), wrapped in a TieredProgram (tiered_build.h) that
// the memory tier keeps; the optimized build then runs in the background, and when it is done it
// is written to disk and uploaded exactly as a foreground build is, and swapped into the wrapper.
// The disk and remote tiers only ever hold optimized builds.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cache/remote_tier.h"
#include "core/cache/tiered_build.h"
#include "core/engine/engine.h"
#include "core/runtime/program.h"

namespace polygrad {

class KernelCache {
 public:
  // Whether the caller has stopped wanting the result (client gone, deadline, shutdown).
  using StopFn = std::function<bool()>;
  // Builds the bytes for a key. `abandoned` says when no caller waits for them any more: a
  // compile that can be interrupted should poll it and then give up with CANCELLED.
  using Compile = std::function<absl::StatusOr<std::string>(const StopFn& abandoned)>;
  using Load = std::function<absl::StatusOr<ProgramPtr>(const std::string& bytes)>;
  // Builds a program for a key at once, computing exactly what the optimized build computes.
  using QuickBuild = std::function<absl::StatusOr<ProgramPtr>()>;

  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;

  // `dir` empty: memory only. `max_bytes` caps the disk tier (0: no cap). With a `signing_key`,
  // entries are written signed with it and only entries it signed are read (cache_entry.h); an
  // entry that does not check is discarded and rebuilt, like a damaged one.
  explicit KernelCache(std::filesystem::path dir, uint64_t max_bytes = kDefaultMaxBytes, std::string signing_key = {});
  // Stops the background builds first (stop_background_builds).
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // Puts `remote` behind the disk tier: a local miss asks it before compiling, and each compile
  // is uploaded to it in the background. Call before the first lookup.
  void set_remote(std::unique_ptr<RemoteTier> remote) { remote_ = std::move(remote); }
  RemoteTier* remote() const { return remote_.get(); }

  static std::string key(std::string_view device, std::string_view compiler_identity, std::string_view source);
  // True for what key() returns: 64 lowercase hex digits. Keys from outside (imports) must pass
  // this before they name a file.
  static bool valid_key(std::string_view key);

  struct Found {
    ProgramPtr program;
    CacheResult result;
  };
  // The program for `key`: from memory, from disk, or built by `compile` (one build per key at a
  // time, shared by concurrent callers). `should_stop` (may be empty: never) is polled while this
  // caller waits: once it says true the call returns CANCELLED without waiting for the build.
  // With `quick`, a full miss returns quick()'s program in a TieredProgram and runs `compile` in
  // the background (see the top of this file), so `compile` must own everything it uses; when
  // quick() fails the call builds as without it.
  absl::StatusOr<Found> get_or_build(const std::string& key, const Compile& compile, const Load& load,
                                     const StopFn& should_stop = {}, const QuickBuild& quick = {});
  // The loaded program for `key` if this process already has it, else null; never builds.
  ProgramPtr in_memory(const std::string& key) const;

  // Records: small payloads that are not programs (a kernel's tuning result, core/engine/tuning.h)
  // under keys of their own, in the same tiers as the binaries so that every daemon on this
  // directory or remote store sees them. find_record looks in memory, then on disk (verified
  // like a binary), then remotely, and returns the first payload `usable` accepts; a disk or
  // remote hit is remembered in memory. store_record keeps it in memory, writes it to disk and
  // uploads it in the background.
  std::optional<std::string> find_record(const std::string& key, const std::function<bool(const std::string&)>& usable);
  void store_record(const std::string& key, const std::string& payload);

  std::filesystem::path entry_path(const std::string& key) const;
  size_t memory_entries() const;
  const std::filesystem::path& dir() const { return dir_; }

  struct Stats {
    uint64_t disk_bytes = 0;    // entry files of this format version, as last counted
    uint64_t disk_entries = 0;
    uint64_t memory_entries = 0;
    uint64_t max_bytes = 0;
    uint64_t evictions = 0;     // entries this process removed to stay under the cap
    uint64_t discarded = 0;     // corrupt or truncated entries this process found and removed
    uint64_t imported = 0;
    // Entries that could not be written, by why (the kernel still runs; it is compiled again
    // next time): the disk is full, the file system is read-only, permission was denied, other.
    uint64_t write_failures_no_space = 0;
    uint64_t write_failures_read_only = 0;
    uint64_t write_failures_permission = 0;
    uint64_t write_failures_other = 0;
    // Builds by tier: quick programs handed out, optimized builds (foreground or background)
    // that loaded, background builds that failed (their kernels keep the quick program), and
    // background builds queued or running now.
    uint64_t quick_builds = 0;
    uint64_t optimized_builds = 0;
    uint64_t background_failures = 0;
    uint64_t background_pending = 0;
    // Quick builds that failed (each of those kernels was built by the optimized compiler before
    // it ran, as without the quick tier), and launches that ran a quick build (none of a kernel
    // once its optimized build is swapped in).
    uint64_t quick_failures = 0;
    uint64_t quick_launches = 0;
  };
  Stats stats() const;
  // Counts the directory again (other daemons write to it too) and returns fresh stats.
  Stats rescan();

  // Keys of the entry files on disk now (unverified; an entry may vanish before it is read).
  std::vector<std::string> disk_keys();
  // The verified payload of a disk entry, or nullopt (absent, or corrupt and now removed).
  // Reading does not count as a use for the LRU.
  std::optional<std::string> read_entry(const std::string& key);

  // Stores an entry from outside (a cache bundle) after checking the key's form and the payload
  // against `payload_sha256` (32 raw bytes). INVALID_ARGUMENT naming the key when they do not
  // match; FAILED_PRECONDITION for a memory-only cache. An existing entry is kept.
  absl::Status import_entry(const std::string& key, const std::string& payload, std::string_view payload_sha256);

  // Kills the background builds' compilers, drops the queued ones and joins their threads; later
  // quick builds get no optimized build. The owner of what a Compile uses calls this before it
  // destroys that; the destructor does too.
  void stop_background_builds() { background_.stop(); }

 private:
  absl::StatusOr<Found> lookup_or_build(const std::string& key, const Compile& compile, const Load& load,
                                        const StopFn& abandoned, const QuickBuild& quick);
  // The optimized build of a missed key: compiled, loaded, written to disk and uploaded.
  absl::StatusOr<ProgramPtr> compile_and_store(const std::string& key, const Compile& compile, const Load& load,
                                               const StopFn& abandoned);
  // quick()'s program in a TieredProgram, its optimized build queued; null when quick() failed.
  ProgramPtr build_tiered(const std::string& key, const Compile& compile, const Load& load, const QuickBuild& quick);
  // `touch`: mark the entry recently used (a lookup does; an export must not reorder the LRU).
  std::optional<std::string> read_disk(const std::string& key, bool touch = true);
  bool write_disk(const std::string& key, const std::string& bytes);
  void count_write_failure(int error);  // by errno
  // Removes least recently used entries until the directory is under 90% of the cap.
  void evict();
  std::filesystem::path version_dir() const;

  std::filesystem::path dir_;
  const uint64_t max_bytes_;
  const std::string signing_key_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, ProgramPtr> memory_;
  std::unordered_map<std::string, std::string> records_;  // find_record's memory tier
  struct Build;  // one key being built, and who waits for it
  std::unordered_map<std::string, std::shared_ptr<Build>> in_flight_;

  std::mutex evict_mu_;  // one eviction scan at a time in this process
  std::atomic<uint64_t> disk_bytes_{0};
  std::atomic<uint64_t> disk_entries_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> discarded_{0};
  std::atomic<uint64_t> imported_{0};
  std::atomic<uint64_t> write_no_space_{0};
  std::atomic<uint64_t> write_read_only_{0};
  std::atomic<uint64_t> write_permission_{0};
  std::atomic<uint64_t> write_other_{0};
  std::atomic<uint64_t> quick_builds_{0};
  std::atomic<uint64_t> optimized_builds_{0};
  std::atomic<uint64_t> background_failures_{0};
  std::atomic<uint64_t> quick_failures_{0};
  std::atomic<uint64_t> quick_launches_{0};  // TieredProgram counts into it: declared before background_
  std::unique_ptr<RemoteTier> remote_;  // destroyed (its uploads drained) before the rest
  BackgroundBuilds background_;         // stopped by the destructor, before anything else goes
};

}  // namespace polygrad
