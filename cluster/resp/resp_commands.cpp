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
  a.request = GcraThrottle{GcraParams{*maxBurst, *count, *period * kSecond}, *quantity};
  a.throttle = true;
  a.key = std::move(args[1]);
  return a;
}

// The milliseconds that fit in Nanos.
constexpr std::int64_t kMaxMs = std::numeric_limits<Nanos>::max() / 1'000'000;

// INGRID.ACQUIRE key n limiter [OPTION value]...: the options are ingrid-cli's limiter flags
// without "--" (any case), mapped by limiterRequest() as ingrid-cli maps them.
RespAction acquire(std::vector<std::string>& args) {
  RespAction a;
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  const auto refuse = [&a](const std::string& why) {
    a.reply = respError("INGRID.ACQUIRE " + why);
    return a;
  };
  if (args.size() < 4 || args.size() % 2 != 0) {
    a.reply = respError(
        "wrong number of arguments for 'ingrid.acquire' command; usage: INGRID.ACQUIRE <key> <n> "
        "<limiter> [<option> <value>]...");
    return a;
  }
  const auto kind = limiterKindOf(lower(args[3]));
  if (!kind) {
    std::string names;
    for (const char* n : kLimiterNames) names += (names.empty() ? "" : ", ") + std::string(n);
    return refuse("limiter must be one of " + names + ", got '" + args[3].substr(0, 64) + "'");
  }
  const auto whole = [&](const std::string& name, const std::string& text, std::int64_t min,
                         std::int64_t max) -> std::optional<std::int64_t> {
    const auto v = parseInt(text);
    if (!v || *v < min || *v > max) {
      refuse(name + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
             "], got '" + text.substr(0, 64) + "'");
      return std::nullopt;
    }
    return v;
  };
  // A quantity of 0 peeks, where the limiter reads one (gcra).
  const auto units = whole("n", args[2], *kind == LimiterKind::kGcra ? 0 : 1, kMax);
  if (!units) return a;
  LimiterSpec spec;
  spec.kind = *kind;
  for (std::size_t i = 4; i + 1 < args.size(); i += 2) {
    const std::string option = lower(args[i]);
    const std::string& value = args[i + 1];
    if (!limiterOptionApplies(*kind, option)) {
      return refuse("option '" + option + "' does not apply to the limiter " + lower(args[3]));
    }
    std::optional<std::int64_t> v;
    if (option == "capacity") {
      if (!(v = whole(option, value, 1, kMax))) return a;
      spec.capacity = *v;
    } else if (option == "period-ms") {
      if (!(v = whole(option, value, 1, kMaxMs))) return a;
      spec.period = *v * 1'000'000;
    } else if (option == "refill") {
      if (!(v = whole(option, value, 1, kMax))) return a;
      spec.refill = *v;
    } else if (option == "initial") {
      if (!(v = whole(option, value, 0, kMax))) return a;
      spec.initial = *v;
    } else if (option == "warmup-ms") {
      if (!(v = whole(option, value, 1, kMaxMs))) return a;
      spec.warmup = *v * 1'000'000;
    } else if (option == "cold-factor") {
      if (!(v = whole(option, value, 1, WarmupParams::kMaxColdFactor))) return a;
      spec.coldFactor = *v;
    } else if (option == "max-wait-ms") {
      if (!(v = whole(option, value, 0, kMaxMs))) return a;
      spec.maxWait = *v * 1'000'000;
    } else if (option == "config-version") {
      if (!(v = whole(option, value, 0, kMax))) return a;
      spec.configVersion = *v;
    } else if (option == "replacement") {
      const std::string r = lower(value);
      if (r != "as-is" && r != "proportional" && r != "reset") {
        return refuse("replacement must be as-is, proportional or reset, got '" +
                      value.substr(0, 64) + "'");
      }
      spec.replacement = r == "as-is"   ? Replacement::kAsIs
                         : r == "reset" ? Replacement::kReset
                                        : Replacement::kProportional;
    } else if (option == "band") {
      const auto slash = value.find('/');
      const auto capacity =
          slash == std::string::npos ? std::nullopt : parseInt(value.substr(0, slash));
      const auto ms = slash == std::string::npos ? std::nullopt : parseInt(value.substr(slash + 1));
      if (!capacity || !ms || *capacity < 1 || *ms < 1 || *ms > kMaxMs) {
        return refuse("band must be CAPACITY/PERIOD_MS, each a whole number >= 1, got '" +
                      value.substr(0, 64) + "'");
      }
      if (spec.bands.size() == CompositeParams::kMaxBandwidths) {
        return refuse("band: at most " + std::to_string(CompositeParams::kMaxBandwidths) +
                      " bands");
      }
      spec.bands.push_back(BucketParams::perPeriod(*capacity, *ms * 1'000'000));
    } else {
      return refuse("unknown option '" + args[i].substr(0, 64) +
                    "' (known: capacity, period-ms, refill, initial, warmup-ms, cold-factor, "
                    "max-wait-ms, band, config-version, replacement)");
    }
  }
  auto request = limiterRequest(spec, *units);
  if (!request) return refuse("options of " + lower(args[3]) + ": " + request.error().detail());
  a.request = std::move(*request);
  a.key = std::move(args[1]);
  return a;
}

