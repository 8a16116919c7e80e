#include "core/cache/cache_entry.h"

#include <cstring>

#include "core/cache/sha256.h"

namespace polygrad {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 32 + 8 + 32;

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

}  // namespace

std::string raw_cache_key(std::string_view hex) {
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) raw.push_back(static_cast<char>(hex_digit(hex[i]) * 16 + hex_digit(hex[i + 1])));
  return raw;
}

std::string encode_cache_entry(std::string_view raw_key, std::string_view payload) {
  std::string data(kMagic, 8);
  put_u32(data, kCacheFormatVersion);
  put_u32(data, 0);
  data += raw_key;
  put_u64(data, payload.size());
  data += sha256_raw(payload);
  data += payload;
  return data;
}

std::optional<std::string> decode_cache_entry(std::string_view data, std::string_view raw_key) {
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, 8) != 0) return std::nullopt;
  uint32_t version;
  uint64_t length;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&length, data.data() + 48, 8);
  if (version != kCacheFormatVersion || data.substr(16, 32) != raw_key || length != data.size() - kHeaderSize)
    return std::nullopt;
  std::string_view payload = data.substr(kHeaderSize);
  if (data.substr(56, 32) != sha256_raw(payload)) return std::nullopt;
  return std::string(payload);
}

}  // namespace polygrad
