// RespClient: a blocking RESP2 client for tests that drive a RESP gateway (ingrid-node --resp)
// as a Redis client would: one command at a time, each bounded by a deadline (a non-blocking
// socket and poll). Replies are parsed whole: simple strings, errors, integers, bulk strings
// (nil too) and arrays of those, nested at most kMaxDepth deep.
//
// Thread safety: one thread per RespClient.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/error.h>
#include <ingrid/result.h>

namespace ingrid::testing {

struct RespReply {
  enum Kind : std::uint8_t { kSimple, kError, kInteger, kBulk, kNil, kArray };
  Kind kind = kNil;
  std::string text;                 // kSimple, kBulk; kError without its '-'
  std::int64_t integer = 0;         // kInteger
  std::vector<RespReply> elements;  // kArray

  // In a field/value array (INGRID.ACQUIRE's reply): the integer after the bulk string `name`.
  std::optional<std::int64_t> field(std::string_view name) const {
    for (std::size_t i = 0; kind == kArray && i + 1 < elements.size(); i += 2) {
      if (elements[i].kind == kBulk && elements[i].text == name &&
          elements[i + 1].kind == kInteger) {
        return elements[i + 1].integer;
      }
    }
    return std::nullopt;
  }
};

// `args` as one RESP2 command: an array of bulk strings.
inline std::string respCommandBytes(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

class RespClient {
 public:
  static constexpr int kMaxDepth = 4;
  using Clock = std::chrono::steady_clock;

  RespClient() = default;
  ~RespClient() { close(); }
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;

  // Connects to "IPv4:port" by `deadline`, closing any connection first. Empty on success, else
  // why not.
  std::string connect(const std::string& address, Clock::time_point deadline) {
    close();
    const auto colon = address.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    if (colon == std::string::npos ||
        ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr) != 1) {
      return "not an IPv4 HOST:PORT: " + address;
    }
    to.sin_port = htons(static_cast<std::uint16_t>(std::atoi(address.c_str() + colon + 1)));
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return "socket: " + std::string(std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 &&
        errno != EINPROGRESS) {
      return failConnect(address, errno);
    }
    if (!wait(POLLOUT, deadline)) return failConnect(address, ETIMEDOUT);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return failConnect(address, err);
    return {};
  }

  bool connected() const { return fd_ >= 0; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    in_.clear();
  }

  // Sends `args` as one command and reads its reply by `deadline`. Errors: timeout (the deadline
  // passed), unreachable (not connected, closed or reset), protocol_error (not a reply). An error
  // closes the connection, so that a late reply is never read as the next command's.
  Result<RespReply> call(const std::vector<std::string>& args, Clock::time_point deadline) {
    if (fd_ < 0) return Error(Errc::unreachable, "not connected");
    const std::string out = respCommandBytes(args);
    for (std::size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return fail(Errc::unreachable, "send: " + std::string(std::strerror(errno)));
      } else if (!wait(POLLOUT, deadline)) {
        return fail(Errc::timeout, "send: deadline passed");
      }
    }
    // A reply is read whole: each round reads what arrived, then parses from the start (replies
    // here are a few hundred bytes; the deadline bounds the rounds).
    for (;;) {
      std::size_t pos = 0;
      RespReply reply;
      switch (parse(in_, pos, reply, 0)) {
        case Parsed::kDone:
          in_.erase(0, pos);
          return reply;
        case Parsed::kBad:
          return fail(Errc::protocol_error, "not a RESP2 reply: " + in_.substr(0, 64));
        case Parsed::kMore:
          break;
      }
      if (!wait(POLLIN, deadline)) return fail(Errc::timeout, "no reply by the deadline");
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        in_.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        return fail(Errc::unreachable, "closed by the server");
      } else if (errno != EAGAIN && errno != EINTR) {
        return fail(Errc::unreachable, "recv: " + std::string(std::strerror(errno)));
      }
    }
  }

 private:
  enum class Parsed { kDone, kMore, kBad };

  // One reply from in[pos...]: kDone (pos past it), kMore (incomplete) or kBad.
  static Parsed parse(std::string_view in, std::size_t& pos, RespReply& out, int depth) {
    const auto eol = in.find("\r\n", pos);
    if (eol == std::string_view::npos) return Parsed::kMore;
    if (eol == pos || depth > kMaxDepth) return Parsed::kBad;
    const char type = in[pos];
    const std::string_view line = in.substr(pos + 1, eol - pos - 1);
    pos = eol + 2;
    if (type == '+' || type == '-') {
      out.kind = type == '+' ? RespReply::kSimple : RespReply::kError;
      out.text = line;
      return Parsed::kDone;
    }
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), n);
    if (ec != std::errc() || end != line.data() + line.size()) return Parsed::kBad;
    switch (type) {
      case ':':
        out.kind = RespReply::kInteger;
        out.integer = n;
        return Parsed::kDone;
      case '$':
        if (n == -1) {
          out.kind = RespReply::kNil;
          return Parsed::kDone;
        }
        if (n < 0) return Parsed::kBad;
        if (in.size() < pos + static_cast<std::size_t>(n) + 2) return Parsed::kMore;
        out.kind = RespReply::kBulk;
        out.text = in.substr(pos, static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n) + 2;
        return Parsed::kDone;
      case '*':
        if (n == -1) {
          out.kind = RespReply::kNil;
          return Parsed::kDone;
        }
        if (n < 0 || n > 1024) return Parsed::kBad;
        out.kind = RespReply::kArray;
        out.elements.resize(static_cast<std::size_t>(n));
        for (auto& e : out.elements) {
          if (const Parsed p = parse(in, pos, e, depth + 1); p != Parsed::kDone) return p;
        }
        return Parsed::kDone;
      default:
        return Parsed::kBad;
    }
  }

  // Whether fd_ became ready for `events` (or failed: the next send or recv says how) by
  // `deadline`.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return true;  // the next call on fd_ reports it
    }
  }

  std::string failConnect(const std::string& address, int err) {
    close();
    return "connect to " + address + ": " + std::strerror(err);
  }
  Error fail(Errc code, std::string what) {
    close();
    return Error(code, std::move(what));
  }

  int fd_ = -1;
  std::string in_;  // bytes received, not yet parsed into a reply
};

}  // namespace ingrid::testing
