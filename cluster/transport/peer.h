// Peer: a long-lived link to one remote address that survives reconnects.
//
// Requests go out on the current connection. While there is none, they queue (bounded) and, if
// this side dials, the peer dials with exponential backoff (backoffMin doubling to backoffMax).
// On every new connection the peer first sends a Hello (if helloBody is set) and flushes the
// queue once it is answered. A side that does not dial waits for adopt() of an inbound
// connection instead: that is how two members keep one connection per pair (the smaller member
// id dials). A request already sent is never re-sent: if its connection dies it fails with
// Errc::unreachable, because the remote may have run it.
//
// Thread safety: every public member is safe from any thread; callbacks (and helloBody) run on
// the network thread. The transport must outlive the peer. A stopped transport ends the peer's
// dialing and fails its queue with Errc::shutting_down. A peer dropped without close() lives on
// until its queued requests are answered or expire; its connection is left to the transport.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <asio/io_context.hpp>

#include "cluster/transport/connection.h"
#include "cluster/transport/timer.h"
#include "cluster/transport/transport.h"

namespace ingrid {

struct PeerOptions {
  // Whether this side dials. Default: true.
  bool dial = true;
  // Reconnect backoff: first wait, doubled per failure up to the maximum. Default: 20 ms, 1 s.
  std::chrono::milliseconds backoffMin{20};
  std::chrono::milliseconds backoffMax{1000};
  // Requests that may wait for a connection; past it requests fail with Errc::overloaded.
  // Default: 65536.
  std::size_t maxQueued = 65536;
  // Whether a failed dial fails the requests queued behind it at once, with Errc::unavailable
  // ("not sent", so a caller may safely send them elsewhere), instead of at their deadlines.
  // Nodes and clients set it: they route elsewhere. Default: false (wait for the peer).
  bool failQueuedOnDialError = false;
  // Whether a closed connection is dialed again only when a request wants it (and a failed dial
  // retried only while requests wait), rather than at once and for ever. Thin clients set it: a
  // member closes a client's idle connection (NodeOptions::idleTimeout), and an empty redial
  // would only be closed again by its handshake timeout. Default: false (members keep links up).
  bool dialOnDemand = false;
  // How long a dial (connect, and TLS handshake) may take before it counts as failed; 0: the
  // transport's connectTimeout. Default: 0.
  std::chrono::milliseconds dialTimeout{0};
  // Body of the Hello sent first on every dialed connection; none if empty. Default: none.
  std::function<std::string()> helloBody;
  // Checks the Hello reply against the Hello sent: an empty string accepts it, anything else is
  // the reason the connection is closed (e.g. another process now listens at the address, or it
  // cannot prove the cluster secret). Default: accept.
  std::function<std::string(const std::string& sent, const Frame& reply)> checkHello;
  // After an accepted Hello: the body of an Auth request sent before anything else (this side's
  // proof of the cluster secret); none if it returns empty. A refused Auth closes the connection.
  std::function<std::string(const std::string& sent, const Frame& reply)> authBody;
  // The identity stamped on every connection of this link (Connection::peerId), so that what
  // arrives on it is known to come from that member: on a dialed connection once its Hello reply
  // was accepted, on an adopted one at once. 0: none. Default: 0.
  std::uint64_t peerId = 0;
};

class Peer : public std::enable_shared_from_this<Peer> {
 public:
  // Use create(): the peer must be owned by a shared_ptr.
  static std::shared_ptr<Peer> create(Transport& transport, std::string address,
                                      PeerOptions options);
  ~Peer();

  // Sends a request now, or queues it until connected. `done` runs exactly once on the network
  // thread: the reply, or an Error (see Connection::request; a request still queued at its
  // deadline fails with Errc::unreachable naming the address and the last connect error).
  void request(MessageType type, std::uint64_t topologyVersion, std::string body,
               std::chrono::milliseconds timeout, Connection::ResponseHandler done);

  // Sends a one-way request (Connection::notify) on the ready connection. Without one it waits
  // for a connection like request() does, for at most `timeout`, and is then sent as an ordinary
  // request whose reply is ignored. Only for messages whose loss the protocol above repairs.
  void notify(MessageType type, std::uint64_t topologyVersion, std::string body,
              std::chrono::milliseconds timeout);

