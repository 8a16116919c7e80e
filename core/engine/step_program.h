// Compiled steps: a graph scheduled, compiled and given its buffers once, then run many times. A
// training step (forward, backward, optimizer update) becomes one compiled step whose run()
// only launches kernels: no scheduling, no hashing, no cache lookups, no allocation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"

namespace polygrad {

class Backend;
class DeviceStreams;

// An assign whose value is the target with one box of it replaced (a write through a shrink view:
// tinygrad's cache[:, :, p:p+1].assign(new)): only `part` is computed and copied into the box, so
// a run writes what changed rather than the whole target. The box starts at `begin` and spans
// `count` along each axis; along `dynamic_axis` (-1: none) its begin is read from the 0-d int32
// BUFFER `dynamic_begin` when the run copies (RunStep may set it), and what would fall past the
// axis is not written.
struct StepRegion {
  UOpRef part;  // the box's new values: the target's dtype, shape `count`
  std::vector<int64_t> begin, count;
  int64_t dynamic_axis = -1;
  UOpRef dynamic_begin;
};

// After each run, `target` holds the value `value` had during that run (an in-place update of a
// parameter or optimizer state). The value must have the target's dtype and shape. With a
// `region`, `value` is the target with that box replaced, and only the box is written.
struct StepAssign {
  BufferPtr target;
  UOpRef value;
  std::shared_ptr<const StepRegion> region;
};

struct StepSpec {
  std::vector<UOpRef> outputs;      // results of each run, read from StepProgram::outputs()
  Bindings bound;                   // every BUFFER leaf reachable from outputs and assign values
  std::vector<StepAssign> assigns;  // distinct targets
  // Values computed into a buffer of their own (a kernel boundary) though nothing returns them,
  // as a one-shot realize of them would (e.g. gradients, which then get matmul-shaped kernels
  // instead of being recomputed inside each consumer). Their buffers are intermediates.
  std::vector<UOpRef> materialize;
};

struct StepStats {
  uint32_t kernels = 0;             // kernels launched per run
  uint32_t intermediates = 0;       // buffers for values only kernels read (after memory sharing)
  uint64_t intermediate_bytes = 0;  // their total size
  uint32_t compiled = 0;            // kernels compiled by compile_step (kernel-cache misses)
  uint32_t cache_hits = 0;
  uint32_t box_assigns = 0;         // assigns that write only their region's box
};

class StepProgram {
 public:
  ~StepProgram();
  StepProgram(const StepProgram&) = delete;
  StepProgram& operator=(const StepProgram&) = delete;

  // Launches every kernel in order, then writes each assign's value into its target. Every
  // kernel reads the targets' values from before the run: updates are written to temporaries and
  // copied at the end. `should_stop` is polled between kernels; stopping returns CANCELLED with
  // no target changed. Concurrent calls are serialized. A step on a GPU queues everything on
  // its stream (the compiling session's) and returns when the GPU has finished.
  absl::Status run(const std::function<bool()>& should_stop = {});

  // One buffer per StepSpec output, the same buffers on every run (overwritten by each run). An
  // output that is a bound buffer is that buffer (and shows the assigns of the run).
  const std::vector<BufferPtr>& outputs() const { return outputs_; }
  // Every buffer the step keeps alive (bound inputs and targets included), for accounting.
  const std::vector<BufferPtr>& buffers() const { return held_; }
  const StepStats& stats() const { return stats_; }
  // Where the kernels run ("CPU", "CUDA:0"); every buffer above lives there.
  const std::string& device() const { return device_; }

 private:
  friend class Engine;
  struct Launch;  // a kernel and its argument pointers
  struct Copy {
    const void* from;
    void* to;
    size_t bytes;
    // An assigned value with a symbolic dim (core/ir/symbolic_dims.h) is valid only below its
    // extent, so only that part is copied: `outer` blocks (the axes before the dim), each the
    // first extent() of the dim's `size` steps of `unit` bytes. Null for a whole copy.
    struct Prefix {
      int64_t outer;
      int64_t size;
      size_t unit;
      std::function<int64_t()> extent;  // read when the run copies: RunStep may have set it
    };
    std::shared_ptr<const Prefix> prefix;
    // A StepRegion's box: `from` holds its values densely, `to` is the whole target of `shape`.
    struct Box {
      std::vector<int64_t> shape, begin, count;
      size_t itemsize;
      int64_t dynamic_axis;
      std::function<int64_t()> dynamic_begin;  // read when the run copies
    };
    std::shared_ptr<const Box> box;
  };
  struct Transfer {  // a COPY node of the step: a bound buffer into the step's, across devices
    const Buffer* from;
    Buffer* to;
  };
  StepProgram() = default;
  // What of assign `i`'s value, which has a symbolic dim, is copied into its target.
  static absl::StatusOr<std::shared_ptr<const Copy::Prefix>> valid_prefix(const UOp& value, const Bindings& bound,
                                                                          size_t i);
  // Assign `i`'s box (its StepRegion) as a copy plan, or INVALID_ARGUMENT for a box that does not fit.
  static absl::StatusOr<std::shared_ptr<const Copy::Box>> region_box(const StepAssign& a, const Bindings& bound, size_t i);
  // Copies a box from its dense values into the target (Copy::box set).
  static absl::Status copy_box(Backend& backend, const Copy& c);

  Engine::Impl* engine_ = nullptr;
  std::string device_ = "CPU";
  std::shared_ptr<DeviceStreams> streams_;  // keeps a GPU backend's stream alive
  std::unique_ptr<Backend> own_backend_;    // a GPU's, on the compiling session's stream
  Backend* backend_ = nullptr;              // where the kernels run: own_backend_ or the engine's CPU
  std::vector<Launch> launches_;
  std::vector<Transfer> transfers_;  // first of all
  std::vector<Copy> snapshots_;  // before the kernels: assigned values that are other targets
  std::vector<Copy> copies_;     // after the kernels: values into their targets
  std::vector<BufferPtr> outputs_;
  std::vector<BufferPtr> held_;  // every buffer the pointers above point into
  StepStats stats_;
  std::mutex run_mu_;
};

}  // namespace polygrad
