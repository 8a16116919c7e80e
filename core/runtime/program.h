// A loaded kernel, ready to launch. Devices implement this; the kernel cache holds them.
#pragma once

#include <cstdint>
#include <memory>

namespace polygrad {

class Program {
 public:
  virtual ~Program() = default;
  // Runs iterations [start, end) of the kernel's outer loop over `bufs` (DEFINE_GLOBAL order).
  virtual void launch(void** bufs, int64_t start, int64_t end) const = 0;
};

using ProgramPtr = std::shared_ptr<const Program>;

}  // namespace polygrad
