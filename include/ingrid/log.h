// Logs for the embedder: a node never writes to stderr. Each line it has to say goes, as a
// LogLine (a level, its text, and the fields it is about), to the LogSink given in
// NodeOptions::logSink; without one, nothing is logged (ingrid-node installs a sink that prints to
// stderr).
//
// Threads: the sink is called on any of the node's threads (its network thread, its control
// plane's thread, the threads that call start() and stop(), a removed member's rejoin thread),
// concurrently: it must be thread-safe. It runs inline there: keep it short, never block, and
// never call back into the node (Node::stop() from a sink deadlocks). An exception it throws is
// swallowed, and the line lost.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <ingrid/hash.h>
#include <ingrid/partition_table.h>

namespace ingrid {

// Severity, least to most; only kInfo and above are used today.
enum class LogLevel : std::uint8_t {
  kDebug,  // detail for whoever debugs the library
  kInfo,   // a change an operator expects to see: joined, admitted, restored, recovered
  kWarn,   // trouble the cluster handles: a member declared failed, a proof refused, a stall
  kError,  // something lost or stuck: a partition restarted empty, Raft storage failing
};

// "debug", "info", "warn" or "error".
constexpr std::string_view logLevelName(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

// What a line is about, where that is known; absent otherwise. The message says it too.
struct LogFields {
  std::optional<MemberId> member = {};        // the logging node's member id (absent: none yet)
  std::optional<PartitionId> partition = {};  // the partition the line is about
  std::optional<std::uint64_t> term = {};     // the control plane's Raft term
  std::optional<MemberId> peer = {};          // the other member the line is about
};

struct LogLine {
  LogLevel level = LogLevel::kInfo;
  // One line of text: no "ingrid: " prefix, no newline. Valid during the sink's call only.
  std::string_view message = {};
  LogFields fields = {};
};

// A std::function rather than an abstract class (leveldb's Logger): NodeOptions is a plain
// struct the embedder copies, like its other callback (onTopology); a lambda forwards to any
// logging framework in a line. The node keeps one copy of it for its life.
using LogSink = std::function<void(const LogLine&)>;

// The line ingrid-node prints for `line`: "ingrid: " and the message (no newline).
inline std::string formatLogLine(const LogLine& line) {
  std::string out = "ingrid: ";
  out += line.message;
  return out;
}

}  // namespace ingrid
