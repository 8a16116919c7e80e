// The CPU device's compiler: the system C compiler (clang preferred, gcc, then cc), run as a
// separate process with a deadline, producing a shared object held in memory.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/program.h"

namespace polygrad {

class CpuCompiler {
 public:
  // `preferred` empty: search clang, gcc, cc on PATH. FAILED_PRECONDITION when none works.
  static absl::StatusOr<CpuCompiler> find(const std::string& preferred, std::chrono::seconds timeout);

  // Everything that changes the generated binary besides the source: the compiler's identity
  // and version, its flags, the linker, and the host CPU (code is built for it with -march=native).
  const std::string& identity() const { return identity_; }
  const std::string& version_line() const { return version_; }
  // Whether compiled loops over exp, log, sin, cos and pow call glibc's vector math library
  // (clang's -fveclib=libmvec), whose results differ from scalar libm's by a few ulp.
  bool uses_vector_math() const { return vector_math_; }
  // Whether kernels are built for 512-bit vectors (an AVX-512 host: 32 registers of 16 floats),
  // so the code generator may give them larger register tiles (codegen/upcast.h: kWideTiles).
  bool wide_vectors() const { return wide_vectors_; }

  // Compiles C source to shared-object bytes. When `abandoned` (polled while the compiler runs)
  // says true, the compiler is killed and the result is CANCELLED.
  absl::StatusOr<std::string> compile(const std::string& source, const std::function<bool()>& abandoned = {}) const;

  // Loads shared-object bytes as a launchable kernel (through an anonymous memory file, so
  // the cached bytes are exactly what runs).
  static absl::StatusOr<ProgramPtr> load(const std::string& shared_object);

 private:
  static bool runs_exp(const std::string& shared_object);

  std::string path_;
  std::string version_;
  std::string identity_;
  std::vector<std::string> flags_;
  std::vector<std::string> libs_;  // after the source: -lm, and -lmvec when vector math is used
  // The compiler's own linker, run directly on the object file; empty: the compiler links.
  std::string linker_;
  std::string linker_version_;
  std::chrono::seconds timeout_{120};
  bool vector_math_ = false;
  bool wide_vectors_ = false;
};

}  // namespace polygrad
