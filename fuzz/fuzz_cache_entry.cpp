// The kernel-cache entry reader (core/cache/cache_entry.h): entry files are read back from a
// directory other daemons (or anyone with write access) share, so any bytes may come back.
// The input is a 32-byte raw key followed by the entry file's bytes.
// Invariants: no crash or sanitizer report; what the reader accepts, with or without a signing
// key, is exactly what the writer writes for that key and signing key; an entry is never accepted
// by a reader of the other kind; decode(encode(k, p)) == p, and not for another key, a truncated
// entry or a changed byte.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/cache/cache_entry.h"
#include "core/cache/sha256.h"
#include "fuzz/fuzz_check.h"

using namespace polygrad;

constexpr std::string_view kSecret = "the fuzz target's secret";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string key(input.substr(0, 32));
  key.resize(32, '\0');
  const std::string_view bytes = input.size() > 32 ? input.substr(32) : std::string_view();

  // The bytes as an entry file, read without and with a signing key.
  for (std::string_view secret : {std::string_view(), kSecret}) {
    if (std::optional<std::string> payload = decode_cache_entry(bytes, key, secret)) {
      fuzz::check(encode_cache_entry(key, *payload, secret) == bytes, "an accepted entry differs from the writer's");
    }
  }
  fuzz::check(!decode_cache_entry(encode_cache_entry(key, bytes), key, kSecret),
              "an unsigned entry was accepted by a cache with a signing key");
  fuzz::check(!decode_cache_entry(encode_cache_entry(key, bytes, kSecret), key),
              "a signed entry was accepted by a cache without the key");

  // The bytes as a payload.
  const std::string entry = encode_cache_entry(key, bytes);
  std::optional<std::string> back = decode_cache_entry(entry, key);
  fuzz::check(back.has_value() && *back == bytes, "decode(encode(key, payload)) != payload");
  std::string other_key = key;
  other_key[size % 32] ^= 1;
  fuzz::check(!decode_cache_entry(entry, other_key), "an entry was accepted for another key");
  fuzz::check(!decode_cache_entry(std::string_view(entry).substr(0, entry.size() - 1), key), "a truncated entry was accepted");
  std::string changed = entry;
  const size_t at = size == 0 ? 0 : data[0] % entry.size();
  changed[at] ^= 0x20;
  fuzz::check(!decode_cache_entry(changed, key), "an entry with a changed byte was accepted");
  const std::string signed_entry = encode_cache_entry(key, bytes, kSecret);
  back = decode_cache_entry(signed_entry, key, kSecret);
  fuzz::check(back.has_value() && *back == bytes, "decode(encode(key, payload)) != payload for a signed entry");
  fuzz::check(!decode_cache_entry(signed_entry, key, "another secret"), "an entry signed with another key was accepted");

  // Hex keys as the cache names its files.
  fuzz::check(raw_cache_key(sha256_hex(input)) == sha256_raw(input), "raw_cache_key does not invert the hex key");
  return 0;
}
