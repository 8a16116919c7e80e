#include "core/cache/cache_entry.h"

#include <cstring>

#include "core/cache/sha256.h"

namespace polygrad {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 32 + 8 + 32;
constexpr uint32_t kSigned = 1;  // the flags of a signed entry

// The digest field: the payload's sha256, or the HMAC of the key and length (header bytes 16..56)
// and the payload under the signing key.
std::string digest(std::string_view header, std::string_view payload, std::string_view signing_key) {
  if (signing_key.empty()) return sha256_raw(payload);
  std::string signed_bytes(header.substr(16, 40));
  signed_bytes += payload;
  return hmac_sha256_raw(signing_key, signed_bytes);
}

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

}  // namespace

std::string raw_cache_key(std::string_view hex) {
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) raw.push_back(static_cast<char>(hex_digit(hex[i]) * 16 + hex_digit(hex[i + 1])));
  return raw;
}

std::string encode_cache_entry(std::string_view raw_key, std::string_view payload, std::string_view signing_key) {
  std::string data(kMagic, 8);
  put_u32(data, kCacheFormatVersion);
  put_u32(data, signing_key.empty() ? 0 : kSigned);
  data += raw_key;
  put_u64(data, payload.size());
  data += digest(data, payload, signing_key);
  data += payload;
  return data;
}

std::optional<std::string> decode_cache_entry(std::string_view data, std::string_view raw_key,
                                              std::string_view signing_key) {
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, 8) != 0) return std::nullopt;
  uint32_t version, flags;
  uint64_t length;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&flags, data.data() + 12, 4);
  std::memcpy(&length, data.data() + 48, 8);
  if (version != kCacheFormatVersion || flags != (signing_key.empty() ? 0 : kSigned) || data.substr(16, 32) != raw_key ||
      length != data.size() - kHeaderSize)
    return std::nullopt;
  std::string_view payload = data.substr(kHeaderSize);
  if (!same_bytes(data.substr(56, 32), digest(data.substr(0, 56), payload, signing_key))) return std::nullopt;
  return std::string(payload);
}

}  // namespace polygrad
