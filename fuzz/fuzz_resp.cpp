// fuzz_resp: the RESP gateway's parser (cluster/resp/resp_parser.h) over a byte stream fed in
// chunks, as a connection reads it, and each command it yields run through respCommand
// (resp_commands.h) as the server runs it. Input: one byte for the chunk size (1..256), one for
// the limits (even: the defaults; odd: small ones, so that every bound is reached), one for the
// session (bit 0: a secret is set, bit 1: authenticated), then the stream.
// Properties: a command has 1..maxArgs arguments, none longer than the bulk or inline limit; what
// the parser holds after a chunk stays within its limits plus that chunk; an error names a
// protocol rule and is final; a command's reply is one or more whole RESP values' worth of
// bytes (a type byte first, CRLF last), or a request with valid parameters; before AUTH nothing
// but AUTH, HELLO and QUIT runs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cluster/resp/resp_commands.h"
#include "cluster/resp/resp_parser.h"

#include "fuzz_support.h"

namespace ingrid::fuzz {
namespace {

[[noreturn]] void fail(const std::string& what) { fuzzFail("fuzz_resp", what); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

void checkCommand(std::vector<std::string>& args, const RespLimits& limits, RespSession& session) {
  if (args.empty() || args.size() > limits.maxArgs) fail("a command with a bad argument count");
  for (const auto& a : args) {
    if (a.size() > std::max(limits.maxBulk, limits.maxInline)) fail("an argument over the limits");
  }
  const bool before = session.authenticated;
  const int protocolBefore = session.protocol;
  const std::string name = lower(args[0]);
  RespAction action = respCommand(args, session);
  if (session.protocol != 2 && session.protocol != 3) fail("a protocol other than RESP2 or RESP3");
  if (session.protocol != protocolBefore && (name != "hello" || action.reply[0] == '-')) {
    fail("the protocol changed by something other than a successful HELLO");
  }
  if (!before && name != "auth" && name != "hello" && name != "quit" &&
      (action.request || action.reply.rfind("-NOAUTH", 0) != 0)) {
    fail("a command other than AUTH, HELLO and QUIT ran before AUTH");
  }
  if (!before && session.authenticated && name != "auth" && name != "hello") {
    fail("authenticated by something other than AUTH or HELLO");
  }
  if (action.request) {
    if (!action.reply.empty()) fail("a request with a reply of its own");
    std::visit(
        [](const auto& r) {
          if constexpr (requires { r.params.invalidReason(); }) {
            if (r.params.invalidReason()) fail("a request with invalid parameters");
          } else if constexpr (requires { r.bucket.invalidReason(); }) {
            if (r.bucket.invalidReason()) fail("a bucket request with invalid parameters");
          }
        },
        *action.request);
    return;
  }
  const std::string& reply = action.reply;
  if (reply.size() < 3 || std::string_view("+-:$*%_").find(reply[0]) == std::string_view::npos ||
      reply.compare(reply.size() - 2, 2, "\r\n") != 0) {
    fail("a reply that is not a RESP value: " + reply.substr(0, 64));
  }
  if (reply[0] == '-' && reply.find_first_of("\r\n") != reply.size() - 2) {
    fail("an error line with a CR or LF inside");
  }
}

}  // namespace
}  // namespace ingrid::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  fuzz::InputReader in(data, size);
  const std::size_t chunk = 1 + static_cast<std::size_t>(in.le(1));
  const std::uint64_t small = in.le(1) & 1;
  const std::uint64_t sessionBits = in.le(1);
  RespLimits limits;
  if (small != 0) limits = RespLimits{8, 64, 96, 160};
  RespSession session;
  session.id = 7;
  session.secret = (sessionBits & 1) != 0 ? std::string_view("s3cret") : std::string_view();
  session.authenticated = session.secret.empty() || (sessionBits & 2) != 0;
  const std::string_view stream = in.rest();

  RespParser parser(limits);
  std::vector<std::string> args;
  bool failed = false;
  const std::size_t held = std::max({limits.maxCommand, limits.maxInline + 1, std::size_t{33}});
  for (std::size_t pos = 0; pos < stream.size() && !failed; pos += chunk) {
    parser.feed(stream.substr(pos, chunk));
    for (std::size_t i = 0; i <= stream.size(); ++i) {  // at most one command per byte
      const auto status = parser.next(args);
      if (status == RespParser::Status::kNeedMore) break;
      if (status == RespParser::Status::kError) {
        if (parser.error().rfind("Protocol error: ", 0) != 0) fuzz::fuzzFail("fuzz_resp", "error");
        if (parser.next(args) != RespParser::Status::kError) {
          fuzz::fuzzFail("fuzz_resp", "an error that is not final");
        }
        failed = true;
        break;
      }
      fuzz::checkCommand(args, limits, session);
    }
    if (!failed && parser.buffered() > held + chunk) {
      fuzz::fuzzFail("fuzz_resp", "the parser holds " + std::to_string(parser.buffered()) +
                                      " bytes, over its limits plus one read");
    }
  }
  return 0;
}
