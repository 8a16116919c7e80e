#include "core/runtime/cuda/allocator.h"

#include <bit>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

constexpr size_t kGranule = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kLargeStep = size_t{2} << 20;

}  // namespace

CachingAllocator::CachingAllocator(std::string device, Backend backend)
    : device_(std::move(device)), backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kGranule) return kGranule;
  if (bytes <= kSmallLimit) return std::bit_ceil(bytes);
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

absl::StatusOr<uint64_t> CachingAllocator::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  {
    std::lock_guard lock(mu_);
    if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
      uint64_t address = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      in_use_ += cls;
      return address;
    }
  }
  // The backend is called without the lock: a device allocation can take milliseconds.
  absl::StatusOr<uint64_t> address = backend_.allocate(cls);
  if (!address.ok() && address.status().code() == absl::StatusCode::kResourceExhausted) {
    const uint64_t freed = empty_cache();
    address = backend_.allocate(cls);
    if (!address.ok() && address.status().code() == absl::StatusCode::kResourceExhausted) {
      return absl::ResourceExhaustedError(absl::StrCat(device_, ": out of device memory allocating ", bytes,
                                                       " bytes (", bytes_in_use(), " bytes in use by buffers; ", freed,
                                                       " cached bytes released before the retry): ",
                                                       address.status().message()));
    }
  }
  if (!address.ok()) return address.status();
  std::lock_guard lock(mu_);
  in_use_ += cls;
  return *address;
}

void CachingAllocator::release(uint64_t address, size_t bytes) {
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  free_[cls].push_back(address);
  in_use_ -= cls;
  cached_ += cls;
}

uint64_t CachingAllocator::empty_cache() {
  std::map<size_t, std::vector<uint64_t>> blocks;
  uint64_t freed = 0;
  {
    std::lock_guard lock(mu_);
    blocks.swap(free_);
    freed = cached_;
    cached_ = 0;
  }
  for (const auto& [cls, list] : blocks)
    for (uint64_t address : list) backend_.release(address);
  return freed;
}

uint64_t CachingAllocator::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

uint64_t CachingAllocator::bytes_cached() const {
  std::lock_guard lock(mu_);
  return cached_;
}

}  // namespace polygrad
