// One GPU's stream as a Backend (backend.h): CUDA C compiled by NVRTC to CUBINs through the
// kernel cache, the device's caching allocator, work queued on the stream in order (so a
// realize's intermediates reuse blocks in stream order), kernel times from events read once the
// stream has finished. Only core/engine includes this.
#pragma once

#include <memory>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/runtime/cuda/device.h"

namespace polygrad {

// How kernels are shaped for a CUDA GPU (kernels_for.h lowers with these for renderer tests).
inline constexpr CodegenCaps kCudaCaps{
    .flat_output = true, .gpu_tiles = true, .declare_all_params = true, .fuse_row_reductions = false};

// A backend queuing on `stream` (a session's, or one of a realize's own); `impl` and `stream`
// must outlive it.
std::unique_ptr<Backend> make_cuda_backend(Engine::Impl& impl, CudaStream& stream);

}  // namespace polygrad
