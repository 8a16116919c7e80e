// NVRTC, the CUDA runtime compiler, loaded with dlopen when first needed (never linked), so the
// daemon starts where no CUDA toolkit is installed. Compiles CUDA C (render/cuda_renderer.h) to
// PTX or to a CUBIN for one GPU architecture; needs no GPU.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace polygrad {

class Nvrtc {
 public:
  // The process's NVRTC: libnvrtc.so.13, .so.12, .so by the loader's search, then the same names
  // under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Loaded once, never unloaded; thread-safe.
  // FAILED_PRECONDITION naming what was tried when none loads.
  static absl::StatusOr<const Nvrtc*> get();

  std::string version() const;  // "13.0"
  const std::string& library() const { return library_; }  // the path or name that loaded

  enum class Output { Ptx, Cubin };
  struct Compiled {
    std::string code;  // PTX text or CUBIN bytes
    std::string log;   // the compiler's log; empty when it had nothing to say
  };

  // The fixed option list for compute capability `arch` (80 for sm_80): PTX for the virtual
  // architecture compute_<arch>, or a CUBIN for sm_<arch>. These, with version(), are what
  // changes the output besides the source (a kernel cache key needs them).
  static std::vector<std::string> options(int arch, Output output);

  // Compiles `source`; INTERNAL with the compiler's log when it fails (the source is ours, so a
  // failure is a renderer bug, never a client's).
  absl::StatusOr<Compiled> compile(const std::string& source, int arch, Output output) const;

  struct Api;  // the entry points, resolved with dlsym

 private:
  Nvrtc() = default;
  static absl::StatusOr<const Nvrtc*> load();
  const Api* api_ = nullptr;
  int major_ = 0;
  int minor_ = 0;
  std::string library_;
};

}  // namespace polygrad
