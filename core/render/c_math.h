// exp and log of float as C source that every CPU kernel carries (c_renderer.h's prelude), in
// place of libm's expf and logf.
//
// Why ours: the same operations in the same order wherever they run, so a kernel computes the
// same bits scalar or vectorised, unrolled or not, built by clang or by TinyCC (the quick tier).
// Kernels compile with -ffp-contract=off; the fused multiply-adds here are explicit fmaf calls,
// one rounding by C's definition. About 1 ulp of the exact result at worst (Cody-Waite reduction,
// Cephes' minimax polynomials). Quick builds define PG_MATH_EXTERN and call pg_expf_ext and
// pg_logf_ext, the optimized compiler's build of this same text (core/runtime/cpu/quick_math.h).
// The measurements, accuracy and edge values: docs/PIPELINE.md, "The CPU's exp and log".
#pragma once

namespace polygrad {

inline constexpr const char* kCMathPrelude = R"(/* exp and log of float (core/render/c_math.h) */
static inline float pg_mbits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
#ifdef PG_MATH_EXTERN
float pg_expf_ext(float x);
float pg_logf_ext(float x);
#define pg_expf pg_expf_ext
#define pg_logf pg_logf_ext
#else
static inline float pg_expf(float x) {
  float c = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float k = rintf(c * 1.44269504088896341f);
  float r = fmaf(k, -0.693359375f, c);
  r = fmaf(k, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r);
  p = p + 1.0f;
  int32_t ki = (int32_t)k, k1 = ki >> 1, k2 = ki - k1;
  float out = p * pg_mbits((uint32_t)(k1 + 127) << 23) * pg_mbits((uint32_t)(k2 + 127) << 23);
  return x != x ? x + x : out;
}
static inline float pg_logf(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  int sub = u < 0x00800000u;
  float xs = sub ? x * 33554432.0f : x;
  uint32_t v; memcpy(&v, &xs, 4);
  int32_t e = (int32_t)(v >> 23) - 127 - (sub ? 25 : 0);
  float m = pg_mbits((v & 0x007fffffu) | 0x3f800000u);
  int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  float ef = (float)(e + big);
  float f = m - 1.0f;
  float z = f * f;
  float p = 7.0376836292e-2f;
  p = fmaf(p, f, -1.1514610310e-1f);
  p = fmaf(p, f, 1.1676998740e-1f);
  p = fmaf(p, f, -1.2420140846e-1f);
  p = fmaf(p, f, 1.4249322787e-1f);
  p = fmaf(p, f, -1.6668057665e-1f);
  p = fmaf(p, f, 2.0000714765e-1f);
  p = fmaf(p, f, -2.4999993993e-1f);
  p = fmaf(p, f, 3.3333331174e-1f);
  float y = f * z * p;
  y = fmaf(ef, -2.12194440e-4f, y);
  y = fmaf(-0.5f, z, y);
  float out = f + y;
  out = fmaf(ef, 0.693359375f, out);
  return x != x ? x + x
       : x < 0.0f ? pg_mbits(0x7fc00000u)
       : x == 0.0f ? pg_mbits(0xff800000u)
       : u == 0x7f800000u ? x : out;
}
#endif
)";

// After the CPU prelude, makes a source the optimized compiler builds into the functions quick
// builds call (with the kernel entry point the loader looks for, which does nothing).
inline constexpr const char* kCMathLibrarySuffix = R"(float pg_expf_ext(float x) { return pg_expf(x); }
float pg_logf_ext(float x) { return pg_logf(x); }
void pg_kernel(void** bufs, int64_t start, int64_t end) { (void)bufs; (void)start; (void)end; }
)";

}  // namespace polygrad
