#include "core/engine/transfers.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/placement.h"
#include "core/runtime/cuda/device.h"

namespace polygrad {
namespace {

uint64_t address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

absl::StatusOr<CudaStream*> stream_of(const Buffer& b, DeviceStreams& streams) {
  auto code = buffer_device_code(b);
  if (!code.ok()) return code.status();
  return streams.on(*code);
}

absl::StatusOr<BufferPtr> new_host(const Buffer& like) {
  BufferPtr b = Buffer::allocate_host(like.dtype(), like.shape(), Buffer::Fill::None);
  if (!b) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", like.nbytes(), " bytes of host memory"));
  return b;
}

}  // namespace

absl::StatusOr<BufferPtr> host_copy(const BufferPtr& buffer, DeviceStreams& streams) {
  if (buffer->on_host()) return buffer;
  auto stream = stream_of(*buffer, streams);
  if (!stream.ok()) return stream.status();
  auto host = new_host(*buffer);
  if (!host.ok()) return host.status();
  if (absl::Status s = (*stream)->device().download(address(buffer->data()), (*host)->data(), buffer->nbytes(), **stream);
      !s.ok())
    return s;
  return host;
}

absl::StatusOr<BufferPtr> transfer(const BufferPtr& src, int64_t to, DeviceStreams& streams) {
  if (to == kCpuDevice) {
    if (!src->on_host()) return host_copy(src, streams);
    auto b = new_host(*src);
    if (!b.ok()) return b.status();
    std::memcpy((*b)->data(), src->data(), src->nbytes());
    return b;
  }
  auto stream = streams.on(to);
  if (!stream.ok()) return stream.status();
  auto dst = (*stream)->device().allocate(src->dtype(), src->shape(), **stream);
  if (!dst.ok()) return dst.status();
  if (absl::Status s = copy_contents(**dst, *src, streams); !s.ok()) return s;
  return dst;
}

absl::Status write_bytes(Buffer& dst, const void* from, size_t bytes, DeviceStreams& streams) {
  if (bytes != dst.nbytes())
    return absl::InternalError(absl::StrCat("writing ", bytes, " bytes into a buffer of ", dst.nbytes()));
  if (dst.on_host()) {
    if (bytes > 0) std::memcpy(dst.data(), from, bytes);
    return absl::OkStatus();
  }
  auto stream = stream_of(dst, streams);
  if (!stream.ok()) return stream.status();
  return (*stream)->device().upload(from, address(dst.data()), bytes, **stream);
}

absl::Status copy_contents(Buffer& dst, const Buffer& src, DeviceStreams& streams) {
  if (dst.nbytes() != src.nbytes())
    return absl::InternalError(absl::StrCat("copying ", src.nbytes(), " bytes into a buffer of ", dst.nbytes()));
  if (src.on_host()) return write_bytes(dst, src.data(), src.nbytes(), streams);
  if (dst.on_host()) {
    auto stream = stream_of(src, streams);
    if (!stream.ok()) return stream.status();
    return (*stream)->device().download(address(src.data()), dst.data(), src.nbytes(), **stream);
  }
  if (dst.device() != src.device()) {  // between GPUs: through the host
    auto host = new_host(src);
    if (!host.ok()) return host.status();
    if (absl::Status s = copy_contents(**host, src, streams); !s.ok()) return s;
    return write_bytes(dst, (*host)->data(), (*host)->nbytes(), streams);
  }
  auto stream = stream_of(dst, streams);
  if (!stream.ok()) return stream.status();
  if (absl::Status s = (*stream)->device().copy(address(src.data()), address(dst.data()), src.nbytes(), **stream); !s.ok())
    return s;
  // Done before `src` can go back to the allocator, where another stream may take it.
  return (*stream)->synchronize();
}

}  // namespace polygrad
