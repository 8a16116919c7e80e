// The CPU as a Backend (backend.h): C source built by the system compiler through the kernel
// cache, host memory, kernels run on the calling thread or split across the engine's thread
// pool by their outer loop. Only core/engine (and its tests) include this.
#pragma once

#include <memory>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/render/c_renderer.h"

namespace polygrad {

// A reduction with register tiles or vector lanes of at least this many loop iterations fuses
// its multiply-adds and so gets no quick build (below).
inline constexpr int64_t kFusedMultiplyAddMinIterations = int64_t{1} << 22;

// Whether the CPU's optimized build of `kernel` may fuse its multiply-adds: only for a reduction
// with register tiles or vector lanes (matmul, convolution, long sums) of at least
// kFusedMultiplyAddMinIterations. TinyCC ignores the contraction pragma, so such a kernel is
// built by the optimized compiler alone (the render marks it ineligible for the quick tier) and
// cannot compute different bits on another tier. Everything else keeps one rounding per C
// operator.
CRenderOptions cpu_render_options(const LinearKernel& kernel);

// The engine's CPU backend; `impl` must outlive it.
std::unique_ptr<Backend> make_cpu_backend(Engine::Impl& impl);

}  // namespace polygrad