// Compares in time independent of where the strings differ.
bool sameSecret(std::string_view given, std::string_view secret) {
  unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ secret[i % (secret.empty() ? 1 : secret.size())]);
  }
  return diff == 0 && !secret.empty();
}

// AUTH [username] password, and HELLO's AUTH option: the username, if given, is "default".
std::string auth(const std::string* user, const std::string& password, RespSession& session) {
  if (session.secret.empty()) {
    return respError(
        "AUTH <password> called without any password configured for the default user. Are you "
        "sure your configuration is correct?");
  }
  if ((user != nullptr && *user != "default") || !sameSecret(password, session.secret)) {
    return "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
  }
  session.authenticated = true;
  return "+OK\r\n";
}

RespAction hello(const std::vector<std::string>& args, RespSession& session) {
  RespAction a;
  // The version asked for; the session speaks it only if HELLO succeeds, as in Redis.
  int protocol = session.protocol;
  std::size_t i = 1;
  if (args.size() > 1) {
    const auto version = parseInt(args[1]);
    if (!version) {
      a.reply = respError("Protocol version is not an integer or out of range");
      return a;
    }
    if (*version != 2 && *version != 3) {
      a.reply = "-NOPROTO unsupported protocol version\r\n";
      return a;
    }
    protocol = static_cast<int>(*version);
    i = 2;
  }
  for (; i < args.size(); ++i) {
    if (lower(args[i]) == "setname" && i + 1 < args.size()) {
      ++i;
    } else if (lower(args[i]) == "auth" && i + 2 < args.size()) {
      std::string result = auth(&args[i + 1], args[i + 2], session);
      if (result != "+OK\r\n") {
        a.reply = std::move(result);
        return a;
      }
      i += 2;
    } else {
      a.reply = respError("Syntax error in HELLO option '" + args[i] + "'");
      return a;
    }
  }
  if (!session.authenticated) {
    a.reply =
        "-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
        "select the RESP protocol version at the same time\r\n";
    return a;
  }
  const std::uint64_t id = session.id;
  session.protocol = protocol;
  a.reply = (protocol == 3 ? "%7\r\n" : "*14\r\n") + bulk("server") + bulk("ingrid") +
            bulk("version") + bulk(INGRID_VERSION) + bulk("proto") + integer(protocol) +
            bulk("id") + integer(static_cast<std::int64_t>(id)) + bulk("mode") +
            bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n";
  return a;
}

