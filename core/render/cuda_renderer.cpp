#include "core/render/cuda_renderer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/c_renderer.h"
#include "core/render/cstyle.h"
#include "core/render/operand_staging.h"

namespace polygrad {
namespace {

// The fixed-width types and IEEE constants C gets from its headers, and the 16-bit float
// conversions as single PTX instructions (cvt.rn: round-to-nearest-even, like the C prelude;
// bf16 conversion needs sm_80).
//
// pg_ineg works around a ptxas bug (CUDA 13.0.88, sm_90, offline and in the 580 driver's JIT,
// at -O1 and above): a max or min over negated 32- or 16-bit integers, unrolled, becomes sm_90's
// three-input VIMNMX3 with some of the negations dropped, so argmin and min of int32 came out
// wrong on an H200 (found by tests/gpu/run.sh's parity table, 2026-11-27). The PTX is right;
// the SASS is not. Negation written as not-then-add-one is left alone by that rewrite.
constexpr const char* kCudaPrelude = R"(typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)
/* float16 and bfloat16 are stored as their bits and computed in float, rounded back to the
   element type after every operation. */
__device__ __forceinline__ float pg_h2f(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ uint16_t pg_f2h(float x) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
__device__ __forceinline__ float pg_bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t pg_f2bf(float x) { uint16_t b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x)); return b; }
__device__ __forceinline__ float pg_rh(float x) { return pg_h2f(pg_f2h(x)); }
__device__ __forceinline__ float pg_rbf(float x) { return pg_bf2f(pg_f2bf(x)); }
/* BITCAST: a float's bits and back. */
__device__ __forceinline__ uint32_t pg_f2u(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float pg_u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint64_t pg_d2u(double x) { return (uint64_t)__double_as_longlong(x); }
__device__ __forceinline__ double pg_u2d(uint64_t u) { return __longlong_as_double((long long)u); }
/* Vector loads: 16 or 8 bytes at an address aligned to that many, in one instruction. */
struct alignas(16) pg_v16 { uint32_t w[4]; };
struct alignas(8) pg_v8 { uint32_t w[2]; };
__device__ __forceinline__ pg_v16 pg_load16(const void* p) { return *(const pg_v16*)p; }
__device__ __forceinline__ pg_v8 pg_load8(const void* p) { return *(const pg_v8*)p; }
/* Integer negation as not and add one, never a plain neg: see kCudaPrelude's comment. */
__device__ __forceinline__ int32_t pg_ineg(int32_t x) { int32_t y; asm("{.reg .b32 t; not.b32 t, %1; add.s32 %0, t, 1;}" : "=r"(y) : "r"(x)); return y; }
)";

constexpr const char* kGlobalId = "(int64_t)blockIdx.x * blockDim.x + threadIdx.x";
// A reduction loop shorter than this keeps one thread per outer iteration: lanes would idle.
constexpr int64_t kMinLaneTrip = 64;
// With more outer iterations than this, a thread each is parallelism enough (an H100 runs ~270k
// threads at once) and keeps reads along the output axis coalesced.
constexpr int64_t kMaxWarpIterations = int64_t{1} << 15;
// A block per outer iteration when there are at most this many (a block each still fills the GPU:
// 1024 x 256 threads) and a reduction loop of at least kMinBlockTrip (8 or more per thread): with
// a warp each, few outputs with long reductions would leave most of the GPU idle.
constexpr int64_t kMaxBlockIterations = 1024;
constexpr int64_t kMinBlockTrip = 2048;

class CudaRenderer final : public CStyleRenderer {
 protected:
  std::string prelude() const override {
    return absl::StrCat(kCudaPrelude, divmod_helpers("__device__ __forceinline__"));
  }

  // Integers of 32 bits or fewer are negated in 32-bit registers: through pg_ineg (see above).
  std::string negate(DType dt, const std::string& x) const override {
    switch (dt) {
      case DType::Int8: case DType::Int16: case DType::Int32:
      case DType::UInt8: case DType::UInt16: case DType::UInt32:
        return absl::StrCat("((", scalar_type(dt), ")pg_ineg((int32_t)", x, "))");
      default: return CStyleRenderer::negate(dt, x);
    }
  }

