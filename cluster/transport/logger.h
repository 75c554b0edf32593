// Logger: how the library says a line (internal; the embedder's side is include/ingrid/log.h).
// A value holding the node's LogSink and its least level, cheap to copy (a shared_ptr and a
// level): the node makes one from its NodeOptions and hands a copy to each part it constructs
// (control plane, coordinator, Raft I/O, migration planning). Default-constructed it discards
// every line. Any thread, concurrently (the sink's own contract, log.h). In transport/, the lowest
// library of cluster/, so that every part of it may log.
#pragma once

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <ingrid/log.h>

namespace ingrid {

class Logger {
 public:
  Logger() = default;
  Logger(LogSink sink, LogLevel least)
      : sink_(sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr), least_(least) {}

  bool enabled(LogLevel level) const noexcept { return sink_ && level >= least_; }

  // Streams `parts` (operator<<) into one message for the sink, if `level` is enabled; else
  // formats nothing.
  template <typename... Parts>
  void log(LogLevel level, const LogFields& fields, const Parts&... parts) const {
    if (!enabled(level)) return;
    std::ostringstream out;
    (out << ... << parts);
    const std::string message = std::move(out).str();
    deliver(LogLine{level, message, fields});
  }
  template <typename... Parts>
  void info(const LogFields& fields, const Parts&... parts) const {
    log(LogLevel::kInfo, fields, parts...);
  }
  template <typename... Parts>
  void warn(const LogFields& fields, const Parts&... parts) const {
    log(LogLevel::kWarn, fields, parts...);
  }
  template <typename... Parts>
  void error(const LogFields& fields, const Parts&... parts) const {
    log(LogLevel::kError, fields, parts...);
  }

 private:
  void deliver(const LogLine& line) const noexcept {
    try {
      (*sink_)(line);
    } catch (...) {  // the sink's failure is not the node's (log.h): the line is lost
    }
  }

  std::shared_ptr<const LogSink> sink_;
  LogLevel least_ = LogLevel::kInfo;
};

// A member id as a log field: 0 (no member yet) is absent.
inline std::optional<MemberId> knownMember(MemberId id) {
  return id != 0 ? std::optional<MemberId>(id) : std::nullopt;
}

}  // namespace ingrid
