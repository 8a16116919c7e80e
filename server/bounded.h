// Client-supplied text that reaches a status message or a log line is cut to a bound, so a
// megabyte session id can neither push a reply past the client's metadata limit nor flood the log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace polygrad::server {

inline constexpr size_t kMaxEchoedBytes = 64;     // a client string quoted inside a message
inline constexpr size_t kMaxMessageBytes = 4096;  // a whole status message, or one log field

// `text` when it has at most `max` bytes; otherwise its first bytes up to `max` (never ending
// inside a UTF-8 sequence) followed by "...(N bytes)".
inline std::string bounded(std::string_view text, size_t max = kMaxEchoedBytes) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::string_view(text.data(), cut), "...(", text.size(), " bytes)");
}

}  // namespace polygrad::server
