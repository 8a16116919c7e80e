// A loaded kernel, ready to launch. Devices implement this; the kernel cache holds them.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"

namespace polygrad {

class Program {
 public:
  virtual ~Program() = default;
  // Runs iterations [start, end) of the kernel's outer loop over `bufs` (DEFINE_GLOBAL order).
  // OK, or why the launch failed (the device's error, with its name): callers pass it on, so a
  // failed launch fails the realize or step that made it.
  virtual absl::Status launch(void** bufs, int64_t start, int64_t end) const = 0;
  // The address of the function `name` the program's code defines; null when it has none, or
  // when the program is not native code of this process.
  virtual void* symbol(const char* name) const { return nullptr; }
};

using ProgramPtr = std::shared_ptr<const Program>;

}  // namespace polygrad
