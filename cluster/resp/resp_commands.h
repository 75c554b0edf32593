// The RESP gateway's commands: what each command line asks for, as a reply to send or a GCRA
// throttle to run on the node. Pure functions of their arguments (no I/O, no clock); the server
// (resp_server.h) runs the throttle and turns its answer into CL.THROTTLE's reply.
//
// Commands: PING [msg], ECHO msg (redis-cli --pipe ends with one), QUIT, HELLO [2 [SETNAME name]],
// CLIENT SETNAME|SETINFO|GETNAME|ID, COMMAND
// [...] (an empty array), and CL.THROTTLE key max_burst count_per_period period [quantity] as
// redis-cell answers it. docs/operations.md ("RESP gateway") has the mapping onto GcraParams.
//
// Thread safety: pure functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/processors/gcra.h>
#include <ingrid/result.h>

namespace ingrid {

// What one command asks the connection to do.
struct RespAction {
  // Sent as is (RESP2), before anything else this command causes.
  std::string reply;
  // Close the connection once the reply is written (QUIT).
  bool close = false;
  // Run this on `throttleKey` and send respThrottleReply() of its answer.
  std::optional<GcraThrottle> throttle;
  std::string throttleKey;
};

// The action for `args` (at least one: the command name, case-insensitive). `connectionId` is
// what HELLO and CLIENT ID report.
RespAction respCommand(std::vector<std::string>& args, std::uint64_t connectionId);

// CL.THROTTLE's five integers for `answer`, or "-ERR ..." if the invocation failed.
std::string respThrottleReply(const Result<GcraAnswer>& answer);

// A duration as CL.THROTTLE reports it: whole seconds, plus one when the remainder holds at
// least one whole millisecond (redis-cell's rounding). REQUIRES: nanos >= 0.
std::int64_t respSeconds(Nanos nanos) noexcept;

// "-ERR <message>\r\n" (CR and LF in `message` become spaces).
std::string respError(std::string_view message);

}  // namespace ingrid
