// CUBIN entries in the shared kernel cache: a rendered CUDA kernel compiled by NVRTC for one GPU
// architecture, keyed so that a different architecture, NVRTC version or option list never
// finds another's binary.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/cache/kernel_cache.h"
#include "core/runtime/cuda/nvrtc.h"

namespace polygrad {

// The kernel-cache key of `source` compiled to a CUBIN for sm_<arch> by NVRTC `nvrtc_version`
// ("13.0") with Nvrtc::options(arch, Cubin).
std::string cubin_cache_key(std::string_view source, int arch, std::string_view nvrtc_version);

// OK when `bytes` look like a whole CUBIN: a 64-bit little-endian ELF for EM_CUDA whose section
// and program header tables lie inside it. DATA_LOSS saying what is wrong otherwise. The disk
// tier already verifies a checksum; this catches what was written short or is not a CUBIN at all
// before a driver is handed it.
absl::Status check_cubin(std::string_view bytes);

// The kernel for `source` on sm_<arch>: from the cache's memory or disk tier, or compiled by
// `nvrtc` (deduplicated per key) and stored. `load` turns CUBIN bytes into a program (on a GPU:
// cuModuleLoadData in the device's context); bytes failing check_cubin are never passed to it.
// `on_compile(seconds, ok)` is called around each compile when set.
absl::StatusOr<KernelCache::Found> cubin_from_cache(KernelCache& cache, const Nvrtc& nvrtc, const std::string& source,
                                                    int arch, const KernelCache::Load& load,
                                                    const std::function<void(double, bool)>& on_compile = {});

}  // namespace polygrad
