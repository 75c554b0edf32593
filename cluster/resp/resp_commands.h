// The RESP gateway's commands: what each command line asks for, as a reply to send or a GCRA
// throttle to run on the node. Pure functions of their arguments (no I/O, no clock); the server
// (resp_server.h) runs the throttle and turns its answer into CL.THROTTLE's reply.
//
// Commands: PING [msg], ECHO msg (redis-cli --pipe ends with one), QUIT,
// HELLO [2|3 [AUTH user pass] [SETNAME name]], AUTH [user] pass, CLIENT SETNAME|SETINFO|GETNAME|ID,
// COMMAND [...] (an empty array), CL.THROTTLE key max_burst count_per_period period [quantity]
// as redis-cell answers it, and INGRID.ACQUIRE key n limiter [OPTION value]... for every
// limiter (include/ingrid/limiter_request.h). With a secret, only AUTH, HELLO and QUIT run before
// AUTH succeeds (-NOAUTH, as Redis answers). docs/gateways.md has every rule.
//
// Thread safety: pure functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/limiter_request.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/result.h>

namespace ingrid {

// A connection's state that commands read and change.
struct RespSession {
  // What HELLO and CLIENT ID report.
  std::uint64_t id = 0;
  // The password AUTH must give (NodeOptions::clientSecret); empty: none is asked.
  std::string_view secret;
  // AUTH succeeded (or no secret is set): commands other than AUTH, HELLO and QUIT may run.
  bool authenticated = false;
  // The RESP version replies are written in: 2, or 3 once HELLO 3 succeeded (HELLO 2 returns to
  // 2). RESP3 changes only the shapes RESP2 lacks: HELLO's and INGRID.ACQUIRE's field/value
  // replies become maps, CLIENT GETNAME's null becomes `_`.
  int protocol = 2;
};

// What one command asks the connection to do.
struct RespAction {
  // Sent as is (in the session's protocol), before anything else this command causes.
  std::string reply;
  // Close the connection once the reply is written (QUIT).
  bool close = false;
  // Run this on `key` and send its answer: as CL.THROTTLE's reply (respThrottleReply) when
  // `throttle`, else as INGRID.ACQUIRE's (respAcquireReply).
  std::optional<LimiterRequest> request;
  bool throttle = false;
  std::string key;
};

// The action for `args` (at least one: the command name, case-insensitive) on `session`.
RespAction respCommand(std::vector<std::string>& args, RespSession& session);

// CL.THROTTLE's five integers for `answer`, or "-ERR ..." if the invocation failed.
std::string respThrottleReply(const Result<GcraAnswer>& answer);

// INGRID.ACQUIRE's reply: field names and integers, "granted" (1 or 0) first, then the answer's
// fields (docs/wire-format.md, "RESP gateway"); durations in nanoseconds, -1 for never. An array
// of name, value, name, value... under RESP2 (`protocol` 2), a map under RESP3 (`protocol` 3).
// "-ERR <code>: <message>" if the invocation failed.
template <class Answer>
std::string respAcquireReply(const Result<Answer>& answer, int protocol = 2);

// A duration as CL.THROTTLE reports it: whole seconds, plus one when the remainder holds at
// least one whole millisecond (redis-cell's rounding). REQUIRES: nanos >= 0.
std::int64_t respSeconds(Nanos nanos) noexcept;

// "-ERR <message>\r\n" (CR and LF in `message` become spaces).
std::string respError(std::string_view message);

}  // namespace ingrid
