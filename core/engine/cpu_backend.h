// The CPU as a Backend (backend.h): C source built by the system compiler through the kernel
// cache, host memory, kernels run on the calling thread or split across the engine's thread
// pool by their outer loop. Only core/engine (and its tests) include this.
#pragma once

#include <memory>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/render/c_renderer.h"

namespace polygrad {

// Whether the CPU's optimized build of `kernel` may fuse its multiply-adds: only for a kernel
// too large for the quick tier (kQuickTierMaxIterations), which is therefore built by the
// optimized compiler alone and cannot compute different bits on another tier, and only for a
// reduction with register tiles or vector lanes (matmul, convolution, long sums). Everything
// else keeps one rounding per C operator.
CRenderOptions cpu_render_options(const LinearKernel& kernel);

// The engine's CPU backend; `impl` must outlive it.
std::unique_ptr<Backend> make_cpu_backend(Engine::Impl& impl);

}  // namespace polygrad