  // Makes an inbound connection this peer's connection (replacing none: if one is already open,
  // the older one is kept and `conn` becomes its spare, which takes over when the older closes;
  // a newer spare replaces an older one).
  void adopt(std::shared_ptr<Connection> conn);

  // Fails the requests still queued (not sent) with Errc::unavailable naming `why`, so that
  // callers route them elsewhere; requests already sent keep waiting for their replies.
  void abandonQueued(std::string why);
  // Stops dialing, fails queued requests with Errc::shutting_down, closes the connection.
  void close();
  // As close(), for a member given up on (removed from the topology while silent): requests
  // still queued fail as not sent (Errc::unavailable), and those already sent as unanswered
  // (Errc::unreachable: they may have run), both naming `why`, so that a caller sends them again
  // elsewhere now instead of waiting out their timeouts.
  void abandon(std::string why);

  const std::string& address() const noexcept { return address_; }
  bool connected() const noexcept;
  // Whether it was closed (close(), or its transport stopped): it takes no more requests. Its
  // transport's thread only.
  bool closed() const noexcept { return closed_; }
  // When the latest dial failed (steady clock), or nullopt if it succeeded (or none was made).
  std::optional<std::chrono::steady_clock::time_point> lastDialFailure() const noexcept;
  // Since when this link has owed an answer and heard nothing: its connection's owedSince(), or
  // when the oldest request still queued for a connection was made, whichever is earlier
  // (time_point::max() if none). Network thread only.
  std::chrono::steady_clock::time_point unansweredSince() const noexcept;

 private:
  Peer(Transport& transport, std::string address, PeerOptions options);

  // A request waiting for a connection; its timer fires at its deadline.
  struct Queued {
    MessageType type = MessageType::kHello;
    std::uint64_t topologyVersion = 0;
    std::string body;
    std::chrono::milliseconds timeout{0};
    std::chrono::steady_clock::time_point deadline;
    Connection::ResponseHandler done;
    std::unique_ptr<Timer> timer;
  };

  // Everything below runs on the network thread.
  void startRequest(MessageType type, std::uint64_t topologyVersion, std::string body,
                    std::chrono::milliseconds timeout, Connection::ResponseHandler done);
  void dialNow();
  void scheduleDial();
  void onDialed(Result<std::shared_ptr<Connection>> result);
  void useConnection(std::shared_ptr<Connection> conn, bool dialed);
  void onHello(std::uint64_t generation, Result<Frame> reply);
  // Fails every queued request as not sent (Errc::unavailable); network thread.
  void failQueued(const std::string& why);
  void onConnectionClosed(std::uint64_t generation, const Error& reason);
  void markReady();
  void flush();
  void expire(std::uint64_t id);
  // Stops dialing, fails the queue, closes the connection. Callbacks run at once or, when
  // called from outside our own handlers, posted.
  void closeNow(bool deferCallbacks);
  // closeNow, failing queued requests with `queued` and sent ones with `sent`.
  void closeNow(bool deferCallbacks, const Error& queued, const Error& sent);

  Transport& transport_;
  std::string address_;
  PeerOptions options_;
  Timer backoffTimer_;
  std::chrono::milliseconds backoff_;
  std::shared_ptr<Connection> conn_;
  // The newest connection adopted while conn_ was open: used once conn_ closes (see adopt()).
  std::shared_ptr<Connection> spare_;
  std::uint64_t generation_ = 0;  // of conn_: tells its close event from an older one's
  bool ready_ = false;            // hello answered (or no hello)
  bool dialing_ = false;          // a dial or a backoff wait is under way
  bool closed_ = false;
  std::string lastError_;
  std::string helloSent_;                  // the Hello body sent on the current dialed connection
  std::map<std::uint64_t, Queued> queue_;  // by arrival: FIFO
  std::uint64_t nextQueued_ = 1;
  std::atomic<bool> connectedFlag_{false};
  // The steady clock's ticks when the latest dial failed; 0 once one succeeds.
  std::atomic<std::int64_t> dialFailedAt_{0};
};

}  // namespace ingrid
