#include "core/render/c_renderer.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/c_math.h"
#include "core/render/cstyle.h"

namespace polygrad {
namespace {

// Includes and the 16-bit float conversions in portable C; the division helpers (division by
// zero yields 0, MIN / -1 wraps: a client's graph must never trap a worker) are the base's.
constexpr const char* kHalfPrelude = R"(#include <stdint.h>
#include <string.h>
#include <math.h>
/* float16 and bfloat16 are stored as their bits and computed in float, rounded back to the
   element type after every operation; round-to-nearest-even, IEEE special values kept. */
static inline float pg_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
  if (e == 0) { float v = (float)m * 0x1p-24f; return s ? -v : v; }
  f = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float out; memcpy(&out, &f, 4); return out;
}
static inline uint16_t pg_f2h(float x) {
  uint32_t f; memcpy(&f, &x, 4);
  uint32_t s = (f >> 16) & 0x8000u, m = f & 0x7fffffu; int32_t be = (int32_t)((f >> 23) & 0xffu);
  if (be == 0xff) return (uint16_t)(s | 0x7c00u | (m ? 0x200u : 0u));
  int32_t e = be - 127 + 15;
  if (e >= 31) return (uint16_t)(s | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)s;
    m |= 0x800000u; uint32_t shift = (uint32_t)(14 - e), hm = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (hm & 1u))) hm++;
    return (uint16_t)(s | hm);
  }
  uint32_t out = s | ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) out++;
  return (uint16_t)out;
}
static inline float pg_bf2f(uint16_t b) { uint32_t f = (uint32_t)b << 16; float o; memcpy(&o, &f, 4); return o; }
static inline uint16_t pg_f2bf(float x) {
  uint32_t f; memcpy(&f, &x, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x40u);
  f += 0x7fffu + ((f >> 16) & 1u); return (uint16_t)(f >> 16);
}
static inline float pg_rh(float x) { return pg_h2f(pg_f2h(x)); }
static inline float pg_rbf(float x) { return pg_bf2f(pg_f2bf(x)); }
/* BITCAST: a float's bits and back, by memcpy (a pointer cast would break strict aliasing). */
static inline uint32_t pg_f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float pg_u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline uint64_t pg_d2u(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline double pg_u2d(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
)";

class CRenderer final : public CStyleRenderer {
 public:
  explicit CRenderer(bool fused_multiply_add) : fused_multiply_add_(fused_multiply_add) {}

 protected:
  std::string prelude() const override {
    return absl::StrCat(kHalfPrelude, kCMathPrelude, divmod_helpers("static inline"));
  }
  // exp and log of float (and of the 16-bit floats, computed in float) are c_math.h's.
  std::string math_call(const char* fn, DType dt, const std::string& x) const override {
    if (dt != DType::Float64 && (std::string_view(fn) == "exp" || std::string_view(fn) == "log"))
      return absl::StrCat("pg_", fn, "f(", x, ")");
    return CStyleRenderer::math_call(fn, dt, x);
  }

  // bufs[i] is DEFINE_GLOBAL i; [start, end) is the slice of the outer loop this call runs.
  std::string kernel_open(const LinearKernel& k) const override {
    // The pragma sets clang's contract flag on every float operation of the kernel, so the
    // backend fuses a multiply feeding an add as -ffp-contract=fast would; gcc ignores it.
    std::string out = absl::StrCat("void ", kKernelEntry, "(void** bufs, int64_t start, int64_t end) {\n",
                                   fused_multiply_add_ ? "  #pragma clang fp contract(fast)\n" : "",
                                   "  (void)start; (void)end;\n");
    for (size_t i = 0; i < k.params.size(); ++i) {
      const char* qual = i == 0 ? "" : "const ";
      absl::StrAppendFormat(&out, "  %s%s* restrict b%d = (%s%s*)bufs[%d];\n", qual, storage_type(k.params[i]), i,
                            qual, storage_type(k.params[i]), i);
    }
    return out;
  }

  std::string outer_loop(const std::string& r, const std::string&) const override {
    return absl::StrFormat("for (int64_t %s = start; %s < end; %s++) {", r, r, r);
  }
  // Kernels run on the daemon's thread pool and request threads, whose stacks are 8 MiB (the
  // system default; nothing here sets another); a panel takes at most kPanelBytes of them.
  bool has_panels() const override { return true; }
  std::string panel_array(const std::string& type, const std::string& name, int64_t elements) const override {
    return absl::StrFormat("%s %s[%d] __attribute__((aligned(64)));", type, name, elements);
  }
  // Understood by both clang and gcc, the compilers the CPU runtime picks from.
  std::string unroll_pragma(int64_t trip_count) const override {
    return absl::StrFormat("#pragma GCC unroll %d", trip_count);
  }
  // Unrolled, a softmax row sum's 16 lanes were 16 scalar expf calls (clang 14's full unroll runs
  // before its loop vectorizer); kept as a loop, they are two 8-wide libmvec calls. Other
  // compilers ignore the line.
  std::string math_lane_pragma(int64_t) const override { return "#pragma clang loop unroll(disable) vectorize(enable)"; }

 private:
  const bool fused_multiply_add_;
};

}  // namespace

std::string c_math_library_source() { return absl::StrCat(kHalfPrelude, kCMathPrelude, kCMathLibrarySuffix); }

absl::StatusOr<std::string> render_c(const LinearKernel& kernel, const CRenderOptions& options) {
  static const CRenderer plain(false), fused(true);
  return (options.fused_multiply_add ? fused : plain).render(kernel);
}

}  // namespace polygrad
