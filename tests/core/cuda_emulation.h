// Running the CUDA renderer's kernels on the host, to check what they compute without a GPU.
//
// Each kernel is lowered twice, as the engine does for each device: lower_to_linear for the CPU
// path (the reference, rendered as C) and lower_for_cuda for a GPU (rendered as CUDA C). The CUDA
// source is compiled as C++ by the system compiler, behind a shim that supplies what NVRTC would
// (__global__, threadIdx and kin, the bit-reinterpreting intrinsics, warp shuffles, __syncthreads,
// __shared__) and in front of a driver that launches a grid: a kernel whose threads are
// independent runs them one after another, a cooperative one (shuffles, barriers) runs each
// block's threads as fibers that meet at every barrier, which is exact for the semantics CUDA
// promises (cuda_emulation.cpp says how). The C math calls the renderer emits (expf, logf, ...)
// resolve to the host's libm, the same the CPU path uses.
//
// Two exceptions: the prelude's 16-bit float conversions pg_h2f, pg_f2h and pg_f2bf, and its
// integer negation pg_ineg, are inline PTX, which no host compiler accepts. Those lines are
// replaced, by exact match, with the C renderer's portable conversions (the same semantics:
// round-to-nearest-even) and a C negation; any other change to the prelude is an error, so the
// emulation cannot silently drift from what NVRTC compiles. The PTX itself is therefore not
// covered here — only a GPU run (tests/gpu) checks it.
//
// The reference is compiled by the system C compiler with the CPU path's semantics and loaded by
// CpuCompiler::load. Both sides are compiled unoptimised with the scalar libm (common_flags in
// the .cpp says why), so identical arithmetic gives identical bits. Many kernels share one
// compiler run (a dispatcher per translation unit picks the kernel), which is what keeps
// hundreds of kernels within seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/ir/uop.h"
#include "core/runtime/cuda/device.h"
#include "core/runtime/program.h"

namespace polygrad::cuda_emulation {

// One kernel of a graph, as the engine would produce it, with the size of every buffer it uses.
struct KernelCase {
  LinearKernel linear;             // lower_to_linear: the CPU path's kernel
  LinearKernel cuda_linear;        // lower_for_cuda: the GPU's
  // The lowered CPU kernel's parameters (0 is the output): elements and dtypes. Symbolic
  // rewriting can drop a load, so the linear kernels may declare fewer.
  std::vector<int64_t> numel;
  std::vector<DType> dtypes;
  std::vector<size_t> cuda_args;   // the CUDA kernel's DEFINE_GLOBAL i is the CPU kernel's cuda_args[i]
  int threads_per_iteration = 1;   // cuda_threads_per_iteration(cuda_linear): 32 for a warp per output
  bool staged = false;             // cuda_stages_operands(cuda_linear): blocks of kBlockLanes threads share tiles' operands
  // The CUDA kernel adds or multiplies floating-point values in another order than the CPU's (a
  // warp's lanes each take part of a reduction, or the CPU kernel splits one into upcast lanes):
  // its float output is compared within a tolerance.
  bool reassociates = false;
  std::string c_source;            // render_c
  std::string cuda_source;         // render_cuda
};

// The graph's kernels (schedule, then the per-kernel passes, exactly as kernels_for), lowered and
// rendered for both targets. Every BUFFER leaf counts as bound.
absl::StatusOr<std::vector<KernelCase>> kernel_cases(const std::vector<UOpRef>& outputs);

// The rendered CUDA prelude (everything before the entry point) with its PTX conversions
// replaced by host ones. FAILED_PRECONDITION when the prelude is not the one this emulation
// knows (a replaced line is missing, or inline assembly is left).
absl::StatusOr<std::string> host_cuda_prelude(const std::string& cuda_source);

// A set of kernels compiled into a few shared objects, launched by their position in the set.
class KernelSet {
 public:
  // CUDA sources from render_cuda, compiled as host C++ (clang++, else g++), in `units`
  // translation units compiled in parallel.
  static absl::StatusOr<KernelSet> emulated_cuda(const std::vector<std::string>& sources, size_t units);
  // C sources from render_c, compiled as C (clang, else gcc), likewise.
  static absl::StatusOr<KernelSet> cpu(const std::vector<std::string>& sources, size_t units);
  // Likewise, each unit's C source compiled to shared-object bytes by `compile`.
  static absl::StatusOr<KernelSet> cpu(const std::vector<std::string>& sources, size_t units,
                                       const std::function<absl::StatusOr<std::string>(const std::string&)>& compile);

  // CPU kernels: runs the outer loop [0, n) at once. Emulated CUDA kernels: launches `grid`
  // blocks of `block` threads with trip count `n`; a cooperative kernel's threads run round robin,
  // or with `eager` each warp as far ahead as its barriers allow. OK, or what kept the emulation
  // from running the launch (a shuffle not every lane reaches, a barrier nobody passes) as INTERNAL.
  absl::Status launch(size_t kernel, const std::vector<void*>& bufs, int64_t n, unsigned grid = 0,
                      unsigned block = 0, bool eager = false) const;

  size_t size() const { return slots_.size(); }

 private:
  // `kernels` kernels compiled into `programs`, split among them as build_units splits them.
  KernelSet(std::vector<ProgramPtr> programs, size_t kernels);
  struct Slot {
    size_t program;
    int64_t local;
  };
  std::vector<ProgramPtr> programs_;
  std::vector<Slot> slots_;
};

// The launch shapes a kernel with trip count `n` is emulated with: what CudaProgram::run launches
// on a GPU with 132 multiprocessors (an H100), and a small grid — 2 blocks of 3 threads; for a
// kernel with a warp per iteration 2 blocks of 2 warps; for a block per iteration, or one that
// stages operands in shared memory (`whole_blocks`), 2 blocks — so the outer loop of every kernel
// with more than a few iterations takes the grid-stride path. The kernels promise to be correct
// under any launch shape (whole warps for a warp kernel, blocks of kBlockLanes for a block kernel
// or a staging one).
std::vector<LaunchDims> launch_shapes(int64_t n, int threads_per_iteration = 1, bool whole_blocks = false);

// Runs every case on the CPU path and emulated (a cooperative kernel under both schedules), on
// the same deterministic random inputs, and
// compares the outputs bit for bit (the outputs start filled with different bytes, so an element
// one side leaves unwritten differs too) — except the float outputs of a case that reassociates,
// which must agree in NaN-ness and infinities and otherwise within |got - want| <= tol * (1 +
// |want|), tol a few hundred ulps of the output type at 1. Returns one message per mismatch (the
// kernel, the first differing element and both values, the launch shape) or failed launch;
// empty when all agree.
// Deterministic random contents for a buffer of `dt`: full-range bits for integers, 0/1 for
// bool, and for floats mostly ordinary values of both signs (within a few binades of 1, so
// exp, log and sums stay meaningful) with zeros, infinities, NaNs and subnormals mixed in.
std::vector<uint8_t> random_bytes(DType dt, int64_t numel, uint64_t seed);
// One element of `dt` at `p`, for messages (floats in hex with their bits).
std::string format_element(DType dt, const uint8_t* p);

std::vector<std::string> compare(const std::vector<KernelCase>& cases, const KernelSet& cpu,
                                 const KernelSet& emulated);

}  // namespace polygrad::cuda_emulation
