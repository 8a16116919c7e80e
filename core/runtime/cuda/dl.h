// Resolving entry points of a library loaded with dlopen (the CUDA driver, NVRTC).
#pragma once

#include <dlfcn.h>

namespace polygrad {

// Sets `fn` to the symbol `name` of `lib`; false when the library lacks it.
template <typename Fn>
bool resolve_symbol(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

}  // namespace polygrad
