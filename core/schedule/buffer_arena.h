// Intermediate buffers shared between values whose lifetimes do not overlap, on one device.
// Kernels see only pointers, so a buffer goes to any later value that fits in it; the buffer
// keeps the dtype and shape it was made with. Used by compiled steps (one arena for the step's
// life) and by a CUDA realize (where work queued on one stream may reuse a block the stream's
// earlier kernels finished with: the stream runs them in order). Not a public header.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/buffer.h"

namespace polygrad {

class BufferArena {
 public:
  using Allocate = std::function<absl::StatusOr<BufferPtr>(DType, const Shape&)>;
  explicit BufferArena(Allocate allocate) : allocate_(std::move(allocate)) {}

  // The smallest free buffer of at least the value's size, else a new one.
  absl::StatusOr<BufferPtr> take(DType dtype, const Shape& shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const size_t need = static_cast<size_t>(numel) * dtype_itemsize(dtype);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if ((*it)->nbytes() >= need && (best == free_.end() || (*it)->nbytes() < (*best)->nbytes())) best = it;
    if (best != free_.end()) {
      BufferPtr b = *best;
      free_.erase(best);
      return b;
    }
    absl::StatusOr<BufferPtr> b = allocate_(dtype, shape);
    if (b.ok()) all_.push_back(*b);
    return b;
  }
  // `b` (from take) is free for the next take.
  void give_back(BufferPtr b) { free_.push_back(std::move(b)); }
  // Every buffer the arena made.
  const std::vector<BufferPtr>& all() const { return all_; }

 private:
  Allocate allocate_;
  std::vector<BufferPtr> all_;
  std::vector<BufferPtr> free_;
};

}  // namespace polygrad