RespAction client(const std::vector<std::string>& args, std::uint64_t id, int protocol) {
  RespAction a;
  const std::string sub = args.size() > 1 ? lower(args[1]) : "";
  if (sub == "setname" && args.size() == 3) {
    a.reply = "+OK\r\n";
  } else if (sub == "setinfo" && args.size() == 4) {
    a.reply = "+OK\r\n";
  } else if (sub == "getname" && args.size() == 2) {
    a.reply = protocol == 3 ? "_\r\n" : "$-1\r\n";  // names are accepted, not kept
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

namespace {

// Field names and values of INGRID.ACQUIRE's reply.
using Fields = std::vector<std::pair<std::string_view, std::int64_t>>;

std::int64_t nanos(Nanos n) { return n == kNever ? -1 : n; }

Fields fieldsOf(const AcquireAnswer& r) {
  return {{"remaining", r.remaining}, {"wait_ns", nanos(r.waitNanos)}};
}
Fields fieldsOf(const ReserveAnswer& r) {
  return {{"delay_ns", nanos(r.delay)}, {"remaining", r.remaining}};
}
Fields fieldsOf(const WarmupAnswer& r) {
  return {{"delay_ns", nanos(r.delay)}, {"cost_ns", nanos(r.cost)}, {"stored", r.stored}};
}
Fields fieldsOf(const GcraAnswer& r) {
  return {{"limit", r.limit},
          {"remaining", r.remaining},
          {"retry_after_ns", nanos(r.retryAfter)},
          {"reset_after_ns", nanos(r.resetAfter)}};
}
Fields fieldsOf(const LimitAnswer& r) {
  return {{"limit", r.limit},
          {"remaining", r.remaining},
          {"retry_after_ns", nanos(r.retryAfter)},
          {"reset_after_ns", nanos(r.resetAfter)}};
}
Fields fieldsOf(const ShaperAnswer& r) {
  return {{"delay_ns", nanos(r.delay)},
          {"limit", r.limit},
          {"remaining", r.remaining},
          {"retry_after_ns", nanos(r.retryAfter)},
          {"reset_after_ns", nanos(r.resetAfter)}};
}
Fields fieldsOf(const LeaseAnswer& r) {
  return {{"lease", r.lease},
          {"limit", r.limit},
          {"held", r.held},
          {"retry_after_ns", nanos(r.retryAfter)},
          {"expires_after_ns", nanos(r.expiresAfter)}};
}
Fields fieldsOf(const CompositeAnswer& r) {
  return {{"remaining", r.remaining}, {"wait_ns", nanos(r.waitNanos)}, {"version", r.version}};
}

bool grantedOf(const GcraAnswer& r) { return r.granted(); }
template <class Answer>
bool grantedOf(const Answer& r) {
  return r.granted;
}

}  // namespace

template <class Answer>
std::string respAcquireReply(const Result<Answer>& answer, int protocol) {
  if (!answer) {
    return respError(std::string(errcName(answer.error().code().value())) + ": " +
                     answer.error().message());
  }
  const Fields fields = fieldsOf(*answer);
  std::string out = (protocol == 3 ? "%" + std::to_string(fields.size() + 1)
                                   : "*" + std::to_string(2 * (fields.size() + 1))) +
                    "\r\n" + bulk("granted") + integer(grantedOf(*answer) ? 1 : 0);
  for (const auto& [name, value] : fields) out += bulk(name) + integer(value);
  return out;
}

template std::string respAcquireReply(const Result<AcquireAnswer>&, int);
template std::string respAcquireReply(const Result<ReserveAnswer>&, int);
template std::string respAcquireReply(const Result<WarmupAnswer>&, int);
template std::string respAcquireReply(const Result<GcraAnswer>&, int);
template std::string respAcquireReply(const Result<LimitAnswer>&, int);
template std::string respAcquireReply(const Result<ShaperAnswer>&, int);
template std::string respAcquireReply(const Result<LeaseAnswer>&, int);
template std::string respAcquireReply(const Result<CompositeAnswer>&, int);

RespAction respCommand(std::vector<std::string>& args, RespSession& session) {
  const std::string name = lower(args[0]);
  const std::uint64_t connectionId = session.id;
  RespAction a;
  if (name == "auth") {
    if (args.size() == 2) {
      a.reply = auth(nullptr, args[1], session);
    } else if (args.size() == 3) {
      a.reply = auth(&args[1], args[2], session);
    } else {
      a.reply = respError("syntax error");
    }
    return a;
  }
  if (name == "hello") return hello(args, session);
  if (!session.authenticated && name != "quit") {
    a.reply = "-NOAUTH Authentication required.\r\n";
    return a;
  }
  if (name == "cl.throttle") return throttle(args);
  if (name == "ingrid.acquire") return acquire(args);
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
  } else if (name == "client") {
    return client(args, connectionId, session.protocol);
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
