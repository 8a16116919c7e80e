#include "core/runtime/cpu/quick_compiler.h"

#include <cctype>
#include <initializer_list>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/render/c_renderer.h"

#ifdef POLYGRAD_HAVE_LIBTCC
extern "C" {
#include <libtcc.h>
}
#endif

namespace polygrad {

namespace {

// Rule 1 of quick_tier_eligible: a CAST from a float type to an integer type (not bool: a float's
// truth is defined for every value).
bool converts_float_to_int(const LinearKernel& kernel) {
  for (const UOpRef& u : kernel.ops)
    if (u->op == Ops::CAST && !u->src.empty() && dtype_is_float(u->src[0]->dtype) && !dtype_is_float(u->dtype) &&
        u->dtype != DType::Bool)
      return true;
  return false;
}

// Rule 2: a call of a function clang's -fveclib=libmvec vectorises.
bool calls_vectorised_math(std::string_view source) {
  // The functions clang's -fveclib=libmvec maps to vector versions (LLVM's VecFuncs.def,
  // LIBMVEC_X86). A call is the name as a whole identifier followed by '('.
  static constexpr std::string_view kVectorised[] = {"exp", "expf", "log",  "logf", "sin",
                                                     "sinf", "cos", "cosf", "pow",  "powf"};
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < source.size();) {
    if (!ident(source[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < source.size() && ident(source[end])) ++end;
    const std::string_view word = source.substr(i, end - i);
    size_t next = end;
    while (next < source.size() && (source[next] == ' ' || source[next] == '\t')) ++next;
    if (next < source.size() && source[next] == '(')
      for (std::string_view f : kVectorised)
        if (word == f) return true;
    i = end;
  }
  return false;
}

}  // namespace

bool quick_tier_eligible(const LinearKernel& kernel, std::string_view source, bool optimized_uses_vector_math) {
  if (converts_float_to_int(kernel)) return false;
  return !(optimized_uses_vector_math && calls_vectorised_math(source));
}

#ifdef POLYGRAD_HAVE_LIBTCC

namespace {

using KernelFn = void (*)(void**, int64_t, int64_t);

// libtcc 0.9.27 keeps compiler state in globals: one compile, relocation or delete at a time.
std::mutex& tcc_mutex() {
  static std::mutex mu;
  return mu;
}

class QuickProgram final : public Program {
 public:
  QuickProgram(TCCState* state, KernelFn fn, std::shared_ptr<const QuickMath> math)
      : state_(state), fn_(fn), math_(std::move(math)) {}
  ~QuickProgram() override {
    std::lock_guard lock(tcc_mutex());
    tcc_delete(state_);  // frees the code memory too
  }
  absl::Status launch(void** bufs, int64_t start, int64_t end) const override {
    fn_(bufs, start, end);
    return absl::OkStatus();
  }

 private:
  TCCState* state_;
  KernelFn fn_;
  std::shared_ptr<const QuickMath> math_;  // the code calls into it
};

void collect_message(void* opaque, const char* message) {
  std::string& out = *static_cast<std::string*>(opaque);
  absl::StrAppend(&out, out.empty() ? "" : "\n", message);
}

}  // namespace

bool quick_compiler_available() { return true; }

std::string quick_compiler_version() { return "TinyCC (libtcc)"; }

absl::StatusOr<ProgramPtr> quick_compile(const std::string& source, std::shared_ptr<const QuickMath> math) {
  std::lock_guard lock(tcc_mutex());
  TCCState* s = tcc_new();
  if (s == nullptr) return absl::InternalError("tcc_new failed");
  std::string messages;
  tcc_set_error_func(s, &messages, collect_message);
  // Warnings off (the renderer's C is checked by the optimized compiler); libm by name, so
  // expf and kin resolve to the same scalar libm the optimized build links. libtcc1 (TinyCC's
  // own helpers: float to unsigned 64-bit conversion and kin) is linked from its lib path.
  tcc_set_options(s, "-w");
  const auto fail = [&](const char* what) {
    tcc_delete(s);
    return absl::InternalError(absl::StrCat("quick compile (TinyCC) ", what, " failed: ", messages));
  };
  if (tcc_set_output_type(s, TCC_OUTPUT_MEMORY) != 0) return fail("setup");
  if (math) {
    tcc_define_symbol(s, "PG_MATH_EXTERN", "1");
    if (tcc_add_symbol(s, "pg_expf_ext", math->expf) != 0 || tcc_add_symbol(s, "pg_logf_ext", math->logf) != 0)
      return fail("adding the math library");
  }
  if (tcc_compile_string(s, source.c_str()) != 0) return fail("compilation");
  if (tcc_add_library(s, "m") != 0) return fail("adding libm");
  if (tcc_relocate(s, TCC_RELOCATE_AUTO) < 0) return fail("link");
  auto fn = reinterpret_cast<KernelFn>(tcc_get_symbol(s, kKernelEntry));
  if (fn == nullptr) return fail("entry point lookup");
  return std::make_shared<QuickProgram>(s, fn, std::move(math));
}

#else  // !POLYGRAD_HAVE_LIBTCC

bool quick_compiler_available() { return false; }

std::string quick_compiler_version() { return ""; }

absl::StatusOr<ProgramPtr> quick_compile(const std::string&, std::shared_ptr<const QuickMath>) {
  return absl::FailedPreconditionError("this polygrad was built without libtcc: no quick compile tier");
}

#endif

}  // namespace polygrad
