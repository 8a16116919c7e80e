// The CPU device's quick compiler tier: TinyCC (libtcc) builds a rendered kernel's C source in
// this process, in a few milliseconds, unoptimised. A kernel's first realize runs its quick build
// while the system compiler (compiler.h) makes the optimized one in the background
// (core/cache/tiered_build.h swaps it in). Both builds compute the same bits for every kernel the
// eligibility rule below admits (tests/core/quick_tier_test.cpp checks the whole corpus).
//
// Built only when CMake found libtcc; without it quick_compiler_available() is false and
// quick_compile() fails with FAILED_PRECONDITION.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/runtime/cpu/quick_math.h"
#include "core/runtime/program.h"

namespace polygrad {

// Whether this build of polygrad has the quick tier (libtcc was found at configure time).
bool quick_compiler_available();

// The quick compiler's name for the daemon's start-up line; empty without it.
std::string quick_compiler_version();

// Compiles C source (render_c) into a loaded program whose entry point is kKernelEntry; the
// program owns its code memory. Calls into libtcc are serialised process-wide (libtcc 0.9.27
// keeps global state): each takes a few milliseconds. INTERNAL with TinyCC's messages when the
// source does not compile or link. With `math`, the source's float exp and log call its functions
// (PG_MATH_EXTERN, core/render/c_math.h), and the program keeps them loaded.
absl::StatusOr<ProgramPtr> quick_compile(const std::string& source, std::shared_ptr<const QuickMath> math = nullptr);

// Whether a kernel (`kernel`, rendered as `source`) may run its quick build before the optimized
// one is ready: true unless the two builds may compute different bits for it, which is when
//
// 1. it converts a float to an integer type. C leaves the conversion of NaN, an infinity or a
//    value outside the integer type's range undefined, and the two compilers pick different x86
//    instructions for it (clang's AVX-512 vcvttss2usi saturates unsigned conversions; TinyCC
//    converts through a signed 64-bit integer), so such values give different integers; or
// 2. it calls a math function that the optimized build vectorises through libmvec (below).
//
// The optimized compiler (clang with -fveclib=libmvec, CpuCompiler::uses_vector_math) turns loops
// over exp, log, sin, cos and pow (double and float) into calls to glibc's libmvec, whose vector
// versions differ from the scalar libm that TinyCC calls by a few ulp. Everything else is the same
// arithmetic on both tiers: one IEEE operation per C statement, no contraction
// (-ffp-contract=off), no reassociation, the same scalar libm for every other call
// (exp2, log2, sqrt, ...; sqrt is correctly rounded either way). So a kernel calling any of those
// ten functions waits for the optimized build when it uses libmvec. Float exp and log render as the
// kernel's own pg_expf and pg_logf (core/render/c_math.h), which are neither: those kernels take
// the quick tier. With `optimized_uses_vector_math` false (gcc, or clang without libmvec), rule 2
// does not apply.
//
// Beyond these, one difference remains, which is not a kernel's but IEEE 754's: when a result is
// NaN, which NaN (its sign and payload bits) is not fixed — x86 returns one operand's NaN, or the
// default NaN (sign bit set) for an invalid operation, and a compiler may swap the operands of +,
// * or a comparison-select. NaN stays NaN, and every other value is bit for bit the same
// (tests/core/quick_tier_test.cpp checks the whole corpus).
bool quick_tier_eligible(const LinearKernel& kernel, std::string_view source, bool optimized_uses_vector_math);

// The most loop iterations (loop_iterations) of a kernel worth a quick build: beyond it TinyCC's
// code would run longer than clang takes to build the kernel, and the quick build would slow the
// optimized compile it waits for. Measurements: docs/PIPELINE.md, "The quick tier's size limit".
inline constexpr int64_t kQuickTierMaxIterations = int64_t{1} << 25;

}  // namespace polygrad
