#pragma once

#include <string>
#include <string_view>

namespace polygrad {

std::string sha256_raw(std::string_view data);  // 32 bytes
std::string sha256_hex(std::string_view data);  // 64 lowercase hex digits

}  // namespace polygrad
