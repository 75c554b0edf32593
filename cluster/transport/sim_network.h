// SimNetwork: TCP between the hosts of one simulation, in memory. A node's transports listen and
// dial on it (through SimAcceptor and SimStream) instead of on sockets when a SimulatedMember is
// installed (runtime.h), and Connection and everything above it run unchanged.
//
// What it models, per connection: bytes written on one end arrive at the other in order, after a
// latency drawn (from the writer member's random()) within [minLatency, maxLatency], never
// overtaking an earlier write in the same direction. One-way cuts between hosts stall a direction
// (its bytes are held, as TCP's are across a partition, and flow again on heal) and leave dials
// across them unanswered. A dial to an address nobody listens on is refused. reset(host) and
// closeAll(member) (a crash) reset connections: the peer reads asio::error::connection_reset.
//
// Time: each direction's deliveries are events in the RECEIVING member's queue, at times in that
// member's local time (the writer computes max(reader's now + latency, the direction's last
// delivery)), so that a crashed writer's queue takes nothing in flight with it, and a crashed
// reader's closeAll() cancels what was bound for it. A dial's answer is an event of the dialer;
// a dial to an address nobody listens on is refused at once (no latency), and a dial across a cut
// stays unanswered even after a heal (no SYN is sent again; the dialer's timeout ends it).
// Completions (reads, writes, connects, accepts) are posted to the stream's executor, never run
// inline; while a read, dial or accept waits it counts as outstanding work on that executor, as
// a socket's does. A write completes at once (the kernel took it): there is no send window.
// A local close sends FIN (the peer reads its delivered bytes, then eof), even with unread input.
//
// Determinism: every iteration is over maps keyed by creation order or address; every draw comes
// from a SimulatedMember's random().
// Thread safety: none; one SimNetwork per simulation, used on the simulator's thread only. It must
// outlive every member, stream and acceptor that uses it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/buffer.hpp>

#include <ingrid/unique_function.h>

#include "cluster/transport/runtime.h"

namespace ingrid {

class SimStream;

class SimNetwork {
 public:
  struct Options {
    // Latency of each write (and of a dial's answer), drawn uniformly in [min, max].
    // Default: 1 ms to 2 ms.
    SteadyTime::duration minLatency = std::chrono::milliseconds(1);
    SteadyTime::duration maxLatency = std::chrono::milliseconds(2);
  };
  // First port listen(port 0) gives on a host, counting up per host.
  static constexpr std::uint16_t kFirstListenPort = 20000;
  // First local port of a dialing end, counting up per host.
  static constexpr std::uint16_t kFirstDialPort = 40000;

  SimNetwork() : SimNetwork(Options{}) {}
  explicit SimNetwork(Options options) : options_(options) {}
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;
  ~SimNetwork();

  // Cuts the direction from -> to: bytes from `from` to `to` are held, dials between them (either
  // way) go unanswered. Idempotent.
  void cut(const std::string& fromHost, const std::string& toHost);
  // Lets held bytes from -> to flow again (after a fresh latency). Idempotent.
  void heal(const std::string& fromHost, const std::string& toHost);
  void cutBoth(const std::string& a, const std::string& b) {
    cut(a, b);
    cut(b, a);
  }
  void healBoth(const std::string& a, const std::string& b) {
    heal(a, b);
    heal(b, a);
  }
  bool isCut(const std::string& fromHost, const std::string& toHost) const;

  // Resets every connection with an end on `host`: both ends read connection_reset (that end at
  // once, the peer after a latency), bytes in flight to either are dropped.
  void reset(const std::string& host);
  // A crash of `member`: its listeners go (later dials are refused), its streams and dials end
  // without running their handlers (its io_context is going away), its peers read
  // connection_reset, and nothing scheduled for it by the network remains in its queue.
  void closeAll(SimulatedMember& member);

  // kill -9 of `member`'s process: closeAll(member), and until revive(member) the member can
  // neither dial (host_unreachable) nor listen (address_not_available): what its code still runs
  // while the simulator winds it down reaches no one, as a dead process's would not.
  void kill(SimulatedMember& member);
  void revive(SimulatedMember& member) { dead_.erase(&member); }

  // Bytes and writes (data segments) delivered so far, over all connections.
  std::uint64_t bytesDelivered() const noexcept { return bytesDelivered_; }
  std::uint64_t writesDelivered() const noexcept { return writesDelivered_; }
  const Options& options() const noexcept { return options_; }

  // One end of a connection (or a dial); owned by its SimStream. See sim_network.cpp.
  struct End;
  // One listening address; owned by its SimAcceptor.
  struct Listener;

 private:
  friend class SimStream;
  friend class SimAcceptor;
  struct Segment;

  // --- used by SimStream / SimAcceptor ---
  std::shared_ptr<End> makeEnd(SimulatedMember& member, asio::any_io_executor executor);
  std::error_code listen(const std::shared_ptr<Listener>& listener, const std::string& host,
                         std::uint16_t port);
  void unlisten(Listener& listener);
  void accept(const std::shared_ptr<Listener>& listener,
              UniqueFunction<void(std::error_code, std::shared_ptr<End>)> handler);
  void connect(const std::shared_ptr<End>& end, const std::string& address,
               UniqueFunction<void(std::error_code)> handler);
  void read(const std::shared_ptr<End>& end, std::vector<asio::mutable_buffer> buffers,
            UniqueFunction<void(std::error_code, std::size_t)> handler);
  // Takes all of `bytes` for the peer; an error if the end cannot send.
  std::error_code send(End& end, std::string bytes);
  void shutdownSend(End& end);
  void close(End& end);

