// The engine: the one entry point a server (or an in-process binding) uses to run tensor
// graphs. It owns the devices, the compiler, the kernel cache and the worker threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"

namespace polygrad {

class DeviceStreams;
class KernelCache;

// Where a kernel-cache lookup was answered.
enum class CacheResult { MemoryHit, DiskHit, RemoteHit, Miss };

// Callbacks for metrics; all optional, called from any thread.
enum class TuneMode { Off, Cached, Search };
// What tuning did for one kernel: used a stored choice, found none (the heuristic's tiling runs),
// or searched and stored one.
enum class TuningResult { Hit, Miss, Search };

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_cache_lookup(CacheResult result) {}
  // The kernel cache's remote tier (core/cache/remote_tier.h): each remote lookup's result (hit,
  // miss, error, rejected, skipped), each upload's (stored, present, error, skipped, dropped), and
  // the kind of each failed remote operation (timeout, connect, status, protocol, full).
  virtual void on_remote_lookup(std::string_view result) {}
  virtual void on_remote_upload(std::string_view result) {}
  virtual void on_remote_error(std::string_view kind) {}
  // A realize looked its structure up in the schedule cache (only while the cache is enabled).
  virtual void on_schedule_cache_lookup(bool hit) {}
  virtual void on_compile(double seconds, bool ok) {}
  // A kernel with several candidate tilings looked up its tuning record (core/engine/tuning.h).
  virtual void on_tuning(TuningResult result) {}
  // One run of a named compiler pass (core/engine/pipeline.h lists them: "schedule_cache",
  // "schedule", "lower", "simplify", "optimize", "linearize", "render", "compile", "plan_memory",
  // "run"); per-kernel passes report once per kernel.
  virtual void on_pass(std::string_view pass, double seconds) {}
  virtual void on_kernel(double seconds) {}  // a CPU kernel
  // A kernel on another device ("CUDA:0"), timed on that device.
  virtual void on_device_kernel(const std::string& device, double seconds) { on_kernel(seconds); }
};

struct EngineOptions {
  std::filesystem::path cache_dir;  // kernel cache root; empty: memory cache only
  uint64_t cache_max_bytes = uint64_t{1} << 30;  // disk tier cap, LRU-evicted; 0: no cap
  std::string cache_signing_key;    // entries signed and checked with it (HMAC-SHA256); empty: hashed only
  // The remote tier (core/cache/remote_tier.h): a store URL (http://, https://, redis://; empty:
  // none) and the secret its entries are signed with, which it requires.
  std::string cache_remote;
  std::string cache_remote_key;
  bool cache_remote_read_only = false;
  std::chrono::milliseconds cache_remote_timeout{500};
  std::chrono::milliseconds cache_remote_breaker{30000};
  std::string compiler;             // C compiler executable; empty: clang, then gcc, then cc
  std::chrono::seconds compile_timeout{120};
  // The quick tier (core/runtime/cpu/quick_compiler.h): a CPU kernel missing from every cache
  // tier first runs a TinyCC build made in milliseconds while the C compiler builds the optimized
  // one in the background (quick_tier_eligible says which kernels may; the rest wait for the C
  // compiler). Results are the same bits either way; only timing differs. No effect when this
  // polygrad was built without libtcc.
  bool quick_compile = true;
  // Tuning (core/engine/tuning.h): off, cached (use tiling choices stored in the kernel cache),
  // or search (time the candidates of a kernel with none stored, and store the fastest).
  TuneMode tune = TuneMode::Cached;
  unsigned threads = 0;             // kernel worker threads; 0: hardware concurrency
  EngineObserver* observer = nullptr;
  // Compiled realize programs kept by graph structure (core/schedule/schedule_cache.h), least
  // recently used evicted; 0 disables the schedule cache.
  size_t schedule_cache_entries = 1024;
  // Devices tensors may be placed on ("cpu", "cuda:0"); empty: every device that exists. The
  // CPU is always on (it runs the daemon's own work). Engine::create fails with the reason when a
  // listed device does not exist or cannot be used.
  std::vector<std::string> devices;
};

struct DeviceInfo {
  std::string name;    // "CPU"
  bool available;
  std::string detail;  // compiler identity, or why the device is unavailable
};

struct RealizeStats {
  uint32_t kernels = 0;     // kernels launched
  uint32_t compiled = 0;    // kernels compiled by this request
  // Kernels this request did not compile: found in the kernel cache, or, with a schedule-cache
  // hit, reused with the whole cached program (no kernel-cache lookup at all).
  uint32_t cache_hits = 0;
  bool schedule_cache_hit = false;  // the request's structure was in the schedule cache
};

struct RealizeResult {
  std::vector<BufferPtr> outputs;  // one per requested output, in order
  RealizeStats stats;
  // Set when RealizeOptions::inline_work_limit turned the realize down: nothing ran, nothing
  // was allocated or reported, and `outputs` is empty.
  bool deferred = false;
};

