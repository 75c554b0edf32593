// RespServer: a RESP2 listener in front of a Node, for clients in any language that speak Redis's
// protocol (redis-cli, redis-py, hiredis, ...): CL.THROTTLE runs ingrid's GCRA processor on the
// key, with redis-cell's arguments and reply, INGRID.ACQUIRE any limiter (resp_commands.h lists
// the commands). With NodeOptions::clientSecret set, clients AUTH with it first. `ingrid-node
// --resp` runs one; an embedder constructs one with its Node.
//
// Threads: start() and stop() from one thread (the owner's). The server's connections, its
// listener and every throttle's answer are handled on one thread, the serving thread (the
// completion is bound to its executor):
// - the node's own thread, when the node runs its partitions on its network thread
//   (NodeOptions::partitionsOnNetworkThread with a listenAddress; Node::partitionExecutor()) and
//   RespOptions::onNodeThread is set (the default): a throttle on a local partition is read, run
//   and answered with no thread switch;
// - otherwise a thread of the server's own, which hands each throttle to the node and receives
//   its answer back.
// A connection runs its commands in order, one throttle at a time, and reads again only when
// everything it had received is answered or queued (pipelined commands are answered in order; a
// slow client's replies hold back its own reads, not the node).
//
// The Node must outlive the server and stay started while the server serves (a stopped node's
// answers are errors, which the clients receive as -ERR lines); on the node's thread, stop() the
// server before the node (ingrid-node does). Stop sequence: stop() closes the listener and every
// connection, waits for throttles in flight to complete, and joins the server's own thread if it
// has one. Not on the serving thread (it waits for it): it aborts with a message there, and when
// the server serves on the node's thread of a node no longer running. The destructor calls stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <ingrid/node.h>
#include <ingrid/result.h>

#include "cluster/resp/resp_parser.h"

namespace ingrid {

class RespServerImpl;

struct RespOptions {
  // What one command may hold (resp_parser.h): arguments, bulk string, inline line, command bytes.
  RespLimits limits = {};
  // Connections open at once; one more is answered "-ERR max number of clients reached" and
  // closed (Redis's maxclients reply). Default: 1024.
  std::size_t maxConnections = 1024;
  // A connection that sends nothing for this long while nothing of its own is pending is closed
  // (Redis's `timeout`). 0: never. Default: 600 s (ingrid-node --idle-timeout-ms's default).
  std::chrono::milliseconds idleTimeout{600'000};
  // Serve the connections on the node's thread when the node has one thread for its partitions
  // and network (Node::partitionExecutor()); false, or a node with worker threads: a thread of
  // the server's own. Default: true.
  bool onNodeThread = true;
};

// What a server has done since it started; any thread.
struct RespCounts {
  std::uint64_t connections = 0;     // open now
  std::uint64_t accepted = 0;        // connections accepted
  std::uint64_t refused = 0;         // connections refused at maxConnections
  std::uint64_t idleClosed = 0;      // connections closed by the idle timeout
  std::uint64_t protocolErrors = 0;  // connections closed for breaking the protocol
  std::uint64_t commands = 0;        // commands run
  std::uint64_t authFailures = 0;    // AUTH refused, and commands refused -NOAUTH
  std::uint64_t writes = 0;          // socket writes of replies (a pipeline's may share one)
};

class RespServer {
 public:
  explicit RespServer(Node& node, RespOptions options = {});
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;
  ~RespServer();

  // Listens on "host:port" (port 0: a free one) and serves until stop(). Returns the port, or an
  // error naming the address and the reason. Once per server.
  Result<std::uint16_t> start(const std::string& address);
  // Idempotent.
  void stop();
  RespCounts counts() const noexcept;
  // Whether the connections are served on the node's thread (see above); after start().
  bool servesOnNodeThread() const noexcept;
  // counts() in Prometheus's text format (ingrid_resp_*), appended to ingrid-node's /metrics.
  std::string metricsText() const;
  // The thread that ran the latest command (a default id before the first): for tests.
  std::thread::id TEST_commandThread() const noexcept;

 private:
  std::unique_ptr<RespServerImpl> impl_;
};

}  // namespace ingrid
