#include "core/runtime/cpu/compiler.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "core/render/c_renderer.h"
#include "core/runtime/process.h"

namespace polygrad {
namespace {

using KernelFn = void (*)(void**, int64_t, int64_t);

class CpuProgram final : public Program {
 public:
  CpuProgram(void* handle, KernelFn fn, int fd) : handle_(handle), fn_(fn), fd_(fd) {}
  ~CpuProgram() override {
    dlclose(handle_);
    close(fd_);
  }
  void launch(void** bufs, int64_t start, int64_t end) const override { fn_(bufs, start, end); }

 private:
  void* handle_;
  KernelFn fn_;
  // dlopen matches already-loaded libraries by path: the memory file stays open while its
  // library is loaded, so no other kernel can get the same /proc/self/fd path meanwhile.
  int fd_;
};

// The CPU model and feature flags: -march=native code from one host may not run on another.
std::string host_cpu() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  return absl::StrCat(model, "\n", flags);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base && *base ? base : "/tmp", "/polygrad-cc-XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

absl::StatusOr<CpuCompiler> CpuCompiler::find(const std::string& preferred, std::chrono::seconds timeout) {
  std::vector<std::string> candidates = preferred.empty() ? std::vector<std::string>{"clang", "gcc", "cc"}
                                                          : std::vector<std::string>{preferred};
  std::string tried;
  for (const std::string& cc : candidates) {
    auto r = run_process({cc, "--version"}, std::chrono::seconds(20));
    if (!r.ok() || r->exit_code != 0) {
      absl::StrAppend(&tried, tried.empty() ? "" : "; ", cc, ": ", r.ok() ? "exited with an error" : r.status().message());
      continue;
    }
    CpuCompiler c;
    c.path_ = cc;
    c.version_ = r->output.substr(0, r->output.find('\n'));
    c.timeout_ = timeout;
    c.flags_ = {"-O3", "-march=native", "-fPIC", "-shared", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-w"};
    c.libs_ = {"-lm"};
    // glibc's vector math library lets clang vectorise loops over exp, log and sin (4-8 lanes
    // instead of one call per element). Kept only if this compiler and libc can build with it.
    if (absl::StrContains(c.version_, "clang")) {
      CpuCompiler probe = c;
      probe.flags_.push_back("-fveclib=libmvec");
      probe.libs_ = {"-lmvec", "-lm"};
      if (probe.compile("#include <math.h>\nvoid f(float* o, int n) { for (int i = 0; i < n; i++) o[i] = expf(o[i]); }\n").ok())
        c = std::move(probe);
    }
    c.identity_ = absl::StrCat(c.version_, "\n", absl::StrJoin(c.flags_, " "), " ", absl::StrJoin(c.libs_, " "), "\n", host_cpu());
    return c;
  }
  return absl::FailedPreconditionError(absl::StrCat("no working C compiler found (", tried, ")"));
}

absl::StatusOr<std::string> CpuCompiler::compile(const std::string& source) const {
  TempDir dir;
  if (dir.path.empty()) return absl::InternalError(absl::StrCat("cannot create a temporary directory: ", std::strerror(errno)));
  std::filesystem::path src = dir.path / "kernel.c", out = dir.path / "kernel.so";
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    if (!f) return absl::InternalError("cannot write kernel source to the temporary directory");
  }
  std::vector<std::string> argv{path_};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  argv.insert(argv.end(), {"-o", out.string(), src.string()});
  argv.insert(argv.end(), libs_.begin(), libs_.end());
  auto r = run_process(argv, timeout_);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return absl::InternalError(absl::StrCat("kernel compilation failed (", path_, " exit ", r->exit_code, "): ", r->output));
  std::ifstream f(out, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  if (!f) return absl::InternalError("the compiler produced no shared object");
  return bytes.str();
}

absl::StatusOr<ProgramPtr> CpuCompiler::load(const std::string& shared_object) {
  int fd = memfd_create("polygrad-kernel", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  size_t off = 0;
  while (off < shared_object.size()) {
    ssize_t n = write(fd, shared_object.data() + off, shared_object.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return absl::InternalError(absl::StrCat("writing the kernel image: ", std::strerror(errno)));
    }
    off += static_cast<size_t>(n);
  }
  std::string path = absl::StrCat("/proc/self/fd/", fd);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat("dlopen of a kernel failed: ", dlerror()));
  }
  auto fn = reinterpret_cast<KernelFn>(dlsym(handle, kKernelEntry));
  if (fn == nullptr) {
    dlclose(handle);
    close(fd);
    return absl::InternalError("the kernel image has no entry point");
  }
  return std::make_shared<CpuProgram>(handle, fn, fd);
}

}  // namespace polygrad
