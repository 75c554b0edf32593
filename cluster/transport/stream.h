// Stream: the bytes under a Connection: a TCP socket, TLS over one (cluster/transport/tls.h), or
// one end of a simulated connection (cluster/transport/sim_network.h) inside a simulation.
//
// A variant, not a virtual interface: with TLS off, a read or a write costs one branch more than
// on a bare socket, and no allocation. The TLS handshake is done before a Stream is made
// (Transport), so a Connection only reads, writes and closes.
// Thread safety: as an Asio socket: one thread at a time (the transport's network thread).
#pragma once

#include <string>
#include <system_error>
#include <utility>
#include <variant>

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/write.hpp>

#include "cluster/transport/sim_network.h"

namespace ingrid {

class Stream {
 public:
  using Tcp = asio::ip::tcp::socket;
  using Tls = asio::ssl::stream<Tcp>;
  using Sim = SimStream;

  explicit Stream(Tcp socket) : stream_(std::in_place_type<Tcp>, std::move(socket)) {}
  // `tls` must have completed its handshake, with no operation in flight.
  explicit Stream(Tls tls) : stream_(std::in_place_type<Tls>, std::move(tls)) {}
  // A connected end of a simulated connection.
  explicit Stream(Sim sim) : stream_(std::in_place_type<Sim>, std::move(sim)) {}

  // The plain TCP socket, or null (TLS, simulated).
  Tcp* tcp() noexcept { return std::get_if<Tcp>(&stream_); }
  // The TLS stream, or null (plain TCP, simulated).
  Tls* tls() noexcept { return std::get_if<Tls>(&stream_); }
  const Tls* tls() const noexcept { return std::get_if<Tls>(&stream_); }
  // The simulated end, or null (TCP, TLS).
  Sim* sim() noexcept { return std::get_if<Sim>(&stream_); }

  asio::any_io_executor executor() {
    if (Sim* s = sim()) return s->executor();
    return lowest().get_executor();
  }
  // TCP_NODELAY on a socket; nothing on a simulated end (it has no send delay to turn off).
  void setNoDelay() {
    if (sim() != nullptr) return;
    std::error_code ignored;
    lowest().set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  // "host:port" of the remote end ("?" if unknown).
  std::string remoteName() const;
  // The IP (or simulated host) of each end; empty if unknown.
  std::string localHost() const;
  std::string remoteHost() const;
  // Sends FIN after what was written.
  void shutdownSend() {
    if (Sim* s = sim()) return s->shutdownSend();
    std::error_code ignored;
    lowest().shutdown(Tcp::shutdown_send, ignored);
  }
  // Closes: operations in flight complete with operation_aborted.
  void close() {
    if (Sim* s = sim()) return s->close();
    std::error_code ignored;
    lowest().close(ignored);
  }
  bool isOpen() const {
    if (const Sim* s = std::get_if<Sim>(&stream_)) return s->isOpen();
    return lowest().is_open();
  }

  template <class Buffers, class Handler>
  void asyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (Tcp* tcp = std::get_if<Tcp>(&stream_)) {
      tcp->async_read_some(buffers, std::forward<Handler>(handler));
    } else if (Tls* tls = std::get_if<Tls>(&stream_)) {
      tls->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      std::get<Sim>(stream_).asyncReadSome(buffers, std::forward<Handler>(handler));
    }
  }
  // Writes all of `buffers` (asio::async_write).
  template <class Buffers, class Handler>
  void asyncWrite(const Buffers& buffers, Handler&& handler) {
    if (Tcp* tcp = std::get_if<Tcp>(&stream_)) {
      asio::async_write(*tcp, buffers, std::forward<Handler>(handler));
    } else if (Tls* tls = std::get_if<Tls>(&stream_)) {
      asio::async_write(*tls, buffers, std::forward<Handler>(handler));
    } else {
      std::get<Sim>(stream_).asyncWrite(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  // The TCP socket (under TLS, its lowest layer). Not for a simulated end.
  Tcp& lowest() noexcept {
    Tcp* tcp = std::get_if<Tcp>(&stream_);
    return tcp != nullptr ? *tcp : std::get<Tls>(stream_).next_layer();
  }
  const Tcp& lowest() const noexcept {
    const Tcp* tcp = std::get_if<Tcp>(&stream_);
    return tcp != nullptr ? *tcp : std::get<Tls>(stream_).next_layer();
  }

  std::variant<Tcp, Tls, Sim> stream_;
};

}  // namespace ingrid
