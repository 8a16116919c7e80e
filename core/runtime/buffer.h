// Device memory for one tensor. Buffers are shared_ptr-owned: a buffer lives while any session
// table, bound graph or running schedule holds it, and is returned to its allocator after.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/uop.h"

namespace polygrad {

class Buffer {
 public:
  // Host memory, 64-byte aligned (runtime/host_allocator.h), zero-filled unless `fill` is
  // Fill::None — only for a caller that overwrites every byte before anyone reads it, since the
  // memory may have held another session's data. Returns null when the allocation fails.
  enum class Fill { Zero, None };
  static std::shared_ptr<Buffer> allocate_host(DType dtype, Shape shape, Fill fill = Fill::Zero);
  // Memory of another device ("CUDA:0") at `data`, which only that device's runtime may
  // dereference; `release(data)` runs when the buffer dies (back to the device's allocator).
  static std::shared_ptr<Buffer> adopt_device(DType dtype, Shape shape, void* data, std::string device,
                                              std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint64_t id() const { return id_; }  // unique in this process, never reused
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  const std::string& device() const { return device_; }  // "CPU", "CUDA:0"
  bool on_host() const { return !release_; }              // data() is host memory

  // Process-wide accounting, for metrics and leak tests.
  static int64_t live_count();
  static int64_t live_bytes();
  static uint64_t created_total();
  static uint64_t released_total();
  // Live buffers and bytes not in host memory (every device but the CPU, together).
  static int64_t live_device_count();
  static int64_t live_device_bytes();
  // Live buffers and bytes per device: "CPU" first, then every other device that has held a
  // buffer in this process (kept at zero after its last buffer goes, so a series never vanishes).
  struct DeviceUsage {
    std::string device;
    int64_t count;
    int64_t bytes;
  };
  static std::vector<DeviceUsage> live_by_device();

 private:
  Buffer(DType dtype, Shape shape, int64_t numel, size_t nbytes, void* data, std::string device);
  uint64_t id_;
  DType dtype_;
  Shape shape_;
  int64_t numel_;
  size_t nbytes_;
  void* data_;
  std::string device_;
  std::function<void(void*)> release_;  // empty for host memory (freed with std::free)
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace polygrad
