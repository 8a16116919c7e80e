// Levelled, one-line-per-event logging, as text (`key=value`) or JSON. Thread-safe; each event
// is written with a single call to the sink, so lines from concurrent requests never interleave.
#pragma once

#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace polygrad::server {

enum class LogLevel { Debug, Info, Warning, Error };
enum class LogFormat { Text, Json };

// Receives one complete line (with its trailing newline).
using LogSink = std::function<void(std::string_view line)>;

struct LogField {
  std::string_view key;
  std::string value;
};

absl::StatusOr<LogLevel> parse_log_level(std::string_view name);    // debug|info|warning|error
absl::StatusOr<LogFormat> parse_log_format(std::string_view name);  // text|json
std::string_view log_level_name(LogLevel level);

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::Info, LogFormat format = LogFormat::Text,
                  LogSink sink = {});

  bool enabled(LogLevel level) const { return level >= level_; }
  // One line per event. Each field's value is cut to kMaxMessageBytes (server/bounded.h): fields
  // may carry client-supplied text.
  void log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields = {}) const;

  void debug(std::string_view event, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::Debug, event, fields);
  }
  void info(std::string_view event, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::Info, event, fields);
  }
  void warning(std::string_view event, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::Warning, event, fields);
  }
  void error(std::string_view event, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::Error, event, fields);
  }

  // The line an event would produce, without the timestamp when `timestamp` is empty (tests).
  std::string format(LogLevel level, std::string_view timestamp, std::string_view event,
                     std::initializer_list<LogField> fields) const;

 private:
  LogLevel level_;
  LogFormat format_;
  LogSink sink_;
  mutable std::mutex mu_;  // serializes writes to the default sink (stderr)
};

}  // namespace polygrad::server
