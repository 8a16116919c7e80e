#include "core/runtime/cuda/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/cuda/dl.h"

namespace polygrad {
namespace {

// The few NVRTC declarations used, as in nvrtc.h (so no toolkit is needed to build).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult NVRTC_SUCCESS = 0;

}  // namespace

struct Nvrtc::Api {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
};

absl::StatusOr<const Nvrtc*> Nvrtc::load() {
  const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::vector<std::string> candidates(std::begin(names), std::end(names));
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0')
    dirs.push_back(absl::StrCat(home, "/lib64"));
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& d : dirs)
    for (const char* n : names) candidates.push_back(absl::StrCat(d, "/", n));
  void* lib = nullptr;
  std::string library, first_error;
  for (const std::string& c : candidates) {
    if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      library = c;
      break;
    }
    if (first_error.empty()) first_error = dlerror();
  }
  if (lib == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("NVRTC not found (tried ", absl::StrJoin(candidates, ", "), "): ", first_error));
  auto api = std::make_unique<Api>();
  bool ok = resolve_symbol(lib, "nvrtcVersion", api->nvrtcVersion) &&
            resolve_symbol(lib, "nvrtcGetErrorString", api->nvrtcGetErrorString) &&
            resolve_symbol(lib, "nvrtcCreateProgram", api->nvrtcCreateProgram) &&
            resolve_symbol(lib, "nvrtcDestroyProgram", api->nvrtcDestroyProgram) &&
            resolve_symbol(lib, "nvrtcCompileProgram", api->nvrtcCompileProgram) &&
            resolve_symbol(lib, "nvrtcGetProgramLogSize", api->nvrtcGetProgramLogSize) &&
            resolve_symbol(lib, "nvrtcGetProgramLog", api->nvrtcGetProgramLog) &&
            resolve_symbol(lib, "nvrtcGetPTXSize", api->nvrtcGetPTXSize) &&
            resolve_symbol(lib, "nvrtcGetPTX", api->nvrtcGetPTX) &&
            resolve_symbol(lib, "nvrtcGetCUBINSize", api->nvrtcGetCUBINSize) &&
            resolve_symbol(lib, "nvrtcGetCUBIN", api->nvrtcGetCUBIN);
  auto n = std::unique_ptr<Nvrtc>(new Nvrtc());
  if (ok) ok = api->nvrtcVersion(&n->major_, &n->minor_) == NVRTC_SUCCESS;
  if (!ok) {
    dlclose(lib);
    return absl::FailedPreconditionError(
        absl::StrCat(library, " is not a usable NVRTC (missing entry point or version)"));
  }
  n->api_ = api.release();
  n->library_ = std::move(library);
  return n.release();
}

absl::StatusOr<const Nvrtc*> Nvrtc::get() {
  // Loaded once for the process and never unloaded: compiles may run on any thread at any time.
  static const absl::StatusOr<const Nvrtc*> loaded = load();
  return loaded;
}

std::string Nvrtc::version() const { return absl::StrCat(major_, ".", minor_); }

std::vector<std::string> Nvrtc::options(int arch, Output output) {
  return {absl::StrCat("--gpu-architecture=", output == Output::Ptx ? "compute_" : "sm_", arch), "--std=c++17"};
}

absl::StatusOr<Nvrtc::Compiled> Nvrtc::compile(const std::string& source, int arch, Output output) const {
  const Api& f = *api_;
  auto fail = [&](const char* what, nvrtcResult r) {
    return absl::InternalError(absl::StrCat(what, " failed: ", f.nvrtcGetErrorString(r)));
  };
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = f.nvrtcCreateProgram(&prog, source.c_str(), "pg_kernel.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return fail("nvrtcCreateProgram", r);
  struct Destroy {
    const Api& f;
    nvrtcProgram p;
    ~Destroy() { f.nvrtcDestroyProgram(&p); }
  } destroy{f, prog};

  std::vector<std::string> opts = options(arch, output);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult compiled = f.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  Compiled out;
  size_t log_size = 0;
  if (f.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    if (f.nvrtcGetProgramLog(prog, out.log.data()) != NVRTC_SUCCESS) out.log.clear();
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  }
  if (compiled != NVRTC_SUCCESS)
    return absl::InternalError(absl::StrCat("NVRTC ", version(), " could not compile a generated kernel for ",
                                            absl::StrJoin(opts, " "), ": ", f.nvrtcGetErrorString(compiled), "\n",
                                            out.log));
  size_t size = 0;
  bool ptx = output == Output::Ptx;
  if (nvrtcResult r = ptx ? f.nvrtcGetPTXSize(prog, &size) : f.nvrtcGetCUBINSize(prog, &size); r != NVRTC_SUCCESS)
    return fail(ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize", r);
  out.code.resize(size);
  if (nvrtcResult r = ptx ? f.nvrtcGetPTX(prog, out.code.data()) : f.nvrtcGetCUBIN(prog, out.code.data());
      r != NVRTC_SUCCESS)
    return fail(ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", r);
  if (ptx && !out.code.empty() && out.code.back() == '\0') out.code.pop_back();  // the size counts the NUL
  return out;
}

}  // namespace polygrad
