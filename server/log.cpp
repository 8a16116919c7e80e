#include "server/log.h"

#include <cstdio>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/bounded.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// JSON string body: quotes, backslashes and control characters escaped; other bytes as is.
void append_json_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

// Text values stay bare when they are a single plain token, else quoted with JSON escapes, so
// a message with spaces, quotes or newlines still occupies exactly one line.
void append_text_value(std::string& out, std::string_view s) {
  bool plain = !s.empty();
  for (unsigned char c : s) {
    if (c <= 0x20 || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
      plain = false;
      break;
    }
  }
  if (plain) {
    out += s;
    return;
  }
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

}  // namespace

absl::StatusOr<LogLevel> parse_log_level(std::string_view name) {
  std::string n = absl::AsciiStrToLower(av(name));
  if (n == "debug") return LogLevel::Debug;
  if (n == "info") return LogLevel::Info;
  if (n == "warning" || n == "warn") return LogLevel::Warning;
  if (n == "error") return LogLevel::Error;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level \"", av(name), "\" (expected debug, info, warning or error)"));
}

absl::StatusOr<LogFormat> parse_log_format(std::string_view name) {
  std::string n = absl::AsciiStrToLower(av(name));
  if (n == "text") return LogFormat::Text;
  if (n == "json") return LogFormat::Json;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log format \"", av(name), "\" (expected text or json)"));
}

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "unknown";
}

Logger::Logger(LogLevel level, LogFormat format, LogSink sink)
    : level_(level), format_(format), sink_(std::move(sink)) {}

std::string Logger::format(LogLevel level, std::string_view timestamp, std::string_view event,
                           std::initializer_list<LogField> fields) const {
  std::string line;
  if (format_ == LogFormat::Json) {
    line += '{';
    if (!timestamp.empty()) absl::StrAppend(&line, "\"time\":\"", av(timestamp), "\",");
    absl::StrAppend(&line, "\"level\":\"", av(log_level_name(level)), "\",\"msg\":\"");
    append_json_escaped(line, event);
    line += '"';
    for (const LogField& f : fields) {
      line += ",\"";
      append_json_escaped(line, f.key);
      line += "\":\"";
      append_json_escaped(line, bounded(f.value, kMaxMessageBytes));
      line += '"';
    }
    line += "}\n";
    return line;
  }
  if (!timestamp.empty()) absl::StrAppend(&line, av(timestamp), " ");
  absl::StrAppend(&line, av(log_level_name(level)), " ");
  append_text_value(line, event);
  for (const LogField& f : fields) {
    absl::StrAppend(&line, " ", av(f.key), "=");
    append_text_value(line, bounded(f.value, kMaxMessageBytes));
  }
  line += '\n';
  return line;
}

void Logger::log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) const {
  if (!enabled(level)) return;
  std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::string line = format(level, ts, event, fields);
  if (sink_) {
    sink_(line);
    return;
  }
  std::lock_guard lock(mu_);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace polygrad::server
