// Which device each tensor lives on. A BUFFER leaf (or any bound node) lives where its buffer
// is; COPY moves its source to the device in its arg (with frontend::kCopyToSourceDevice: to
// where its second source lives, how gradients return through a COPY); a node without sources (constants, arange,
// random) lives wherever its consumer does; every other node lives on its sources' device, and
// sources on two different devices are refused (the client must copy one of them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/ir/uop.h"

namespace polygrad {

// Device codes as COPY's arg carries them: 0 is the CPU, k + 1 is CUDA:k.
inline constexpr int64_t kCpuDevice = 0;
inline constexpr int64_t kAnyDevice = -1;  // no sources: takes its consumer's device

// "CPU", "CUDA:0".
std::string device_name(int64_t code);
// The code of "cpu", "CPU:0", "cuda", "CUDA:3" (case-insensitive); INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> device_code(std::string_view name);
// The code of a buffer's device (Buffer::device()).
absl::StatusOr<int64_t> buffer_device_code(const Buffer& b);

// Where COPY node `copy` moves its source, given the devices placed so far (its second source's
// for a copy back to a source's device; kAnyDevice when that one has none).
int64_t copy_target(const UOp& copy, const std::unordered_map<const UOp*, int64_t>& placed);

// "ADD float32[2,3]": a node for error messages.
std::string describe_node(const UOp& n);

// True when the graph under `outputs` (stopping at bound nodes) has a COPY or reads a buffer
// not in host memory: only then does a realize need placement; everything else is CPU-only.
bool needs_placement(const std::vector<UOpRef>& outputs, const Bindings& bound);

// The device of every node reachable from `outputs` (stopping at bound nodes), kAnyDevice for
// nodes without a device of their own. INVALID_ARGUMENT naming the node (op, dtype, shape) and
// both devices when a node's sources live on different devices.
absl::StatusOr<std::unordered_map<const UOp*, int64_t>> place(const std::vector<UOpRef>& outputs,
                                                               const Bindings& bound);

}  // namespace polygrad