  std::string kernel_open(const LinearKernel& k) const override {
    std::string out = absl::StrCat("extern \"C\" __global__ void ", kKernelEntry, "(");
    for (size_t i = 0; i < k.params.size(); ++i)
      absl::StrAppendFormat(&out, "%s%s* __restrict__ b%d, ", i == 0 ? "" : "const ", storage_type(k.params[i]), i);
    absl::StrAppend(&out, "int64_t n) {\n");
    const int lanes = group_lanes(k);
    if (lanes > 1)
      absl::StrAppendFormat(&out, "  const int pg_lane = threadIdx.x %% %d;\n  const int64_t pg_group = (%s) / %d;\n", lanes,
                            kGlobalId, lanes);
    // Without an outer loop the kernel is one thread's work, or one group's.
    if (k.outer_range_id < 0)
      absl::StrAppend(&out, lanes == 1 ? absl::StrCat("  if (", kGlobalId, " >= n) return;\n")
                                       : "  if (pg_group != 0) return;\n");
    return out;
  }

  std::string outer_loop(const std::string& r, const std::string&) const override {
    return absl::StrFormat("for (int64_t %s = %s; %s < n; %s += (int64_t)gridDim.x * blockDim.x) {", r, kGlobalId, r,
                           r);
  }
  std::string unroll_pragma(int64_t trip_count) const override { return absl::StrFormat("#pragma unroll %d", trip_count); }

  std::vector<int64_t> lane_ranges(const LinearKernel& k) const override { return cuda_lane_ranges(k); }
  int group_lanes(const LinearKernel& k) const override { return cuda_threads_per_iteration(k); }
  std::string group_outer_loop(const std::string& r, const std::string&, int lanes) const override {
    return absl::StrFormat("for (int64_t %s = pg_group; %s < n; %s += (int64_t)gridDim.x * blockDim.x / %d) {", r, r, r,
                           lanes);
  }
  std::string lane_loop(const std::string& r, const std::string& end, int lanes) const override {
    return absl::StrFormat("for (int64_t %s = pg_lane; %s < %s; %s += %d) {", r, r, end, r, lanes);
  }
  // A tree over the lanes of each warp (lane i takes lane i + d's partial). For a warp group, lane
  // 0's total then goes to every lane: a butterfly would leave each lane a total summed in its own
  // order, and lanes that store or branch on the result must agree bit for bit. For a block group,
  // each warp's lane 0 puts its total in shared memory and every thread combines the warps' totals
  // in the same order; the second barrier keeps the next combine from overwriting them early.
  // Types narrower than 32 bits travel through shuffles as int.
  std::string group_combine(const std::string& acc, Ops op, const std::string& type, int lanes) const override {
    const bool narrow = type == "bool" || type == "int8_t" || type == "uint8_t" || type == "int16_t" || type == "uint16_t";
    const std::string wire = narrow ? "int" : type;
    auto combine = [&](const std::string& other) {
      if (op == Ops::ADD) return absl::StrFormat("%s = %s + %s;", acc, acc, other);
      if (op == Ops::MUL) return absl::StrFormat("%s = %s * %s;", acc, acc, other);
      if (type == "float" || type == "double")  // a NaN, once seen, stays (torch's max)
        return absl::StrFormat("{ const %s o = %s; %s = (o > %s || o != o) ? o : %s; }", type, other, acc, acc, acc);
      return absl::StrFormat("{ const %s o = %s; %s = o > %s ? o : %s; }", type, other, acc, acc, acc);
    };
    std::string out = absl::StrFormat(
        "for (int d = %d; d > 0; d /= 2) %s\n", kWarpLanes / 2,
        combine(absl::StrFormat("(%s)__shfl_down_sync(0xffffffffu, (%s)%s, d)", type, wire, acc)));
    if (lanes == kWarpLanes)
      return absl::StrCat(out, absl::StrFormat("%s = (%s)__shfl_sync(0xffffffffu, (%s)%s, 0);", acc, type, wire, acc));
    const int warps = lanes / kWarpLanes;
    return absl::StrCat(out, absl::StrFormat("{\n  __shared__ %s pg_part[%d];\n  if (pg_lane %% %d == 0) pg_part[pg_lane / %d] = %s;\n"
                                             "  __syncthreads();\n  %s = pg_part[0];\n  for (int w = 1; w < %d; ++w) %s\n"
                                             "  __syncthreads();\n}",
                                             type, warps, kWarpLanes, kWarpLanes, acc, acc, warps, combine("pg_part[w]")));
  }
  bool has_vector_loads() const override { return true; }
  std::string vector_load(size_t bytes, const std::string& address) const override {
    if (bytes == 16) return absl::StrCat("pg_load16(", address, ")");
    if (bytes == 8) return absl::StrCat("pg_load8(", address, ")");
    return "";
  }
  std::string lane_store_guard() const override { return "if (pg_lane == 0) "; }
  int block_threads() const override { return kBlockLanes; }
  std::string shared_array(const std::string& type, const std::string& name, int64_t elements) const override {
    // Aligned for the 16-byte vector reads a tile's lanes may make of it.
    return absl::StrFormat("__shared__ __align__(16) %s %s[%d];", type, name, elements);
  }
  std::string block_barrier() const override { return "__syncthreads();"; }
  std::string thread_in_block() const override { return "(int64_t)threadIdx.x"; }

