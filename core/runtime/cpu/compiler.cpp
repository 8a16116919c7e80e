#include "core/runtime/cpu/compiler.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
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
#include "absl/strings/ascii.h"
#include "core/render/c_renderer.h"
#include "core/runtime/process.h"

namespace polygrad {
namespace {

using KernelFn = void (*)(void**, int64_t, int64_t);

class CpuProgram final : public Program {
 public:
  CpuProgram(void* handle, KernelFn fn, int fd) : handle_(handle), fn_(fn), fd_(fd) {}
  ~CpuProgram() override {
#if defined(POLYGRAD_TSAN_BUILD)
    // Under ThreadSanitizer a kernel stays loaded, and its memory file open (so its
    // /proc/self/fd path is never reused), until the process exits. dlclose holds the loader's
    // lock while it frees, and frees wait for TSan's runtime; a thread of uninstrumented gRPC
    // that TSan is reporting on (a suppressed race) holds the runtime while it lists the loaded
    // libraries, which waits for the loader's lock: a server test hung there at teardown once
    // (~Server -> ~Engine -> ~CpuProgram -> dlclose against the default-executor thread in
    // dl_iterate_phdr). Each test is its own process, so what stays loaded is one test's kernels
    // (all of ctest passes this way under `ulimit -n 1024`).
    static_cast<void>(fd_);
#else
    dlclose(handle_);
    close(fd_);
#endif
  }
  // A C kernel has no way to fail: it runs to the end.
  absl::Status launch(void** bufs, int64_t start, int64_t end) const override {
    fn_(bufs, start, end);
    return absl::OkStatus();
  }
  void* symbol(const char* name) const override { return dlsym(handle_, name); }

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

// The probe kernel loads, and computes exp over 64 elements (vectorised through libmvec where
// the compiler uses it), which shows that everything it calls was linked.
bool CpuCompiler::runs_exp(const std::string& shared_object) {
  auto program = load(shared_object);
  if (!program.ok()) return false;
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / 16.0f;
  void* bufs[] = {v.data()};
  if (!(*program)->launch(bufs, 0, static_cast<int64_t>(v.size())).ok()) return false;
  for (size_t i = 0; i < v.size(); ++i)
    if (std::abs(v[i] - std::exp(static_cast<float>(i) / 16.0f)) > 1e-5f * v[i]) return false;
  return true;
}

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
    // -ffp-contract=off: no a*b+c fused into one rounding (gcc's default fuses across
    // statements), so the arithmetic is what the source says, as in the quick tier
    // (quick_compiler.h): a kernel's results do not depend on which tier built it.
    c.flags_ = {"-O3", "-march=native", "-fPIC", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-w"};
    // Both compilers keep to 256-bit vectors on AVX-512 hosts unless told (a heuristic from
    // chips whose clock dropped under 512-bit work); kernels are upcast for 16 float lanes.
    if (absl::StrContains(host_cpu(), " avx512f")) {
      c.flags_.push_back("-mprefer-vector-width=512");
      c.wide_vectors_ = true;
    }
    c.libs_ = {"-lm"};
    const std::string probe_source = absl::StrCat("#include <math.h>\n#include <stdint.h>\nvoid ", kKernelEntry,
                                                  "(void** b, int64_t s, int64_t e) { float* o = b[0];"
                                                  " for (int64_t i = s; i < e; i++) o[i] = expf(o[i]); }\n");
    // glibc's vector math library lets clang vectorise loops over exp, log and sin (4-8 lanes
    // instead of one call per element). Kept only if this compiler and libc can build with it.
    if (absl::StrContains(c.version_, "clang")) {
      CpuCompiler probe = c;
      probe.flags_.push_back("-fveclib=libmvec");
      probe.libs_ = {"-lmvec", "-lm"};
      if (auto bytes = probe.compile(probe_source); bytes.ok() && runs_exp(*bytes)) {
        c = std::move(probe);
        c.vector_math_ = true;
      }
    }
    // Linking through the compiler driver costs a second driver start (about 130 ms of clang's
    // 300 ms per kernel); the linker it names, run directly, links a kernel in about 15 ms.
    // Kept only if the probe kernel links, loads and computes exp right with it.
    if (auto ld = run_process({cc, "-print-prog-name=ld"}, std::chrono::seconds(20)); ld.ok() && ld->exit_code == 0) {
      CpuCompiler probe = c;
      probe.linker_ = std::string(absl::StripAsciiWhitespace(ld->output));
      auto version = run_process({probe.linker_, "--version"}, std::chrono::seconds(20));
      auto bytes = probe.compile(probe_source);
      if (version.ok() && version->exit_code == 0 && bytes.ok() && runs_exp(*bytes)) {
        probe.linker_version_ = version->output.substr(0, version->output.find('\n'));
        c = std::move(probe);
      }
    }
    c.identity_ = absl::StrCat(c.version_, "\n", absl::StrJoin(c.flags_, " "), " ", absl::StrJoin(c.libs_, " "), "\n",
                               c.linker_.empty() ? "linked by the compiler" : c.linker_version_, "\n", host_cpu());
    return c;
  }
  return absl::FailedPreconditionError(absl::StrCat("no working C compiler found (", tried, ")"));
}

absl::StatusOr<std::string> CpuCompiler::compile(const std::string& source,
                                                 const std::function<bool()>& abandoned) const {
  TempDir dir;
  if (dir.path.empty()) return absl::InternalError(absl::StrCat("cannot create a temporary directory: ", std::strerror(errno)));
  std::filesystem::path src = dir.path / "kernel.c", obj = dir.path / "kernel.o", out = dir.path / "kernel.so";
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    if (!f) return absl::InternalError("cannot write kernel source to the temporary directory");
  }
  auto step = [&](std::vector<std::string> argv, const char* what) -> absl::Status {
    auto r = run_process(argv, timeout_, abandoned);
    // The compiler was there at start-up; gone now, it is the daemon's state, not the request's.
    if (absl::IsNotFound(r.status())) return absl::FailedPreconditionError(absl::StrCat("kernel ", what, ": ", r.status().message()));
    if (!r.ok()) return r.status();
    if (r->exit_code != 0)
      return absl::InternalError(absl::StrCat("kernel ", what, " failed (", argv[0], " ", r->how_it_ended(), "): ", r->output));
    return absl::OkStatus();
  };
  std::vector<std::string> argv{path_};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  if (linker_.empty()) {
    argv.insert(argv.end(), {"-shared", "-o", out.string(), src.string()});
    argv.insert(argv.end(), libs_.begin(), libs_.end());
    if (absl::Status s = step(std::move(argv), "compilation"); !s.ok()) return s;
  } else {
    argv.insert(argv.end(), {"-c", "-o", obj.string(), src.string()});
    if (absl::Status s = step(std::move(argv), "compilation"); !s.ok()) return s;
    std::vector<std::string> link{linker_, "-shared", "-o", out.string(), obj.string()};
    link.insert(link.end(), libs_.begin(), libs_.end());
    link.push_back("-lc");
    if (absl::Status s = step(std::move(link), "link"); !s.ok()) return s;
  }
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