  // --- internal ---
  // A dial's SYN reaches `address` (the dialer's event, a latency after connect()).
  void answerDial(const std::shared_ptr<End>& end, const std::string& address);
  SteadyTime::duration draw(SimulatedMember* member);
  // Queues a data segment (or a FIN or RST marker) for `to`, from a writer on `fromMember`.
  void transmit(SimulatedMember* fromMember, const std::shared_ptr<End>& to, Segment segment);
  void schedulePump(const std::shared_ptr<End>& to);
  void pump(const std::shared_ptr<End>& to);
  void completeRead(End& end);
  void resetEnd(End& end, bool notifyPeer);
  void unregister(End& end);

  Options options_;
  std::set<std::pair<std::string, std::string>> cuts_;
  std::set<const SimulatedMember*> dead_;  // killed members (lookups only, never iterated)
  std::map<std::string, std::weak_ptr<Listener>> listeners_;  // by "host:port"
  std::map<std::uint64_t, std::weak_ptr<End>> ends_;          // open ends, by creation order
  std::map<std::string, std::uint16_t> nextListenPort_, nextDialPort_;  // by host
  std::uint64_t nextEndId_ = 1;
  std::uint64_t bytesDelivered_ = 0;
  std::uint64_t writesDelivered_ = 0;
};

// The end of a simulated connection, with the part of an Asio socket's interface that Stream and
// Transport use. Move-only; destroying it closes it. Simulator's thread only.
class SimStream {
 public:
  // An unconnected end of `member` (for asyncConnect), whose completions go to `executor`.
  SimStream(SimNetwork& network, SimulatedMember& member, asio::any_io_executor executor);
  explicit SimStream(std::shared_ptr<SimNetwork::End> end) noexcept : end_(std::move(end)) {}
  SimStream(SimStream&&) noexcept = default;
  SimStream& operator=(SimStream&& other) noexcept {
    if (this != &other) {
      close();
      end_ = std::move(other.end_);
    }
    return *this;
  }
  ~SimStream() { close(); }

  // Dials "host:port": `handler(std::error_code)` with no error once connected, connection_refused
  // if nobody listens there, operation_aborted if closed first. Across a cut it never completes.
  template <class Handler>
  void asyncConnect(const std::string& address, Handler&& handler) {
    network().connect(end_, address,
                      UniqueFunction<void(std::error_code)>(std::forward<Handler>(handler)));
  }
  // `handler(std::error_code, std::size_t)`: some delivered bytes, or eof after the last of them
  // once the peer closed, connection_reset, operation_aborted (closed meanwhile) or
  // bad_descriptor (closed before).
  template <class Buffers, class Handler>
  void asyncReadSome(const Buffers& buffers, Handler&& handler) {
    std::vector<asio::mutable_buffer> bufs(asio::buffer_sequence_begin(buffers),
                                           asio::buffer_sequence_end(buffers));
    network().read(
        end_, std::move(bufs),
        UniqueFunction<void(std::error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
  // Takes every byte of `buffers` at once; returns how many, or 0 with `ec` set.
  template <class Buffers>
  std::size_t send(const Buffers& buffers, std::error_code& ec) {
    std::string bytes(asio::buffer_size(buffers), '\0');
    asio::buffer_copy(asio::buffer(bytes), buffers);
    ec = network().send(*end_, std::move(bytes));
    return ec ? 0 : asio::buffer_size(buffers);
  }
  // As asio::async_write: `handler(std::error_code, std::size_t)`, posted.
  template <class Buffers, class Handler>
  void asyncWrite(const Buffers& buffers, Handler&& handler) {
    std::error_code ec;
    const std::size_t n = send(buffers, ec);
    postWrite(UniqueFunction<void(std::error_code, std::size_t)>(std::forward<Handler>(handler)),
              ec, n);
  }

  asio::any_io_executor executor() const;
  // Sends FIN after what was written; later writes fail with broken_pipe.
  void shutdownSend();
  // Closes the end: pending operations complete with operation_aborted; the peer reads eof. A
  // pending dial is cancelled. Idempotent.
  void close();
  bool isOpen() const noexcept;
  // The host of this end and of its peer; "host:port" of each.
  const std::string& localHost() const;
  const std::string& remoteHost() const;
  const std::string& localAddress() const;
  const std::string& remoteAddress() const;

 private:
  SimNetwork& network() const;
  void postWrite(UniqueFunction<void(std::error_code, std::size_t)> handler, std::error_code ec,
                 std::size_t n);

  std::shared_ptr<SimNetwork::End> end_;
};

// A listening address on a SimNetwork, with the part of an Asio acceptor's interface Transport
// uses. Simulator's thread only; destroying it closes it.
class SimAcceptor {
 public:
  SimAcceptor(SimNetwork& network, SimulatedMember& member, asio::any_io_executor executor);
  SimAcceptor(const SimAcceptor&) = delete;
  SimAcceptor& operator=(const SimAcceptor&) = delete;
  ~SimAcceptor() { close(); }

  // Listens on "host:port" (port 0: the host's next free port from kFirstListenPort); returns
  // the port, or 0 with `ec` set (address_in_use, or already_open).
  std::uint16_t listen(const std::string& host, std::uint16_t port, std::error_code& ec);
  // `handler(std::error_code, SimStream)`: the server end of the next connection, or
  // operation_aborted once closed. One accept at a time.
  template <class Handler>
  void asyncAccept(Handler&& handler) {
    network_.accept(listener_,
                    [h = std::forward<Handler>(handler)](
                        std::error_code ec, std::shared_ptr<SimNetwork::End> end) mutable {
                      h(ec, SimStream(std::move(end)));
                    });
  }
  // Stops listening: a pending accept completes with operation_aborted, connections not yet
  // accepted are reset. Idempotent.
  void close();

 private:
  SimNetwork& network_;
  std::shared_ptr<SimNetwork::Listener> listener_;
};

}  // namespace ingrid
