#include "core/cache/kernel_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/cache/sha256.h"

namespace polygrad {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'K', 'C', 'A', 'C', 'H', 'E'};
// Bump when the entry layout or the kernel ABI changes: old entries are then never read.
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 32 + 8 + 32;

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

std::string raw_key(const std::string& hex) {
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) raw.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return raw;
}

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

KernelCache::KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string KernelCache::key(std::string_view device, std::string_view compiler_identity, std::string_view source) {
  // Length-prefixed fields, so no two different triples can concatenate to the same bytes.
  std::string material;
  for (std::string_view part : {device, compiler_identity, source}) {
    absl::StrAppend(&material, part.size(), ":");
    material.append(part);
  }
  return sha256_hex(material);
}

std::filesystem::path KernelCache::entry_path(const std::string& key) const {
  return dir_ / absl::StrCat("v", kFormatVersion) / key.substr(0, 2) / absl::StrCat(key, ".pgk");
}

size_t KernelCache::memory_entries() const {
  std::lock_guard lock(mu_);
  return memory_.size();
}

absl::StatusOr<KernelCache::Found> KernelCache::get_or_build(const std::string& key, const Compile& compile,
                                                             const Load& load) {
  std::promise<absl::StatusOr<Found>> promise;
  std::shared_future<absl::StatusOr<Found>> waiting;
  {
    std::lock_guard lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) return Found{it->second, CacheResult::MemoryHit};
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      waiting = it->second;
    } else {
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (waiting.valid()) {
    // Another request is building this key: share its result. To this caller it was a hit.
    const auto& r = waiting.get();
    if (r.ok()) return Found{r->program, CacheResult::MemoryHit};
    return r.status();
  }
  auto r = lookup_or_build(key, compile, load);
  {
    std::lock_guard lock(mu_);
    if (r.ok()) memory_.emplace(key, r->program);
    in_flight_.erase(key);
  }
  promise.set_value(r);
  return r;
}

absl::StatusOr<KernelCache::Found> KernelCache::lookup_or_build(const std::string& key, const Compile& compile,
                                                                const Load& load) {
  if (!dir_.empty()) {
    if (auto bytes = read_disk(key)) {
      auto program = load(*bytes);
      if (program.ok()) return Found{*program, CacheResult::DiskHit};
      std::error_code ec;
      std::filesystem::remove(entry_path(key), ec);  // verified yet unloadable: rebuild it
    }
  }
  auto bytes = compile();
  if (!bytes.ok()) return bytes.status();
  auto program = load(*bytes);
  if (!program.ok()) return program.status();
  if (!dir_.empty()) write_disk(key, *bytes);
  return Found{*program, CacheResult::Miss};
}

std::optional<std::string> KernelCache::read_disk(const std::string& key) const {
  std::filesystem::path path = entry_path(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string data = ss.str();
  auto discard = [&]() -> std::optional<std::string> {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::nullopt;
  };
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, 8) != 0) return discard();
  uint32_t version;
  uint64_t length;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&length, data.data() + 48, 8);
  if (version != kFormatVersion || data.compare(16, 32, raw_key(key)) != 0 || length != data.size() - kHeaderSize)
    return discard();
  std::string payload = data.substr(kHeaderSize);
  if (data.compare(56, 32, sha256_raw(payload)) != 0) return discard();
  return payload;
}

void KernelCache::write_disk(const std::string& key, const std::string& bytes) const {
  // Best effort: a full or read-only disk costs a recompile later, never a failed request.
  std::filesystem::path path = entry_path(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return;
  std::string header(kMagic, 8);
  put_u32(header, kFormatVersion);
  put_u32(header, 0);
  header += raw_key(key);
  put_u64(header, bytes.size());
  header += sha256_raw(bytes);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::filesystem::path tmp = path.parent_path() / absl::StrCat(".", key, ".", getpid(), ".", rng(), ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = write_all(fd, header) && write_all(fd, bytes) && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) std::filesystem::remove(tmp, ec);
}

}  // namespace polygrad