  const char* scalar_type(DType dt) const override { return dt == DType::Bool ? "bool" : dtype_c_type(dt); }
};

}  // namespace

namespace {

// The lane loops of `k` and the longest constant trip count among them (-1 when one is not a
// constant), or no loops when the kernel keeps a thread per outer iteration.
struct LaneLoops {
  std::vector<int64_t> ranges;
  int64_t longest = 0;
};

LaneLoops lane_loops(const LinearKernel& k) {
  if (!k.upcast_ranges.empty() || k.outer_size > kMaxWarpIterations) return {};
  LaneLoops out;
  bool pending = false;     // a scalar accumulator was just defined: its first loop is next
  int lane_depth = 0;       // open loops at or inside a lane loop
  for (const UOpRef& u : k.ops) {
    const UOp& n = *u;
    if (n.op == Ops::DEFINE_ACC) {
      // An accumulator inside a lane loop would need its own combine per lane iteration, and an
      // array accumulator belongs to upcast lanes: such kernels keep one thread per iteration.
      if (lane_depth > 0 || n.src.size() != 1) return {};
      pending = true;
    } else if (n.op == Ops::RANGE) {
      if (n.arg_int() == k.outer_range_id) {
        if (pending) return {};  // a reduction outside the outer loop: every lane would run it whole
      } else if (lane_depth > 0) {
        ++lane_depth;
      } else if (pending) {
        out.ranges.push_back(n.arg_int());
        lane_depth = 1;
        const UOp& trip = *n.src[0];
        if (out.longest >= 0) out.longest = trip.op == Ops::CONST ? std::max(out.longest, trip.arg_int()) : -1;
      }
      pending = false;
    } else if (n.op == Ops::END_RANGE) {
      if (lane_depth > 0) --lane_depth;
    }
  }
  if (out.longest >= 0 && out.longest < kMinLaneTrip) return {};
  return out;
}

}  // namespace

std::vector<int64_t> cuda_lane_ranges(const LinearKernel& k) { return lane_loops(k).ranges; }

int cuda_threads_per_iteration(const LinearKernel& k) {
  const LaneLoops loops = lane_loops(k);
  if (loops.ranges.empty()) return 1;
  const bool long_loop = loops.longest < 0 || loops.longest >= kMinBlockTrip;
  return k.outer_size <= kMaxBlockIterations && long_loop ? kBlockLanes : kWarpLanes;
}

bool cuda_stages_operands(const LinearKernel& k) {
  return cuda_lane_ranges(k).empty() && plan_staging(k, kBlockLanes).has_value();
}

absl::StatusOr<std::string> render_cuda(const LinearKernel& kernel) {
  static const CudaRenderer renderer;
  return renderer.render(kernel);
}

}  // namespace polygrad
