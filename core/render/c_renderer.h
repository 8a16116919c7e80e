// Renders a linearized kernel as C source for the CPU device's compiler. The entry point is
//   void pg_kernel(void** bufs, int64_t start, int64_t end)
// where bufs[i] is DEFINE_GLOBAL i and [start, end) is the slice of the outer loop to run, so a
// runtime can split the outer loop across threads. Every name in the source is the renderer's
// own: nothing a client sent appears in it. The op table is the C-family base's (cstyle.h); this
// target adds only its prelude and signature.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"

namespace polygrad {

inline constexpr const char* kKernelEntry = "pg_kernel";

struct CRenderOptions {
  // Lets clang fuse each a*b+c of the kernel into one fused multiply-add (one rounding instead
  // of two; #pragma clang fp contract). Off, the arithmetic is one IEEE operation per C
  // operator, which the quick tier (TinyCC) reproduces bit for bit; so only a kernel the quick
  // tier never builds may set it (CpuBackend: large reductions, docs/ARCHITECTURE.md).
  bool fused_multiply_add = false;
};

absl::StatusOr<std::string> render_c(const LinearKernel& kernel, const CRenderOptions& options = {});

// C source of the float exp and log every CPU kernel carries (core/render/c_math.h), as the
// functions pg_expf_ext and pg_logf_ext that quick builds call, with a pg_kernel that does
// nothing: what the optimized compiler builds for the quick tier (core/runtime/cpu/quick_math.h).
std::string c_math_library_source();

}  // namespace polygrad
