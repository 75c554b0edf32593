#include "cluster/resp/resp_parser.h"

#include <charconv>

namespace ingrid {
namespace {

// Header lines ("*N", "$N") are at most this long: a sign and 19 digits fit.
constexpr std::size_t kMaxHeaderLine = 32;

bool parseCount(std::string_view digits, long long& out) {
  const auto [at, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  return !digits.empty() && ec == std::errc() && at == digits.data() + digits.size();
}

}  // namespace

RespParser::Status RespParser::fail(std::string message) {
  error_ = "Protocol error: " + std::move(message);
  return Status::kError;
}

void RespParser::compact() {
  if (pos_ == 0) return;
  buffer_.erase(0, pos_);
  pos_ = 0;
}

bool RespParser::readLine(std::size_t max, std::string_view what, std::string_view& line,
                          Status& status) {
  const std::size_t end = buffer_.find("\r\n", pos_);
  if (end == std::string::npos || end - pos_ > max) {
    if (buffered() > max + 1) {
      status = fail(std::string(what) + " line is longer than " + std::to_string(max) + " bytes");
    } else {
      status = Status::kNeedMore;
    }
    return false;
  }
  line = std::string_view(buffer_).substr(pos_, end - pos_);
  pos_ = end + 2;
  return true;
}

RespParser::Status RespParser::nextInline(std::vector<std::string>& args) {
  const std::size_t end = buffer_.find('\n', pos_);
  if (end == std::string::npos || end - pos_ > limits_.maxInline + 1) {
    if (buffered() > limits_.maxInline + 1) {
      return fail("inline command is longer than the limit of " +
                  std::to_string(limits_.maxInline) + " bytes");
    }
    return Status::kNeedMore;
  }
  std::string_view line = std::string_view(buffer_).substr(pos_, end - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > limits_.maxInline) {  // a line ended by "\n" alone may be one byte longer
    return fail("inline command is longer than the limit of " + std::to_string(limits_.maxInline) +
                " bytes");
  }
  args.clear();
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) {
      if (args.size() == limits_.maxArgs) {
        return fail("inline command has more than the limit of " + std::to_string(limits_.maxArgs) +
                    " arguments");
      }
      args.emplace_back(line.substr(start, i - start));
    }
  }
  pos_ = end + 1;
  return Status::kCommand;
}

RespParser::Status RespParser::next(std::vector<std::string>& args) {
  if (!error_.empty()) return Status::kError;
  for (;;) {
    Status status = Status::kNeedMore;
    if (argsLeft_ == 0) {  // between commands
      if (pos_ == buffer_.size()) break;
      if (buffer_[pos_] != '*') {
        status = nextInline(args);
        if (status == Status::kCommand && args.empty()) continue;  // an empty line: ignored
        if (status == Status::kNeedMore) break;
        return status;
      }
      std::string_view line;
      if (!readLine(kMaxHeaderLine, "multibulk length", line, status)) {
        if (status == Status::kNeedMore) break;
        return status;
      }
      long long count = 0;
      if (!parseCount(line.substr(1), count)) {
        return fail("invalid multibulk length '" + std::string(line.substr(1)) + "'");
      }
      if (count > static_cast<long long>(limits_.maxArgs)) {
        return fail("multibulk length " + std::to_string(count) + " is over the limit of " +
                    std::to_string(limits_.maxArgs) + " arguments");
      }
      if (count <= 0) continue;  // "*0" and "*-1": nothing to run, as Redis does
      commandBytes_ = line.size() + 2;
      argsLeft_ = static_cast<std::size_t>(count);
      args_.clear();
      args_.reserve(argsLeft_ < 16 ? argsLeft_ : 16);
    }
    if (bulkLength_ < 0) {
      if (pos_ == buffer_.size()) break;
      if (buffer_[pos_] != '$') {
        return fail("expected '$', got '" + std::string(1, buffer_[pos_]) + "'");
      }
      std::string_view line;
      if (!readLine(kMaxHeaderLine, "bulk length", line, status)) {
        if (status == Status::kNeedMore) break;
        return status;
      }
      long long length = 0;
      if (!parseCount(line.substr(1), length) || length < 0) {
        return fail("invalid bulk length '" + std::string(line.substr(1)) + "'");
      }
      if (length > static_cast<long long>(limits_.maxBulk)) {
        return fail("bulk length " + std::to_string(length) + " is over the limit of " +
                    std::to_string(limits_.maxBulk) + " bytes");
      }
      commandBytes_ += line.size() + 2;
      if (commandBytes_ + static_cast<std::size_t>(length) + 2 > limits_.maxCommand) {
        return fail("command is longer than the limit of " + std::to_string(limits_.maxCommand) +
                    " bytes");
      }
      bulkLength_ = length;
    }
    const auto length = static_cast<std::size_t>(bulkLength_);
    if (buffered() < length + 2) break;
    if (buffer_[pos_ + length] != '\r' || buffer_[pos_ + length + 1] != '\n') {
      return fail("bulk string of " + std::to_string(length) + " bytes not followed by CRLF");
    }
    args_.emplace_back(buffer_, pos_, length);
    pos_ += length + 2;
    commandBytes_ += length + 2;
    bulkLength_ = -1;
    if (--argsLeft_ == 0) {
      args = std::move(args_);
      args_ = {};
      return Status::kCommand;
    }
  }
  compact();
  return Status::kNeedMore;
}

}  // namespace ingrid
