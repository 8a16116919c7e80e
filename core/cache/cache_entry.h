// The layout of one kernel-cache entry file (core/cache/kernel_cache.h): a fixed header (magic,
// format version, flags, the raw 32-byte key, payload length, digest), then the payload. The
// digest is the payload's sha256 (flags 0), or with a signing key (flags 1) HMAC-SHA256 under that
// key of the raw key, the length and the payload: a hash only shows an entry was not damaged,
// while a signature shows a holder of the key wrote this payload for this key.
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

// An entry signed with `signing_key` when it is not empty, else hashed.
std::string encode_cache_entry(std::string_view raw_key, std::string_view payload, std::string_view signing_key = {});
// The payload of a well-formed entry for `raw_key`, or nullopt for anything else (wrong magic,
// version, flags, key or length, a payload that does not match its digest). With a signing key
// only entries signed with that key are accepted; without one, only hashed entries.
std::optional<std::string> decode_cache_entry(std::string_view data, std::string_view raw_key,
                                              std::string_view signing_key = {});

}  // namespace polygrad
