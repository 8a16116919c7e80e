// The layout of one kernel-cache entry file (core/cache/kernel_cache.h): a fixed header (magic,
// format version, the raw 32-byte key, payload length, payload sha256), then the payload.
// Separate from the cache so the reader of untrusted bytes can be tested and fuzzed alone
// (fuzz/fuzz_cache_entry.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace polygrad {

// Bump when the entry layout or the kernel ABI changes: old entries are then never read.
inline constexpr uint32_t kCacheFormatVersion = 1;

// 64 hex digits (KernelCache::key) as the 32 bytes they spell; the key must be valid_key.
std::string raw_cache_key(std::string_view hex);

std::string encode_cache_entry(std::string_view raw_key, std::string_view payload);
// The payload of a well-formed entry for `raw_key`, or nullopt for anything else (wrong magic,
// version, key or length, a payload that does not match its hash).
std::optional<std::string> decode_cache_entry(std::string_view data, std::string_view raw_key);

}  // namespace polygrad
