// The CPU as a Backend (backend.h): C source built by the system compiler through the kernel
// cache, host memory, kernels run on the calling thread or split across the engine's thread
// pool by their outer loop. Only core/engine includes this.
#pragma once

#include <memory>

#include "core/engine/backend.h"
#include "core/engine/engine.h"

namespace polygrad {

// The engine's CPU backend; `impl` must outlive it.
std::unique_ptr<Backend> make_cpu_backend(Engine::Impl& impl);

}  // namespace polygrad
