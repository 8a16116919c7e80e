#include "core/engine/run_program.h"

#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/schedule/buffer_arena.h"

namespace polygrad {

absl::StatusOr<RealizeResult> run_program(Backend& backend, const RealizeProgram& program,
                                          std::vector<BufferPtr> leaf_buffers, const RealizeOptions& options) {
  if (leaf_buffers.size() != program.leaves) {
    return absl::InternalError(absl::StrCat("program of ", program.leaves, " leaves run with ", leaf_buffers.size()));
  }
  std::vector<BufferPtr> slots = std::move(leaf_buffers);
  slots.resize(program.leaves + program.launches.size());
  RealizeResult result;
  const std::unordered_set<uint32_t> kept(program.outputs.begin(), program.outputs.end());
  // Intermediates on a backend that runs its work in order: a block its kernels finished with is
  // reused by its later kernels. The arena holds every block until the function returns: the
  // allocator is shared with other sessions' queues, which must not get a block this queue's
  // kernels still read.
  // Only kernels write into the arena's blocks, and a kernel writes all of its output: no zeroing.
  BufferArena arena(
      [&](DType dtype, const Shape& shape) { return backend.allocate(dtype, shape, Buffer::Fill::None); });
  const bool reuse = backend.reuses_intermediates();
  // Destroyed first: on any return, queued work has finished before a block goes back.
  struct SyncOnExit {
    Backend& backend;
    ~SyncOnExit() { (void)backend.synchronize(); }
  } sync_on_exit{backend};
  std::vector<void*> ptrs;
  for (const RealizeProgram::Launch& launch : program.launches) {
    if (options.should_stop && options.should_stop()) return absl::CancelledError("realize cancelled between kernels");
    const uint32_t out = launch.args[0];
    const bool own = !reuse || kept.count(out) || !launch.kernel.program;
    // A kernel's output is all written by it; a launch without a program leaves zeros.
    const Buffer::Fill fill = launch.kernel.program ? Buffer::Fill::None : Buffer::Fill::Zero;
    absl::StatusOr<BufferPtr> buf =
        own ? backend.allocate(launch.dtype, launch.shape, fill) : arena.take(launch.dtype, launch.shape);
    if (!buf.ok()) return buf.status();
    slots[out] = *std::move(buf);
    if (launch.kernel.program) {
      ptrs.clear();
      for (uint32_t s : launch.args) {
        const BufferPtr& b = slots[s];
        if (b->device() != backend.name())  // placement keeps this from happening; never launch on it
          return absl::InternalError(absl::StrCat("a ", backend.name(), " kernel was given a ", b->device(), " buffer"));
        ptrs.push_back(b->data());
      }
      if (absl::Status s = backend.launch(launch.kernel, ptrs.data(), ptrs.size()); !s.ok()) return s;
      ++result.stats.kernels;
    }
    for (uint32_t s : launch.release) {
      if (reuse && s != out) arena.give_back(slots[s]);
      slots[s].reset();
    }
  }
  if (absl::Status s = backend.synchronize(); !s.ok()) return s;
  for (uint32_t s : program.outputs) result.outputs.push_back(slots[s]);
  return result;
}

}  // namespace polygrad