// Buffers standing for graph nodes: every BUFFER leaf, and any lazy node already realized
// (so a later graph that contains it loads the result instead of recomputing it).
// Keys are node addresses: the caller must keep every key's UOp alive while the map is used
// (a dead node's address can be reused by a new, unrelated node). Build the map per request
// from UOpRefs you hold, or drop an entry when its node is released.
using Bindings = std::unordered_map<const UOp*, BufferPtr>;

class StepProgram;
struct StepSpec;

struct RealizeOptions {
  // Polled between kernels and before compiles; returning true abandons the realize with
  // CANCELLED (temporaries are freed).
  std::function<bool()> should_stop;
  // Device code (core/engine/placement.h) of outputs that live on no device of their own
  // (computed from constants and random ops only); 0: the CPU.
  int64_t default_device = 0;
  // The GPU streams to queue work on (a client session's, core/engine/device_streams.h), kept
  // by a compiled step for its runs; empty: streams of this call's own.
  std::shared_ptr<DeviceStreams> streams;
  // Positive: run only a program the schedule cache already holds, on the CPU, whose kernels
  // iterate at most this many times in all; anything else (a miss, more work, transfers or
  // another device) returns at once with RealizeResult::deferred. For a caller on a thread that
  // must not block, which then hands the request to a worker.
  int64_t inline_work_limit = 0;
  // false: a CPU kernel missing from every kernel-cache tier is built by the optimized compiler
  // before it runs, even with EngineOptions::quick_compile on (prewarm: the kernels it builds are
  // meant to be final, on disk when the call returns). A kernel whose quick build is already in
  // memory (another realize got there first) is used as it is; its optimized build lands in the
  // background as usual.
  bool quick_compile = true;
  // true: a kernel with no tuning choice stored is searched (as EngineOptions::tune = Search),
  // whatever the engine's mode (prewarm with a manifest's `tune`).
  bool tune_search = false;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> create(EngineOptions options);
  ~Engine();

  std::vector<DeviceInfo> devices() const;
  // OK when tensors may be placed on device `code` (core/engine/placement.h); otherwise
  // FAILED_PRECONDITION saying why ("CUDA:0 is not available: <reason>", or not enabled).
  absl::Status check_device(int64_t code) const;
  // Contents across devices. Each returns when the bytes have arrived; `streams` (a session's)
  // orders the transfer after that session's queued work, null uses a stream of its own.
  // `buffer` itself when it is in host memory, else a host copy of it (downloads, debugging).
  absl::StatusOr<BufferPtr> to_host(const BufferPtr& buffer, DeviceStreams* streams = nullptr) const;
  // A new buffer on `buffer`'s device with its contents.
  absl::StatusOr<BufferPtr> clone(const BufferPtr& buffer, DeviceStreams* streams = nullptr) const;
  // `bytes` bytes of host memory over all of `dst` (INTERNAL when the sizes differ).
  absl::Status write(Buffer& dst, const void* from, size_t bytes, DeviceStreams* streams = nullptr) const;
  // `src` over `dst` (the same size; any two devices).
  absl::Status copy(Buffer& dst, const Buffer& src, DeviceStreams* streams = nullptr) const;

  // A host buffer, zero-filled unless `fill` is Fill::None (see Buffer::allocate_host: only
  // for a caller that overwrites every byte); RESOURCE_EXHAUSTED when memory is not available.
  absl::StatusOr<BufferPtr> allocate(DType dtype, Shape shape, Buffer::Fill fill = Buffer::Fill::Zero);

  // Computes `outputs`. Every BUFFER leaf reachable from them must be in `bound`
  // (FAILED_PRECONDITION otherwise). An output that is itself bound returns that buffer; every
  // other output is a buffer allocated by this call. A request whose structure (RealizeKey:
  // the graph with bound nodes abstracted to dtype, shape and aliasing) was realized before
  // reuses that compiled program from the schedule cache with this request's buffers.
  absl::StatusOr<RealizeResult> realize(const std::vector<UOpRef>& outputs, const Bindings& bound,
                                        const RealizeOptions& options = {});

  // The kernel cache this engine compiles through: for stats, export, import and prewarm.
  KernelCache& kernel_cache();
  // Blocks until the quick tier's math library (core/runtime/cpu/quick_math.h), whose build the
  // engine starts when it is made, is loaded or has failed; at once without the quick tier. For
  // tests that hold the compiler: that build is then not among the compiles they hold.
  void wait_for_quick_math() const;
  // Programs in the schedule cache now.
  size_t schedule_cache_entries() const;
  // Schedules, compiles and allocates `spec` once (core/engine/step_program.h); the step runs it
  // many times. Errors as for realize; INVALID_ARGUMENT for an assign whose value does not match
  // its target, or two assigns to one buffer. The engine must outlive the step.
  absl::StatusOr<std::unique_ptr<StepProgram>> compile_step(const StepSpec& spec,
                                                             const RealizeOptions& options = {});

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace polygrad
