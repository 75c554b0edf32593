// RespServer: a RESP2 listener in front of a Node, for clients in any language that speak Redis's
// protocol (redis-cli, redis-py, ...): CL.THROTTLE runs ingrid's GCRA processor on the key, with
// redis-cell's arguments and reply (resp_commands.h lists the commands). `ingrid-node --resp`
// runs one; an embedder constructs one with its Node.
//
// Thread safety: start() and stop() from one thread (the owner's). Connections are served on the
// server's own thread, one per server: it reads, parses, answers, and receives each throttle's
// answer from the node (the completion is bound to that thread's executor). A connection runs
// its commands in order, one throttle at a time, and reads again only when everything it had
// received is answered or queued (pipelined commands are answered in order; a slow client's
// replies hold back its own reads, not the node).
//
// The Node must outlive the server and stay started while the server serves (a stopped node's
// answers are errors, which the clients receive as -ERR lines). Stop sequence: stop() closes the
// listener and every connection, waits for throttles in flight to complete, and joins the thread.
// The destructor calls stop().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ingrid/node.h>
#include <ingrid/result.h>

#include "cluster/resp/resp_parser.h"

namespace ingrid {

class RespServerImpl;

class RespServer {
 public:
  explicit RespServer(Node& node, RespLimits limits = {});
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;
  ~RespServer();

  // Listens on "host:port" (port 0: a free one) and serves until stop(). Returns the port, or an
  // error naming the address and the reason. Once per server.
  Result<std::uint16_t> start(const std::string& address);
  // Idempotent.
  void stop();

 private:
  std::unique_ptr<RespServerImpl> impl_;
};

}  // namespace ingrid
