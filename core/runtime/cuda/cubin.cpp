#include "core/runtime/cuda/cubin.h"

#include <chrono>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace polygrad {
namespace {

constexpr uint16_t kEmCuda = 190;  // e_machine of NVIDIA GPU code
constexpr size_t kElf64HeaderSize = 64;

template <typename T>
T read_le(std::string_view b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;  // every host this daemon builds for is little-endian, like the ELF files it reads
}

// Whether [off, off + count * entry) lies inside `size` bytes, without overflow.
bool table_fits(uint64_t off, uint64_t count, uint64_t entry, uint64_t size) {
  if (count == 0) return true;
  if (entry == 0 || off > size || count > (size - off) / entry) return false;
  return true;
}

}  // namespace

std::string cubin_cache_key(std::string_view source, int arch, std::string_view nvrtc_version) {
  std::string identity = absl::StrCat("NVRTC ", std::string(nvrtc_version), " ",
                                      absl::StrJoin(Nvrtc::options(arch, Nvrtc::Output::Cubin), " "));
  return KernelCache::key(absl::StrCat("CUDA sm_", arch, " cubin"), identity, source);
}

absl::Status check_cubin(std::string_view b) {
  if (b.size() < kElf64HeaderSize) return absl::DataLossError(absl::StrCat("CUBIN of ", b.size(), " bytes is shorter than an ELF header"));
  if (std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) return absl::DataLossError("CUBIN lacks the ELF magic");
  if (b[4] != 2 || b[5] != 1) return absl::DataLossError("CUBIN is not a 64-bit little-endian ELF");
  if (uint16_t machine = read_le<uint16_t>(b, 18); machine != kEmCuda)
    return absl::DataLossError(absl::StrCat("ELF machine ", machine, " is not CUDA (", kEmCuda, ")"));
  const uint64_t phoff = read_le<uint64_t>(b, 32), shoff = read_le<uint64_t>(b, 40);
  const uint16_t phentsize = read_le<uint16_t>(b, 54), phnum = read_le<uint16_t>(b, 56);
  const uint16_t shentsize = read_le<uint16_t>(b, 58), shnum = read_le<uint16_t>(b, 60);
  if (!table_fits(phoff, phnum, phentsize, b.size()) || !table_fits(shoff, shnum, shentsize, b.size()))
    return absl::DataLossError(absl::StrCat("CUBIN of ", b.size(), " bytes is truncated (its header tables end past it)"));
  if (shnum == 0) return absl::DataLossError("CUBIN has no sections");
  // Every section's contents must lie inside the file too (SHT_NOBITS, type 8, has none).
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t h = shoff + size_t{i} * shentsize;
    if (read_le<uint32_t>(b, h + 4) == 8) continue;
    const uint64_t off = read_le<uint64_t>(b, h + 24), size = read_le<uint64_t>(b, h + 32);
    if (!table_fits(off, size, 1, b.size()))
      return absl::DataLossError(absl::StrCat("CUBIN of ", b.size(), " bytes is truncated (section ", i, " ends past it)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelCache::Found> cubin_from_cache(KernelCache& cache, const Nvrtc& nvrtc, const std::string& source,
                                                    int arch, const KernelCache::Load& load,
                                                    const std::function<void(double, bool)>& on_compile) {
  const std::string key = cubin_cache_key(source, arch, nvrtc.version());
  // NVRTC compiles in this process and cannot be interrupted: `abandoned` goes unheeded.
  auto compile = [&](const KernelCache::StopFn&) -> absl::StatusOr<std::string> {
    auto t0 = std::chrono::steady_clock::now();
    auto out = nvrtc.compile(source, arch, Nvrtc::Output::Cubin);
    if (on_compile) on_compile(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out.ok());
    if (!out.ok()) return out.status();
    return std::move(out->code);
  };
  // A disk entry that fails the check is refused here; the cache then removes and rebuilds it.
  auto checked_load = [&](const std::string& bytes) -> absl::StatusOr<ProgramPtr> {
    if (absl::Status s = check_cubin(bytes); !s.ok()) return s;
    return load(bytes);
  };
  return cache.get_or_build(key, compile, checked_load);
}

}  // namespace polygrad
