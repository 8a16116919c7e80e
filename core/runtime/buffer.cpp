#include "core/runtime/buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "core/runtime/host_allocator.h"

namespace polygrad {
namespace {

std::atomic<uint64_t> g_next_id{1};
std::atomic<int64_t> g_live_count{0};
std::atomic<int64_t> g_live_bytes{0};
std::atomic<uint64_t> g_created{0};
std::atomic<uint64_t> g_released{0};
std::atomic<int64_t> g_device_count{0};
std::atomic<int64_t> g_device_bytes{0};

// Per device (not the CPU): adopt and release only, so a mutex costs nothing next to them.
std::mutex g_per_device_mu;
std::map<std::string, std::pair<int64_t, int64_t>>& per_device() {
  static auto* m = new std::map<std::string, std::pair<int64_t, int64_t>>();  // outlives static buffers
  return *m;
}

void count_device(const std::string& device, int64_t count, int64_t bytes) {
  std::lock_guard lock(g_per_device_mu);
  auto& [c, b] = per_device()[device];
  c += count;
  b += bytes;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::allocate_host(DType dtype, Shape shape, Fill fill) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  size_t nbytes = static_cast<size_t>(numel) * dtype_itemsize(dtype);
  void* data = host_alloc(nbytes);
  if (data == nullptr) return nullptr;
  // The padding up to the alignment is always zeroed: vector loads may read it.
  const size_t padded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
  const size_t from = fill == Fill::Zero ? 0 : nbytes;
  std::memset(static_cast<char*>(data) + from, 0, padded - from);
  return std::shared_ptr<Buffer>(new Buffer(dtype, std::move(shape), numel, nbytes, data, "CPU"));
}

std::shared_ptr<Buffer> Buffer::adopt_device(DType dtype, Shape shape, void* data, std::string device,
                                             std::function<void(void*)> release) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  size_t nbytes = static_cast<size_t>(numel) * dtype_itemsize(dtype);
  auto b = std::shared_ptr<Buffer>(new Buffer(dtype, std::move(shape), numel, nbytes, data, std::move(device)));
  b->release_ = std::move(release);
  g_device_count.fetch_add(1);
  g_device_bytes.fetch_add(static_cast<int64_t>(nbytes));
  count_device(b->device_, 1, static_cast<int64_t>(nbytes));
  return b;
}

Buffer::Buffer(DType dtype, Shape shape, int64_t numel, size_t nbytes, void* data, std::string device)
    : id_(g_next_id.fetch_add(1)), dtype_(dtype), shape_(std::move(shape)), numel_(numel), nbytes_(nbytes),
      data_(data), device_(std::move(device)) {
  g_live_count.fetch_add(1);
  g_live_bytes.fetch_add(static_cast<int64_t>(nbytes_));
  g_created.fetch_add(1);
}

Buffer::~Buffer() {
  if (release_) {
    release_(data_);
    g_device_count.fetch_sub(1);
    g_device_bytes.fetch_sub(static_cast<int64_t>(nbytes_));
    count_device(device_, -1, -static_cast<int64_t>(nbytes_));
  } else {
    host_free(data_, nbytes_);
  }
  g_live_count.fetch_sub(1);
  g_live_bytes.fetch_sub(static_cast<int64_t>(nbytes_));
  g_released.fetch_add(1);
}

int64_t Buffer::live_count() { return g_live_count.load(); }
int64_t Buffer::live_bytes() { return g_live_bytes.load(); }
uint64_t Buffer::created_total() { return g_created.load(); }
uint64_t Buffer::released_total() { return g_released.load(); }
int64_t Buffer::live_device_count() { return g_device_count.load(); }
int64_t Buffer::live_device_bytes() { return g_device_bytes.load(); }

std::vector<Buffer::DeviceUsage> Buffer::live_by_device() {
  std::vector<DeviceUsage> out{{"CPU", live_count() - live_device_count(), live_bytes() - live_device_bytes()}};
  std::lock_guard lock(g_per_device_mu);
  for (const auto& [device, usage] : per_device()) out.push_back({device, usage.first, usage.second});
  return out;
}

}  // namespace polygrad
