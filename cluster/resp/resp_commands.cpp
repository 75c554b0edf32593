#include "cluster/resp/resp_commands.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace ingrid {
namespace {

constexpr Nanos kSecond = 1'000'000'000;
// The longest period in seconds whose nanoseconds fit an int64 (about 292 years).
constexpr std::int64_t kMaxPeriodSeconds = std::numeric_limits<Nanos>::max() / kSecond;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

std::string integer(std::int64_t v) { return ":" + std::to_string(v) + "\r\n"; }

std::string wrongArity(std::string_view name) {
  return respError("wrong number of arguments for '" + lower(name) + "' command");
}

// A 64-bit signed integer in decimal with an optional sign, as redis-cell parses its arguments
// (Rust's i64::from_str): nothing else, no spaces.
std::optional<std::int64_t> parseInt(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  std::int64_t v = 0;
  const auto [at, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || at != s.data() + s.size()) return std::nullopt;
  return v;
}

// The argument `name` of CL.THROTTLE as an integer in [min, max], or the error naming it.
std::optional<std::int64_t> intArg(std::string_view name, const std::string& text, std::int64_t min,
                                   std::int64_t max, std::string& error) {
  const auto v = parseInt(text);
  if (!v) {
    error =
        respError("CL.THROTTLE " + std::string(name) + " must be an integer, got '" + text + "'");
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    error = respError("CL.THROTTLE " + std::string(name) + " must be in [" + std::to_string(min) +
                      ", " + std::to_string(max) + "], got " + text);
    return std::nullopt;
  }
  return v;
}

RespAction throttle(std::vector<std::string>& args) {
  RespAction a;
  if (args.size() != 5 && args.size() != 6) {
    a.reply = respError(
        "wrong number of arguments for 'cl.throttle' command; usage: CL.THROTTLE <key> "
        "<max_burst> <count per period> <period> [<quantity>]");
    return a;
  }
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  std::string error;
  const auto maxBurst = intArg("max_burst", args[2], 0, kMax - 1, error);
  const auto count = maxBurst ? intArg("count_per_period", args[3], 1, kMax, error) : std::nullopt;
  const auto period = count ? intArg("period", args[4], 1, kMaxPeriodSeconds, error) : std::nullopt;
  std::optional<std::int64_t> quantity = 1;
  if (period && args.size() == 6) quantity = intArg("quantity", args[5], 0, kMax, error);
  if (!period || !quantity) {
    a.reply = std::move(error);
    return a;
  }
  a.throttle = GcraThrottle{GcraParams{*maxBurst, *count, *period * kSecond}, *quantity};
  a.throttleKey = std::move(args[1]);
  return a;
}

RespAction hello(const std::vector<std::string>& args, std::uint64_t id) {
  RespAction a;
  std::size_t i = 1;
  if (args.size() > 1) {
    const auto version = parseInt(args[1]);
    if (!version) {
      a.reply = respError("Protocol version is not an integer or out of range");
      return a;
    }
    if (*version != 2) {
      a.reply = "-NOPROTO unsupported protocol version\r\n";
      return a;
    }
    i = 2;
  }
  for (; i < args.size(); ++i) {
    if (lower(args[i]) == "setname" && i + 1 < args.size()) {
      ++i;
    } else {
      a.reply = respError("Syntax error in HELLO option '" + args[i] + "'");
      return a;
    }
  }
  a.reply = "*14\r\n" + bulk("server") + bulk("ingrid") + bulk("version") + bulk(INGRID_VERSION) +
            bulk("proto") + integer(2) + bulk("id") + integer(static_cast<std::int64_t>(id)) +
            bulk("mode") + bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") +
            "*0\r\n";
  return a;
}

RespAction client(const std::vector<std::string>& args, std::uint64_t id) {
  RespAction a;
  const std::string sub = args.size() > 1 ? lower(args[1]) : "";
  if (sub == "setname" && args.size() == 3) {
    a.reply = "+OK\r\n";
  } else if (sub == "setinfo" && args.size() == 4) {
    a.reply = "+OK\r\n";
  } else if (sub == "getname" && args.size() == 2) {
    a.reply = "$-1\r\n";  // names are accepted, not kept
  } else if (sub == "id" && args.size() == 2) {
    a.reply = integer(static_cast<std::int64_t>(id));
  } else if (args.size() > 1) {
    a.reply = respError("unknown subcommand or wrong number of arguments for '" + args[1] +
                        "'. Supported: CLIENT SETNAME, SETINFO, GETNAME, ID");
  } else {
    a.reply = wrongArity("client");
  }
  return a;
}

}  // namespace

std::string respError(std::string_view message) {
  std::string line = "-ERR ";
  line += message;
  std::replace(line.begin(), line.end(), '\r', ' ');
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line + "\r\n";
}

std::int64_t respSeconds(Nanos nanos) noexcept {
  constexpr Nanos kMilli = 1'000'000;
  return nanos / kSecond + ((nanos % kSecond) / kMilli > 0 ? 1 : 0);
}

std::string respThrottleReply(const Result<GcraAnswer>& answer) {
  if (!answer) return respError(answer.error().message());
  const GcraAnswer& g = *answer;
  // redis-cell: -1 when allowed, and when no wait helps (a quantity above the burst).
  const std::int64_t retry = !g.limited || g.retryAfter == kNever ? -1 : respSeconds(g.retryAfter);
  return "*5\r\n" + integer(g.limited ? 1 : 0) + integer(g.limit) + integer(g.remaining) +
         integer(retry) + integer(respSeconds(g.resetAfter));
}

RespAction respCommand(std::vector<std::string>& args, std::uint64_t connectionId) {
  const std::string name = lower(args[0]);
  RespAction a;
  if (name == "cl.throttle") return throttle(args);
  if (name == "ping") {
    if (args.size() == 1) {
      a.reply = "+PONG\r\n";
    } else if (args.size() == 2) {
      a.reply = bulk(args[1]);
    } else {
      a.reply = wrongArity(name);
    }
  } else if (name == "echo") {
    a.reply = args.size() == 2 ? bulk(args[1]) : wrongArity(name);
  } else if (name == "quit") {
    a.reply = "+OK\r\n";
    a.close = true;
  } else if (name == "hello") {
    return hello(args, connectionId);
  } else if (name == "client") {
    return client(args, connectionId);
  } else if (name == "command") {
    a.reply = "*0\r\n";  // no command table: clients (redis-cli) start without one
  } else {
    std::string start;
    for (std::size_t i = 1; i < args.size() && i <= 3; ++i)
      start += "'" + args[i].substr(0, 128) + "' ";
    a.reply = respError("unknown command '" + args[0].substr(0, 128) +
                        "', with args beginning with: " + start);
  }
  return a;
}

}  // namespace ingrid
