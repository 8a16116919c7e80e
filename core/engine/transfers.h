// Moving tensor contents between host memory and devices. Every function returns when the
// bytes have arrived: the source may be released or rewritten right after. Only core/engine
// includes this; the server reaches it through Engine (write, copy, to_host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "core/engine/device_streams.h"
#include "core/runtime/buffer.h"

namespace polygrad {

// A host buffer with `buffer`'s contents: `buffer` itself when it is in host memory, else a copy
// downloaded from its device.
absl::StatusOr<BufferPtr> host_copy(const BufferPtr& buffer, DeviceStreams& streams);

// `src`'s contents in a new buffer on device `to` (placement.h codes).
absl::StatusOr<BufferPtr> transfer(const BufferPtr& src, int64_t to, DeviceStreams& streams);

// Writes `bytes` bytes of host memory at `from` over all of `dst` (INTERNAL when the sizes differ).
absl::Status write_bytes(Buffer& dst, const void* from, size_t bytes, DeviceStreams& streams);

// Copies `src` over `dst`: same size, any two devices.
absl::Status copy_contents(Buffer& dst, const Buffer& src, DeviceStreams& streams);

}  // namespace polygrad
