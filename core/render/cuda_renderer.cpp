#include "core/render/cuda_renderer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/c_renderer.h"
#include "core/render/cstyle.h"

namespace polygrad {
namespace {

// The fixed-width types and IEEE constants C gets from its headers, and the 16-bit float
// conversions as single PTX instructions (cvt.rn: round-to-nearest-even, like the C prelude;
// bf16 conversion needs sm_80).
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
)";

constexpr const char* kGlobalId = "(int64_t)blockIdx.x * blockDim.x + threadIdx.x";

class CudaRenderer final : public CStyleRenderer {
 protected:
  std::string prelude() const override {
    return absl::StrCat(kCudaPrelude, divmod_helpers("__device__ __forceinline__"));
  }

  std::string kernel_open(const LinearKernel& k) const override {
    std::string out = absl::StrCat("extern \"C\" __global__ void ", kKernelEntry, "(");
    for (size_t i = 0; i < k.params.size(); ++i)
      absl::StrAppendFormat(&out, "%s%s* __restrict__ b%d, ", i == 0 ? "" : "const ", storage_type(k.params[i]), i);
    absl::StrAppend(&out, "int64_t n) {\n");
    // Without an outer loop the kernel is one thread's work.
    if (k.outer_range_id < 0) absl::StrAppend(&out, "  if (", kGlobalId, " >= n) return;\n");
    return out;
  }

  std::string outer_loop(const std::string& r, const std::string&) const override {
    return absl::StrFormat("for (int64_t %s = %s; %s < n; %s += (int64_t)gridDim.x * blockDim.x) {", r, kGlobalId, r,
                           r);
  }
  std::string unroll_pragma(int64_t trip_count) const override { return absl::StrFormat("#pragma unroll %d", trip_count); }

  const char* scalar_type(DType dt) const override { return dt == DType::Bool ? "bool" : dtype_c_type(dt); }
};

}  // namespace

absl::StatusOr<std::string> render_cuda(const LinearKernel& kernel) {
  static const CudaRenderer renderer;
  return renderer.render(kernel);
}

}  // namespace polygrad
