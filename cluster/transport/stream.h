// Stream: the bytes under a Connection, a TCP socket or TLS over one (cluster/transport/tls.h).
//
// A variant, not a virtual interface: with TLS off, a read or a write costs one branch more than
// on a bare socket, and no allocation. The TLS handshake is done before a Stream is made
// (Transport), so a Connection only reads, writes and closes.
// Thread safety: as an Asio socket: one thread at a time (the transport's network thread).
#pragma once

#include <utility>
#include <variant>

#include <asio/ip/tcp.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/write.hpp>

namespace ingrid {

class Stream {
 public:
  using Tcp = asio::ip::tcp::socket;
  using Tls = asio::ssl::stream<Tcp>;

  explicit Stream(Tcp socket) : stream_(std::in_place_type<Tcp>, std::move(socket)) {}
  // `tls` must have completed its handshake, with no operation in flight.
  explicit Stream(Tls tls) : stream_(std::in_place_type<Tls>, std::move(tls)) {}

  // The TCP socket (under TLS, its lowest layer): endpoints, options, shutdown, close.
  Tcp& socket() noexcept {
    Tcp* tcp = std::get_if<Tcp>(&stream_);
    return tcp != nullptr ? *tcp : std::get<Tls>(stream_).next_layer();
  }
  const Tcp& socket() const noexcept {
    const Tcp* tcp = std::get_if<Tcp>(&stream_);
    return tcp != nullptr ? *tcp : std::get<Tls>(stream_).next_layer();
  }
  // The TLS stream, or null on plain TCP.
  Tls* tls() noexcept { return std::get_if<Tls>(&stream_); }

  template <class Buffers, class Handler>
  void asyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (Tcp* tcp = std::get_if<Tcp>(&stream_)) {
      tcp->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      std::get<Tls>(stream_).async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  // Writes all of `buffers` (asio::async_write).
  template <class Buffers, class Handler>
  void asyncWrite(const Buffers& buffers, Handler&& handler) {
    if (Tcp* tcp = std::get_if<Tcp>(&stream_)) {
      asio::async_write(*tcp, buffers, std::forward<Handler>(handler));
    } else {
      asio::async_write(std::get<Tls>(stream_), buffers, std::forward<Handler>(handler));
    }
  }

 private:
  std::variant<Tcp, Tls> stream_;
};

}  // namespace ingrid
