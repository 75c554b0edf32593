// Transport: the TCP listener and dialer of a node (or client), and the set of its connections.
// Made inside a simulation (a SimulatedMember installed for the calling thread, runtime.h), it
// listens and dials on the member's SimNetwork instead (sim_network.h; no TLS there), and all the
// rest (limits, admission, timeouts) is the same.
//
// Runs on an asio::io_context that the owner runs on one network thread (handlers of the
// transport, its connections and peers are not otherwise serialized). Accepted and dialed
// connections are started, registered, and delivered to one ConnectionHandler. The io_context
// must outlive the transport.
// Thread safety: every public member is safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>

#include "cluster/transport/connection.h"

namespace ingrid {

struct TransportOptions {
  // Address to listen on. Default: 127.0.0.1.
  std::string listenHost = "127.0.0.1";
  // Port to listen on; 0 picks an ephemeral port (see listenPort()). Default: 0.
  std::uint16_t listenPort = 0;
  // How long a dial may take before it fails with Errc::unreachable. Default: 2 s.
  std::chrono::milliseconds connectTimeout{2000};
  ConnectionOptions connection;
  // Accepted connections open at once. Past it, kMemberReserve more are taken for members only
  // (the owner refuses anything but a member's Hello on them: Connection::overLimit), so that
  // clients cannot crowd out the members' own links; past that, one more is refused at once with
  // an error frame (overloaded, naming the limit) and closed. Default: 4096.
  std::size_t maxConnections = 4096;
  static constexpr std::size_t kMemberReserve = 1024;
  // Bytes queued for an accepted peer that is not a member before it is disconnected
  // (ConnectionOptions::maxQueuedBytes). Default: 64 MiB.
  std::size_t maxQueuedBytes = std::size_t{64} << 20;
  // Bytes that all accepted connections from peers that are not members may hold at once in
  // partly received frames (each connection's first kReadChunkBytes of read buffer aside, which
  // maxConnections bounds). A frame that would take the total past it is answered with an
  // `overloaded` error naming the limit, and its connection is closed (ConnectionOptions::budget).
  // 0: no limit. Default: 64 MiB.
  std::size_t maxBufferedBytes = std::size_t{64} << 20;
  // TLS on every connection, accepted and dialed (cluster/transport/tls.h makes the context); null:
  // plain TCP. An accepted connection must start a TLS handshake (its first byte), which must
  // finish within handshakeTimeout; one that sends anything else is refused with an
  // `unauthenticated` error frame in plain framing naming the reason, and closed. A dial fails with
  // `unreachable` naming the handshake's failure (an untrusted certificate, a peer without TLS).
  // A connection whose peer presented a verified certificate is marked peerCertified. Default:
  // null.
  std::shared_ptr<asio::ssl::context> tls;
  // An accepted connection must send a complete frame within this, or it is closed. 0: no
  // limit. Default: 10 s.
  std::chrono::milliseconds handshakeTimeout{10000};
  // An accepted connection from a peer that is not a member (a client, a tool) that sends no
  // frame for this long is closed; the thin client redials on its next request. 0: no limit.
  // Default: 10 min.
  std::chrono::milliseconds idleTimeout{600000};
  // Limits shared with other transports of the same node (its member port and its shard ports),
  // so that maxConnections and maxBufferedBytes bound them all together: take them from the first
  // transport's shared(). Null members: this transport's own.
  struct Shared {
    std::shared_ptr<BufferBudget> budget;
    std::shared_ptr<std::atomic<std::size_t>> inbound;  // accepted connections open
  } shared;
};

// Splits "host:port"; nullopt if it is not of that form with a port in 1..65535.
std::optional<std::pair<std::string, std::uint16_t>> parseAddress(const std::string& address);

class Transport {
 public:
  // `handler` must outlive the transport and every connection it makes.
  Transport(asio::io_context& io, TransportOptions options, ConnectionHandler& handler);
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  ~Transport();

  // Binds, listens and starts accepting. Returns the bound port, or an Error naming the address
  // and the reason (e.g. address in use).
  Result<std::uint16_t> listen();
  std::uint16_t listenPort() const noexcept;
  // "host:port" this transport listens on (after listen()).
  std::string listenAddress() const;
  // Whether stop() was called: it dials no more. Any thread.
  bool stopped() const;

  using ConnectHandler = UniqueFunction<void(Result<std::shared_ptr<Connection>>)>;
  // Dials `address` ("host:port"). `done` runs once on the network thread with the started,
  // registered connection, or Errc::unreachable naming the address and the reason (refused,
  // timed out after `timeout`, bad address). `timeout`: of the connect and the TLS handshake;
  // 0: connectTimeout.
  void connect(const std::string& address, ConnectHandler done,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Stops accepting and closes every connection (their pending requests fail). Idempotent.
  // The owner then lets its io_context run out (or stops it) before destroying the handler.
  // Called on the network thread, or once nothing runs the io_context, it closes the sockets
  // before returning; from another thread it posts that to the network thread. Callbacks
  // (failed requests, onClosed) are always posted: an io_context stopped before they run
  // destroys them uncalled.
  void stop();

  // Bytes that accepted connections hold in partly received frames now, and the most they ever
  // held at once (see maxBufferedBytes; 0 without a limit).
  std::size_t bufferedBytes() const noexcept;
  std::size_t bufferedBytesPeak() const noexcept;

  // This transport's limits, to share with another (TransportOptions::shared).
  TransportOptions::Shared shared() const;

  asio::io_context& io() noexcept { return io_; }
  const TransportOptions& options() const noexcept { return options_; }

 private:
  // The acceptor, the set of connections and dials in progress. Shared with in-flight
  // handlers, so that none of them outlives what it touches; see transport.cpp.
  struct State;
  struct Dial;
  struct Handshake;
  // listen() inside a simulation: on the member's SimNetwork (sim_network.h).
  Result<std::uint16_t> listenSimulated();
  static void accept(const std::shared_ptr<State>& state);
  // Starts the server side of TLS on an accepted socket, after a look at its first byte.
  static void acceptTls(const std::shared_ptr<State>& state, asio::ip::tcp::socket socket);
  // Makes an accepted stream a connection, within the connection limits; `refusal` refuses it.
  static void admit(const std::shared_ptr<State>& state, Stream stream, bool peerCertified,
                    const Error* refusal, bool memberCertified = false);
  static bool track(const std::shared_ptr<State>& state, const std::shared_ptr<Connection>& conn);
  static void startDial(const std::shared_ptr<State>& state, const std::shared_ptr<Dial>& dial,
                        const std::string& host, std::uint16_t port);
  static void finishDial(const std::shared_ptr<State>& state, const std::shared_ptr<Dial>& dial,
                         const std::error_code& ec);

  asio::io_context& io_;
  TransportOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace ingrid
