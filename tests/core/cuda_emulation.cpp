#include "tests/core/cuda_emulation.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/engine/kernels_for.h"
#include "core/render/c_math.h"
#include "core/render/c_renderer.h"
#include "core/render/cuda_renderer.h"
#include "core/runtime/cpu/compiler.h"
#include "core/runtime/process.h"
#include "core/schedule/schedule.h"

namespace polygrad::cuda_emulation {
namespace {

constexpr const char* kCudaEntry = "extern \"C\" __global__ void pg_kernel(";
constexpr const char* kCEntry = "void pg_kernel(void** bufs,";

// The prelude lines that are inline PTX, exactly as render_cuda writes them.
constexpr const char* kPtxH2F =
    "__device__ __forceinline__ float pg_h2f(uint16_t h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : "
    "\"h\"(h)); return f; }\n";
constexpr const char* kPtxF2H =
    "__device__ __forceinline__ uint16_t pg_f2h(float x) { uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : "
    "\"f\"(x)); return h; }\n";
// The vector loads, which the emulation checks for alignment (x86 would load misaligned data
// where a GPU faults).
constexpr const char* kLoad16 =
    "__device__ __forceinline__ pg_v16 pg_load16(const void* p) { return *(const pg_v16*)p; }\n";
constexpr const char* kLoad8 =
    "__device__ __forceinline__ pg_v8 pg_load8(const void* p) { return *(const pg_v8*)p; }\n";
constexpr const char* kHostLoads = R"pg(inline pg_v16 pg_load16(const void* p) {
  if ((std::uintptr_t)p % 16 != 0) pg_error = "a 16-byte vector load from an address not aligned to 16";
  pg_v16 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline pg_v8 pg_load8(const void* p) {
  if ((std::uintptr_t)p % 8 != 0) pg_error = "an 8-byte vector load from an address not aligned to 8";
  pg_v8 v;
  std::memcpy(&v, p, 8);
  return v;
}
)pg";
// Integer negation, in PTX to keep ptxas from a miscompile (cuda_renderer.cpp says which); on the
// host, the same two's-complement negation in C.
constexpr const char* kPtxIneg =
    "__device__ __forceinline__ int32_t pg_ineg(int32_t x) { int32_t y; asm(\"{.reg .b32 t; not.b32 t, %1; add.s32 "
    "%0, t, 1;}\" : \"=r\"(y) : \"r\"(x)); return y; }\n";
constexpr const char* kHostIneg = "inline int32_t pg_ineg(int32_t x) { return (int32_t)(0u - (uint32_t)x); }\n";
constexpr const char* kPtxF2BF =
    "__device__ __forceinline__ uint16_t pg_f2bf(float x) { uint16_t b; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(b) "
    ": \"f\"(x)); return b; }\n";

// What NVRTC provides and the host lacks. The kernels read threadIdx and kin; thread_local lets
// kernels of different shared objects run on different threads at once.
//
// Cooperative kernels (warp shuffles, __syncthreads, __shared__ memory) run each thread of a block
// as a fiber on one host thread (an x86-64 stack switch): a fiber runs until it reaches a barrier, and a barrier
// lets its fibers go once all of them have arrived — every lane of the warp for a shuffle, every
// thread of the block for __syncthreads. A shuffle publishes each lane's operand, waits for the
// warp, reads its source lane's, and waits again before any lane may overwrite its operand. That is
// CUDA's semantics for code where the lanes of a warp reach each shuffle together (as a full mask
// promises); a shuffle that a lane of the warp never reaches (it exited, or waits at a different
// barrier) is reported instead of run, as is a barrier nobody can pass. Shared memory is one
// variable per host thread, which the fibers of the block running there share, as a block's
// threads do.
constexpr const char* kShim = R"pg(#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#undef INFINITY
#undef NAN
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
namespace pg_cuda {
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
static thread_local const char* pg_error;  // a check that failed in this launch (pg_load16, ...)
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline long long __double_as_longlong(double d) { long long l; std::memcpy(&l, &d, 8); return l; }
inline double __longlong_as_double(long long l) { double d; std::memcpy(&d, &l, 8); return d; }

enum PgState : unsigned char { kRunnable, kAtShuffle, kAtSyncthreads, kDone };

// pg_switch(from, to): saves the callee-saved registers on the current stack, stores its pointer
// in *from, and continues on stack `to` (one pg_switch saved, or one pg_fiber_stack made). Unlike
// swapcontext it makes no system call (no signal mask), which is what keeps hundreds of thousands
// of lane switches within seconds.
extern "C" void pg_switch(void** from, void* to);
asm(R"(.text
.globl pg_switch
.hidden pg_switch
.type pg_switch, @function
pg_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size pg_switch, .-pg_switch
)");

struct PgBlock {
  static constexpr size_t kStack = 256 * 1024;
  explicit PgBlock(unsigned n) : sp(n), state(n), slot(n), stacks(new char[size_t{n} * kStack]) {}
  ~PgBlock() { delete[] stacks; }
  void* main_sp = nullptr;
  std::vector<void*> sp;            // each fiber's saved stack pointer
  std::vector<PgState> state;
  std::vector<std::uint64_t> slot;  // each thread's shuffle operand
  char* stacks;                     // untouched until a fiber's frames reach it
  unsigned current = 0;
  const char* error = nullptr;
  void (*body)(void*) = nullptr;
  void* arg = nullptr;
};
static thread_local PgBlock* pg_block;

inline void pg_arrive(PgState at) {
  PgBlock& b = *pg_block;
  const unsigned t = b.current;
  b.state[t] = at;
  pg_switch(&b.sp[t], b.main_sp);  // back here once the scheduler lets this barrier go
}
inline void __syncthreads() { pg_arrive(kAtSyncthreads); }
template <class T> T pg_shuffle(unsigned mask, T v, unsigned src_lane, bool relative) {
  static_assert(sizeof(T) <= 8, "shuffle operands are at most 64 bits");
  PgBlock& b = *pg_block;
  if (mask != 0xffffffffu && !b.error) b.error = "a shuffle without the full mask";
  const unsigned t = b.current, lane = t % 32, src = relative ? lane + src_lane : src_lane % 32;
  std::memcpy(&b.slot[t], &v, sizeof(T));
  pg_arrive(kAtShuffle);
  T out = v;
  if (src < 32) std::memcpy(&out, &b.slot[t - lane + src], sizeof(T));
  pg_arrive(kAtShuffle);
  return out;
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta) { return pg_shuffle(mask, v, delta, true); }
template <class T> T __shfl_sync(unsigned mask, T v, int src_lane) {
  return pg_shuffle(mask, v, (unsigned)src_lane, false);
}

// A fiber runs the kernel body once per block: when it has finished one, the scheduler resumes it
// for the next.
[[noreturn]] inline void pg_fiber_main() {
  for (;;) {
    PgBlock& b = *pg_block;
    b.body(b.arg);
    b.state[b.current] = kDone;
    pg_switch(&b.sp[b.current], b.main_sp);
  }
}
// A new fiber's stack: pg_switch's pops and return land in pg_fiber_main, aligned as after a call.
inline void* pg_fiber_stack(char* base, size_t size) {
  void** sp = reinterpret_cast<void**>(reinterpret_cast<std::uintptr_t>(base + size) & ~std::uintptr_t{15});
  *--sp = nullptr;                                  // a return address pg_fiber_main never uses
  *--sp = reinterpret_cast<void*>(&pg_fiber_main);  // where pg_switch returns to
  for (int i = 0; i < 6; ++i) *--sp = nullptr;      // rbp, rbx, r12-r15
  return sp;
}
// Runs every thread of the current block to its end; false (b.error says why) when it cannot.
// Round robin: each pass runs every runnable thread, first to last, until it waits, then lets go
// the barriers all of whose threads have arrived. Eager: the warps are taken last to first, and a
// warp whose last lane reaches a shuffle goes on at once, so each warp runs as far ahead of the
// ones below it as its barriers allow — and warp 0, whose lane 0 stores, comes last. A kernel
// whose result differs between the two reads shared memory another warp has not finished with
// (or not yet written): a missing __syncthreads.
inline bool pg_run_block(PgBlock& b, bool eager) {
  const unsigned n = (unsigned)b.state.size();
  for (unsigned t = 0; t < n; ++t) b.state[t] = kRunnable;
  for (;;) {
    for (unsigned i = 0; i < n; ++i) {
      // Eager: warps from the last, the lanes of each in order.
      const unsigned t = !eager ? i : (n - 1 - i) / 32 * 32 + i % 32;
      if (t >= n || b.state[t] != kRunnable) continue;
      b.current = t;
      threadIdx = dim3{t, 0, 0};
      pg_switch(&b.main_sp, b.sp[t]);
      if (!eager || b.state[t] != kAtShuffle || b.error) continue;
      const unsigned w = t - t % 32;
      bool all = w + 32 <= n;
      for (unsigned l = w; all && l < w + 32; ++l) all = b.state[l] == kAtShuffle;
      if (!all) continue;
      for (unsigned l = w; l < w + 32; ++l) b.state[l] = kRunnable;
      i = (n - 1 - w) / 32 * 32 - 1;  // this warp again, from its first lane
    }
    if (b.error) return false;
    // Nothing is runnable now: let go every barrier all of whose threads have arrived.
    bool done = true, released = false, all_at_sync = true;
    for (unsigned t = 0; t < n; ++t) {
      done = done && b.state[t] == kDone;
      all_at_sync = all_at_sync && (b.state[t] == kDone || b.state[t] == kAtSyncthreads);
    }
    if (done) return true;
    if (all_at_sync) {
      for (unsigned t = 0; t < n; ++t)
        if (b.state[t] == kAtSyncthreads) b.state[t] = kRunnable;
      continue;
    }
    for (unsigned w = 0; w < n; w += 32) {
      unsigned at = 0;
      for (unsigned t = w; t < w + 32 && t < n; ++t) at += b.state[t] == kAtShuffle;
      if (at == 0) continue;
      if (at != 32) {
        b.error = "a shuffle that not every lane of the warp reaches (a lane exited, waits at __syncthreads, or "
                  "does not exist)";
        return false;
      }
      for (unsigned t = w; t < w + 32; ++t) b.state[t] = kRunnable;
      released = true;
    }
    if (!released) {
      b.error = "threads wait at __syncthreads that others never reach";
      return false;
    }
  }
}
)pg";

// The launch: every block, and in it every thread one after another, or as fibers when the
// kernel cooperates (call[5]: the eager schedule). A kernel parameter of any pointer type is bound
// from a void* by PgArg. An emulation error goes back in call[4] (a message in the shared
// object's static storage).
constexpr const char* kDriver = R"pg(
struct PgArg {
  void* p;
  template <class T> operator T*() const { return static_cast<T*>(p); }
};
template <class F> void pg_emulate(::int64_t* call, bool cooperative, F&& body) {
  gridDim = dim3{(unsigned)call[2], 1, 1};
  blockDim = dim3{(unsigned)call[3], 1, 1};
  pg_error = nullptr;
  if (!cooperative) {
    for (unsigned b = 0; b < gridDim.x && !pg_error; ++b)
      for (unsigned t = 0; t < blockDim.x; ++t) {
        blockIdx = dim3{b, 0, 0};
        threadIdx = dim3{t, 0, 0};
        body();
      }
    if (pg_error) call[4] = (::int64_t)(std::intptr_t)pg_error;
    return;
  }
  PgBlock block(blockDim.x);
  block.body = [](void* f) { (*static_cast<F*>(f))(); };
  block.arg = &body;
  for (unsigned t = 0; t < blockDim.x; ++t) block.sp[t] = pg_fiber_stack(block.stacks + t * PgBlock::kStack, PgBlock::kStack);
  pg_block = &block;
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx = dim3{b, 0, 0};
    if (!pg_run_block(block, call[5] != 0) || pg_error) {
      call[4] = (::int64_t)(std::intptr_t)(block.error ? block.error : pg_error);
      break;
    }
  }
  pg_block = nullptr;
}
}  // namespace pg_cuda
/* args[0]: {kernel, n, grid, block, error out, eager}; args + 1: the kernel's buffers. */
extern "C" void pg_kernel(void** args, ::int64_t, ::int64_t) {
  ::int64_t* call = static_cast<::int64_t*>(args[0]);
  void** b = args + 1;
  switch (call[0]) {
)pg";

// The text of `s` from `from` up to (not including) `to`; empty when either is missing.
std::string between(const std::string& s, const std::string& from, const std::string& to) {
  size_t a = s.find(from);
  if (a == std::string::npos) return "";
  size_t b = s.find(to, a);
  return b == std::string::npos ? "" : s.substr(a, b - a);
}

// The C renderer's portable 16-bit conversions (the CPU path's own), taken from a rendered
// kernel so the emulation uses exactly them.
absl::StatusOr<std::string> find_c_half_conversions() {
  auto src = render_c(LinearKernel{});
  if (!src.ok()) return src.status();
  std::string h = between(*src, "static inline float pg_h2f(", "static inline float pg_bf2f(");
  std::string bf = between(*src, "static inline uint16_t pg_f2bf(", "static inline float pg_rh(");
  if (h.empty() || bf.empty()) return absl::FailedPreconditionError("the C prelude's 16-bit conversions were not found");
  return absl::StrCat(h, bf);
}

const absl::StatusOr<std::string>& c_half_conversions() {
  static const absl::StatusOr<std::string> conversions = find_c_half_conversions();
  return conversions;
}

// The prelude (everything before the entry point) and the rest, for a source whose entry point
// is `entry`.
absl::StatusOr<std::pair<std::string, std::string>> split(const std::string& source, const char* entry) {
  size_t at = source.find(entry);
  if (at == std::string::npos) return absl::FailedPreconditionError(absl::StrCat("no `", entry, "` in the source"));
  return std::pair{source.substr(0, at), source.substr(at)};
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base && *base ? base : "/tmp", "/polygrad-emu-XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The first of `candidates` that runs.
absl::StatusOr<std::string> find_compiler(std::vector<std::string> candidates) {
  for (const std::string& c : candidates) {
    auto r = run_process({c, "--version"}, std::chrono::seconds(20));
    if (r.ok() && r->exit_code == 0) return c;
  }
  return absl::FailedPreconditionError(absl::StrCat("no compiler found (tried ", candidates[0], " and ", candidates[1], ")"));
}

// Compiles `source` to shared-object bytes with `compiler` and `flags`.
absl::StatusOr<std::string> compile(const absl::StatusOr<std::string>& compiler, const std::vector<std::string>& flags,
                                    const char* file, const std::string& source) {
  if (!compiler.ok()) return compiler.status();
  TempDir dir;
  if (dir.path.empty()) return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  std::filesystem::path src = dir.path / file, out = dir.path / "kernels.so";
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    if (!f) return absl::InternalError("cannot write the kernel source");
  }
  std::vector<std::string> argv{*compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", out.string(), src.string(), "-lm"});
  auto r = run_process(argv, std::chrono::minutes(5));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError(absl::StrCat(*compiler, " failed on ", file, ": ", r->output));
  std::ifstream f(out, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  if (!f) return absl::InternalError("the compiler produced no shared object");
  return bytes.str();
}

// Both sides are compiled alike, as the CPU path compiles kernels but without optimisation: the
// same semantics (-fwrapv: integers wrap; no errno; the same scalar libm), every operation
// rounded as written (no FMA contraction), and at -O0 no loop is vectorised, so no call goes to
// the vector math library (libmvec) the CPU path uses under -O3, whose exp, log and sin differ
// from the scalar ones by an ulp or two. Unoptimised, hundreds of kernels compile in seconds.
//
// Under AddressSanitizer the kernels of both sides are instrumented too, so a rendered kernel
// that reads or writes outside its buffers is reported like the test's own code would be. They
// must then share the test binary's sanitizer runtime, so they are built by the same compiler
// family as the test (scripts/test's sanitizer build is clang's; gcc's runtime is another).
#if defined(POLYGRAD_ASAN_BUILD)
constexpr bool kSanitize = true;
#else
constexpr bool kSanitize = false;
#endif
// Otherwise clang first: its `#pragma unroll` is CUDA's.
#if defined(__clang__) || !defined(POLYGRAD_ASAN_BUILD)
constexpr bool kClangFirst = true;
#else
constexpr bool kClangFirst = false;
#endif

std::vector<std::string> common_flags() {
  std::vector<std::string> flags = {"-O0", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-w"};
  if (kSanitize) flags.insert(flags.end(), {"-fsanitize=address", "-fno-omit-frame-pointer"});
  return flags;
}

absl::StatusOr<std::string> compile_c(const std::string& source) {
  static const absl::StatusOr<std::string> cc =
      kClangFirst ? find_compiler({"clang", "gcc"}) : find_compiler({"gcc", "clang"});
  std::vector<std::string> flags = common_flags();
  flags.push_back("-std=gnu11");  // the CPU path's dialect
  return compile(cc, flags, "kernels.c", source);
}

absl::StatusOr<std::string> compile_cxx(const std::string& source) {
  static const absl::StatusOr<std::string> cxx =
      kClangFirst ? find_compiler({"clang++", "g++"}) : find_compiler({"g++", "clang++"});
  std::vector<std::string> flags = common_flags();
  flags.push_back("-std=c++17");  // NVRTC's dialect in Nvrtc::options
  return compile(cxx, flags, "kernels.cpp", source);
}

// Builds `units` translation units over `sources` with `make_unit(first, last)`, compiles them
// in parallel with `compile`, and loads each.
absl::StatusOr<std::vector<ProgramPtr>> build_units(
    size_t count, size_t units, const std::function<absl::StatusOr<std::string>(size_t, size_t)>& make_unit,
    const std::function<absl::StatusOr<std::string>(const std::string&)>& compile) {
  units = std::clamp<size_t>(units, 1, std::max<size_t>(count, 1));
  std::vector<absl::StatusOr<std::string>> objects(units, absl::UnknownError("not compiled"));
  std::vector<std::thread> threads;
  for (size_t u = 0; u < units; ++u)
    threads.emplace_back([&, u] {
      auto src = make_unit(count * u / units, count * (u + 1) / units);
      objects[u] = src.ok() ? compile(*src) : src.status();
    });
  for (auto& t : threads) t.join();
  std::vector<ProgramPtr> programs;
  for (auto& o : objects) {
    if (!o.ok()) return o.status();
    auto p = CpuCompiler::load(*o);
    if (!p.ok()) return p.status();
    programs.push_back(*p);
  }
  return programs;
}

}  // namespace

std::vector<uint8_t> random_bytes(DType dt, int64_t numel, uint64_t seed) {
  std::mt19937_64 rng(seed);
  size_t size = dtype_itemsize(dt);
  std::vector<uint8_t> out(static_cast<size_t>(numel) * size);
  std::uniform_real_distribution<double> value(-4, 4);
  auto special = [&](uint64_t r, const uint64_t (&bits)[6]) { return bits[r % 6]; };
  for (int64_t i = 0; i < numel; ++i) {
    uint64_t r = rng(), bits = 0;
    bool odd = r % 50 == 0;  // 2% special values
    switch (dt) {
      case DType::Bool: bits = r & 1; break;
      case DType::Float16:
        bits = odd ? special(r >> 8, {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001})
                   : ((r >> 8) & 0x8000) | (((r >> 20) % 11 + 10) << 10) | ((r >> 32) & 0x3ff);
        break;
      case DType::BFloat16:
        bits = odd ? special(r >> 8, {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001})
                   : ((r >> 8) & 0x8000) | (((r >> 20) % 11 + 122) << 7) | ((r >> 32) & 0x7f);
        break;
      case DType::Float32: {
        float f = static_cast<float>(value(rng));
        uint32_t u;
        std::memcpy(&u, &f, 4);
        bits = odd ? special(r >> 8, {0x0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x1}) : u;
        break;
      }
      case DType::Float64: {
        double d = value(rng);
        std::memcpy(&bits, &d, 8);
        if (odd)
          bits = special(r >> 8, {0x0, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
                                  0x7ff8000000000000, 0x1});
        break;
      }
      default: bits = r; break;
    }
    std::memcpy(out.data() + static_cast<size_t>(i) * size, &bits, size);  // little-endian
  }
  return out;
}

std::string format_element(DType dt, const uint8_t* p) {
  size_t size = dtype_itemsize(dt);
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);
  if (dt == DType::Float32) {
    float f;
    std::memcpy(&f, p, 4);
    return absl::StrFormat("%a (0x%08x)", f, bits);
  }
  if (dt == DType::Float64) {
    double d;
    std::memcpy(&d, p, 8);
    return absl::StrFormat("%a (0x%016x)", d, bits);
  }
  if (dtype_is_int(dt) && !dtype_is_unsigned(dt) && size < 8 && (bits >> (8 * size - 1)) & 1)
    return absl::StrCat(static_cast<int64_t>(bits | (~uint64_t{0} << (8 * size))));
  return absl::StrFormat("%d (0x%x)", bits, bits);
}

namespace {

// The accumulators of float sums and products in `k`.
int64_t float_sum_accumulators(const LinearKernel& k) {
  int64_t count = 0;
  for (const UOpRef& u : k.ops)
    if (u->op == Ops::DEFINE_ACC && dtype_is_float(u->dtype)) {
      const Ops op = static_cast<Ops>(u->src[0]->arg_int());
      count += op == Ops::ADD || op == Ops::MUL;
    }
  return count;
}

}  // namespace

absl::StatusOr<std::vector<KernelCase>> kernel_cases(const std::vector<UOpRef>& outputs) {
  auto is_buffer = [](const UOp* n) { return n->op == Ops::BUFFER; };
  auto sched = create_schedule(outputs, is_buffer);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  std::vector<KernelCase> out;
  for (const ScheduleItem& item : sched->items) {
    if (item.root->numel() == 0) continue;  // as kernels_for: an empty kernel never runs
    auto k = lower_to_linear(item.root, materialized);
    if (!k.ok()) return k.status();
    auto g = lower_for_cuda(item.root, materialized);
    if (!g.ok()) return g.status();
    KernelCase c;
    for (const UOp* p : k->params) {
      c.numel.push_back(p->numel());
      c.dtypes.push_back(p->dtype);
    }
    for (const UOp* p : g->params) {
      auto at = std::find(k->params.begin(), k->params.end(), p);
      if (at == k->params.end()) return absl::InternalError("the two lowerings read different buffers");
      c.cuda_args.push_back(static_cast<size_t>(at - k->params.begin()));
    }
    if (c.cuda_args.size() != k->params.size() || c.cuda_args[0] != 0)
      return absl::InternalError("the two lowerings have different parameters");
    c.threads_per_iteration = cuda_threads_per_iteration(g->linear);
    c.staged = cuda_stages_operands(g->linear);
    // A float sum or product is reordered when a warp's lanes share it, or when the CPU kernel
    // splits it into lane accumulators combined at the end (an upcast reduction axis: more
    // accumulators than the GPU's kernel, which has one per reduction).
    const int64_t cpu_accs = float_sum_accumulators(k->linear), gpu_accs = float_sum_accumulators(g->linear);
    c.reassociates = gpu_accs > 0 && (c.threads_per_iteration > 1 || cpu_accs > gpu_accs);
    auto cs = render_c(k->linear);
    if (!cs.ok()) return cs.status();
    auto cu = render_cuda(g->linear);
    if (!cu.ok()) return cu.status();
    c.linear = std::move(k->linear);
    c.cuda_linear = std::move(g->linear);
    c.c_source = std::move(*cs);
    c.cuda_source = std::move(*cu);
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::string> host_cuda_prelude(const std::string& cuda_source) {
  auto parts = split(cuda_source, kCudaEntry);
  if (!parts.ok()) return parts.status();
  const auto& conversions = c_half_conversions();
  if (!conversions.ok()) return conversions.status();
  std::string prelude = parts->first;
  for (const char* line : {kPtxH2F, kPtxF2H, kPtxF2BF, kLoad16, kLoad8, kPtxIneg}) {
    size_t at = prelude.find(line);
    if (at == std::string::npos)
      return absl::FailedPreconditionError(
          absl::StrCat("the CUDA prelude changed: this line is no longer in it, update the emulation:\n", line));
    // The C versions of the three conversions go where the first was, the checked loads where
    // the first load was; the others are dropped.
    // The negation becomes its host twin.
    prelude.replace(at, std::strlen(line),
                    line == kPtxH2F ? *conversions : line == kLoad16 ? kHostLoads : line == kPtxIneg ? kHostIneg : "");
  }
  if (prelude.find("asm") != std::string::npos)
    return absl::FailedPreconditionError("the CUDA prelude has inline assembly the emulation does not replace");
  return prelude;
}

KernelSet::KernelSet(std::vector<ProgramPtr> programs, size_t kernels) : programs_(std::move(programs)) {
  // build_units gave unit u the kernels [kernels * u / n, kernels * (u + 1) / n).
  const size_t n = programs_.size();
  for (size_t u = 0; u < n; ++u)
    for (size_t i = kernels * u / n; i < kernels * (u + 1) / n; ++i)
      slots_.push_back({u, static_cast<int64_t>(i - kernels * u / n)});
}

absl::StatusOr<KernelSet> KernelSet::emulated_cuda(const std::vector<std::string>& sources, size_t units) {
  if (sources.empty()) return absl::InvalidArgumentError("no kernels");
  auto host_prelude = host_cuda_prelude(sources[0]);
  if (!host_prelude.ok()) return host_prelude.status();
  auto make_unit = [&](size_t first, size_t last) -> absl::StatusOr<std::string> {
    // The CPU's kernels compute exp and log with c_math.h's functions: the emulated GPU kernels
    // do too, so that the comparison checks what the renderers write, not two libraries' exp.
    std::string unit = absl::StrCat(kShim, kCMathPrelude, "#define expf pg_expf\n#define logf pg_logf\n", *host_prelude), cases;
    for (size_t i = first; i < last; ++i) {
      auto parts = split(sources[i], kCudaEntry);
      if (!parts.ok()) return parts.status();
      auto prelude = host_cuda_prelude(sources[i]);
      if (!prelude.ok()) return prelude.status();
      if (*prelude != *host_prelude) return absl::FailedPreconditionError("the CUDA kernels have different preludes");
      std::string name = absl::StrCat("pg_kernel_", i - first);
      absl::StrAppend(&unit, absl::StrReplaceAll(parts->second, {{"pg_kernel(", name + "("}}));
      // Every parameter but the last (n) is a buffer.
      size_t params = static_cast<size_t>(std::count(parts->second.begin(),
                                                     parts->second.begin() + parts->second.find(')'), ','));
      std::string args;
      for (size_t p = 0; p < params; ++p) absl::StrAppend(&args, "pg_cuda::PgArg{b[", p, "]}, ");
      const bool cooperative = parts->second.find("__shfl") != std::string::npos ||
                               parts->second.find("__syncthreads") != std::string::npos;
      absl::StrAppend(&cases, "    case ", i - first, ": pg_cuda::pg_emulate(call, ", cooperative ? "true" : "false",
                      ", [&] { pg_cuda::", name, "(", args, "call[1]); }); break;\n");
    }
    return absl::StrCat(unit, kDriver, cases, "  }\n}\n");
  };
  auto programs = build_units(sources.size(), units, make_unit, compile_cxx);
  if (!programs.ok()) return programs.status();
  return KernelSet(std::move(*programs), sources.size());
}

absl::StatusOr<KernelSet> KernelSet::cpu(const std::vector<std::string>& sources, size_t units) {
  return cpu(sources, units, compile_c);
}

absl::StatusOr<KernelSet> KernelSet::cpu(const std::vector<std::string>& sources, size_t units,
                                         const std::function<absl::StatusOr<std::string>(const std::string&)>& compile) {
  if (sources.empty()) return absl::InvalidArgumentError("no kernels");
  auto first = split(sources[0], kCEntry);
  if (!first.ok()) return first.status();
  auto make_unit = [&](size_t begin, size_t end) -> absl::StatusOr<std::string> {
    std::string unit = first->first, cases;
    for (size_t i = begin; i < end; ++i) {
      auto parts = split(sources[i], kCEntry);
      if (!parts.ok()) return parts.status();
      if (parts->first != first->first) return absl::FailedPreconditionError("the C kernels have different preludes");
      std::string name = absl::StrCat("pg_kernel_", i - begin);
      absl::StrAppend(&unit, absl::StrReplaceAll(parts->second, {{"pg_kernel(", name + "("}}));
      absl::StrAppend(&cases, "    case ", i - begin, ": ", name, "(args + 1, start, end); break;\n");
    }
    // args[0]: the kernel's number; args + 1: its buffers.
    return absl::StrCat(unit, "void pg_kernel(void** args, int64_t start, int64_t end) {\n",
                        "  switch (*(const int64_t*)args[0]) {\n", cases, "  }\n}\n");
  };
  auto programs = build_units(sources.size(), units, make_unit, compile);
  if (!programs.ok()) return programs.status();
  return KernelSet(std::move(*programs), sources.size());
}

absl::Status KernelSet::launch(size_t kernel, const std::vector<void*>& bufs, int64_t n, unsigned grid,
                               unsigned block, bool eager) const {
  const Slot& s = slots_.at(kernel);
  int64_t call[6] = {s.local, n, grid, block, 0, eager};
  std::vector<void*> args{call};
  args.insert(args.end(), bufs.begin(), bufs.end());
  // The CPU dispatcher reads only call[0] and runs [0, n); the emulation ignores start and end.
  if (absl::Status st = programs_[s.program]->launch(args.data(), 0, n); !st.ok()) return st;
  if (call[4] != 0)
    return absl::InternalError(
        absl::StrCat("emulation stopped: ", reinterpret_cast<const char*>(static_cast<intptr_t>(call[4]))));
  return absl::OkStatus();
}

std::vector<LaunchDims> launch_shapes(int64_t n, int threads_per_iteration, bool whole_blocks) {
  const unsigned lanes = static_cast<unsigned>(threads_per_iteration);
  if (lanes >= kBlockLanes) return {launch_dims(n * lanes, 132), LaunchDims{2, lanes}};
  if (whole_blocks) return {launch_dims(n, 132), LaunchDims{2, kBlockLanes}};
  if (lanes > 1) return {launch_dims(n * lanes, 132), LaunchDims{2, 2 * lanes}};
  return {launch_dims(n, 132), LaunchDims{2, 3}};
}

namespace {

double from_half(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1 : 1;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa | 0x400, exponent - 25);
}

double from_bfloat16(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Whether two elements agree: bit for bit, or for floats of a reassociating kernel as compare()
// promises.
bool agree(DType dt, const uint8_t* want, const uint8_t* got, bool reassociates) {
  const size_t size = dtype_itemsize(dt);
  if (std::memcmp(want, got, size) == 0) return true;
  if (!reassociates || !dtype_is_float(dt)) return false;
  auto value = [&](const uint8_t* p) -> double {
    uint64_t bits = 0;
    std::memcpy(&bits, p, size);
    switch (dt) {
      case DType::Float16: return from_half(static_cast<uint16_t>(bits));
      case DType::BFloat16: return from_bfloat16(static_cast<uint16_t>(bits));
      case DType::Float32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      default: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
    }
  };
  const double w = value(want), g = value(got);
  if (std::isnan(w) || std::isnan(g)) return std::isnan(w) && std::isnan(g);
  if (std::isinf(w) || std::isinf(g)) return w == g;
  const double tol = dt == DType::Float16    ? 0x1p-3
                     : dt == DType::BFloat16 ? 0x1p0
                     : dt == DType::Float32  ? 0x1p-15
                                             : 0x1p-44;
  return std::fabs(g - w) <= tol * (1 + std::fabs(w));
}

}  // namespace

std::vector<std::string> compare(const std::vector<KernelCase>& cases, const KernelSet& cpu,
                                 const KernelSet& emulated) {
  std::vector<std::string> mismatches;
  for (size_t k = 0; k < cases.size(); ++k) {
    const KernelCase& c = cases[k];
    const std::vector<DType>& params = c.dtypes;
    std::vector<std::vector<uint8_t>> inputs(params.size());
    std::vector<void*> bufs(params.size());
    for (size_t p = 1; p < params.size(); ++p) {
      inputs[p] = random_bytes(params[p], c.numel[p], k * 1000003 + p);
      bufs[p] = inputs[p].data();
    }
    DType out_dt = params[0];
    size_t out_bytes = static_cast<size_t>(c.numel[0]) * dtype_itemsize(out_dt);
    std::vector<uint8_t> want(out_bytes, 0x5a);
    bufs[0] = want.data();
    if (absl::Status s = cpu.launch(k, bufs, c.linear.outer_size); !s.ok()) {
      mismatches.push_back(absl::StrFormat("kernel %d on the CPU: %s", k, s.ToString()));
      continue;
    }
    const bool cooperative = c.threads_per_iteration > 1 || c.staged;
    for (LaunchDims dims : launch_shapes(c.cuda_linear.outer_size, c.threads_per_iteration, c.staged)) {
      std::vector<uint8_t> round_robin;  // a cooperative kernel's result under the first schedule
      for (bool eager : {false, true}) {
        if (eager && !cooperative) continue;
        const char* schedule = !cooperative ? "" : eager ? ", eager schedule" : ", round-robin schedule";
        std::vector<uint8_t> got(out_bytes, 0xa5);
        std::vector<void*> args;
        for (size_t a : c.cuda_args) args.push_back(a == 0 ? got.data() : bufs[a]);
        absl::Status s = emulated.launch(k, args, c.cuda_linear.outer_size, dims.grid, dims.block, eager);
        if (!s.ok()) {
          mismatches.push_back(absl::StrFormat("kernel %d (grid %d x %d%s): %s\n--- CUDA source ---\n%s", k, dims.grid,
                                               dims.block, schedule, s.ToString(), c.cuda_source));
          continue;
        }
        if (!eager) round_robin = got;
        if (eager && !round_robin.empty() && got != round_robin) {
          mismatches.push_back(absl::StrFormat(
              "kernel %d (grid %d x %d): the result depends on the order the threads run in (a missing "
              "__syncthreads?)\n--- CUDA source ---\n%s",
              k, dims.grid, dims.block, c.cuda_source));
          continue;
        }
        if (got == want) continue;
        size_t size = dtype_itemsize(out_dt), first = 0, count = 0;
        for (size_t i = c.numel[0]; i-- > 0;)
          if (!agree(out_dt, want.data() + i * size, got.data() + i * size, c.reassociates)) {
            first = i;
            ++count;
          }
        if (count == 0) continue;
        mismatches.push_back(absl::StrFormat(
            "kernel %d (%s output, %d elements, n=%d, grid %d x %d%s%s): %d elements differ; first at %d: CPU %s, "
            "emulated CUDA %s\n--- CUDA source ---\n%s\n--- C source (the CPU path's) ---\n%s",
            k, dtype_name(out_dt), c.numel[0], c.cuda_linear.outer_size, dims.grid, dims.block, schedule,
            c.reassociates ? ", reassociated" : "", count, first, format_element(out_dt, want.data() + first * size),
            format_element(out_dt, got.data() + first * size), c.cuda_source,
            c.c_source.substr(c.c_source.find(kCEntry))));
      }
    }
  }
  return mismatches;
}

}  // namespace polygrad::cuda_emulation
