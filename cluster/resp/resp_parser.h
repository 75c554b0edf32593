// RespParser: splits a RESP2 byte stream into commands (arrays of bulk strings, or inline
// commands), with bounds on what one command may hold. docs/wire-format.md ("RESP gateway").
//
// Incremental: feed() appends whatever a read returned, next() yields each complete command in
// order, so pipelined commands (many in one read) and a command split over reads both work. A
// violated rule is final: next() answers kError from then on, with a message naming the rule,
// and the connection is to be closed after that error is sent.
//
// Thread safety: none; one parser per connection, used by the thread that reads it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ingrid {

struct RespLimits {
  // Arguments in one command (the command name counts). Default: 1024.
  std::size_t maxArgs = 1024;
  // Bytes in one bulk string. Default: 524288 (512 KiB).
  std::size_t maxBulk = 512 * 1024;
  // Bytes in one inline command line (without its line end). Default: 65536.
  std::size_t maxInline = 64 * 1024;
  // Bytes of one array command as sent: its header, every bulk string's header, bytes and line
  // ends. Bounds what one connection buffers for a command (an inline one is bounded by
  // maxInline). Default: 1048576 (1 MiB).
  std::size_t maxCommand = 1024 * 1024;
};

class RespParser {
 public:
  enum class Status { kCommand, kNeedMore, kError };

  explicit RespParser(RespLimits limits = {}) : limits_(limits) {}

  // Appends received bytes.
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // kCommand: `args` holds the next command (at least one argument). kNeedMore: no complete
  // command is buffered. kError: the stream broke a rule; error() says which.
  Status next(std::vector<std::string>& args);
  // "Protocol error: ..." for the -ERR line; empty before an error.
  const std::string& error() const noexcept { return error_; }
  // Bytes held: received and not yet returned as a command. Bounded by the limits plus one read.
  std::size_t buffered() const noexcept { return buffer_.size() - pos_; }

 private:
  Status fail(std::string message);
  // Takes the line at pos_ (without its "\r\n") into `line`. False when there is none within
  // `max` bytes: `status` is then kNeedMore, or kError once more than `max` bytes wait.
  bool readLine(std::size_t max, std::string_view what, std::string_view& line, Status& status);
  Status nextInline(std::vector<std::string>& args);
  void compact();

  RespLimits limits_;
  std::string buffer_;
  std::size_t pos_ = 0;            // first byte not consumed
  std::size_t argsLeft_ = 0;       // bulk strings still due in the current array
  long long bulkLength_ = -1;      // length of the bulk string being read; -1: its header is due
  std::size_t commandBytes_ = 0;   // bytes of the current array command taken so far
  std::vector<std::string> args_;  // the current array's arguments so far
  std::string error_;
};

}  // namespace ingrid
