#pragma once

#include <string>
#include <string_view>

namespace polygrad {

std::string sha256_raw(std::string_view data);  // 32 bytes
std::string sha256_hex(std::string_view data);  // 64 lowercase hex digits
std::string hmac_sha256_raw(std::string_view key, std::string_view data);  // 32 bytes
// Equal lengths and bytes, in time that does not depend on where they differ.
bool same_bytes(std::string_view a, std::string_view b);

}  // namespace polygrad
