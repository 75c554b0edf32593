// Connection: one TCP connection (plain, or TLS: cluster/transport/stream.h) carrying framed
// requests and replies in both directions.
//
// Inside a simulation the stream is an end of a SimNetwork connection (sim_network.h); nothing
// else changes.
//
// One class per connection (STYLE 8): it owns its socket and buffers, keeps one write in flight
// with a queue behind it, and holds its own lifetime with shared_from_this() in every async
// operation. Requests are correlated with replies by request id; each has a deadline, all served
// by one timer per connection (a one-way request has neither: notify()). A bad
// frame is answered with an error reply naming what was wrong, then the connection is closed;
// nothing else is affected. EOF, reset, timeout and cancel are normal events, never exceptions.
//
// Thread safety: every public member is safe from any thread (work is posted to the connection's
// executor, the transport's network thread: one thread runs that io_context). Callbacks
// (ConnectionHandler, ResponseHandler, close listeners) run on the network thread and must not
// block. close() called on the network thread (or once nothing runs the io_context) closes the
// socket at once and posts the callbacks; an io_context stopped before they run destroys them
// uncalled, as Asio does with every outstanding handler.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>

#include <ingrid/result.h>
#include <ingrid/unique_function.h>

#include "cluster/transport/frame.h"
#include "cluster/transport/frame_faults.h"
#include "cluster/transport/stream.h"
#include "cluster/transport/timer.h"
#include "cluster/transport/write_round.h"
#include "grid/block_cache.h"

namespace ingrid {

struct Frame {
  FrameHeader header;
  std::string body;
};

class Connection;

// What a connection delivers to its owner. Must outlive every connection it is given to.
class ConnectionHandler {
 public:
  virtual ~ConnectionHandler() = default;
  // A request frame (not a response) arrived. Answer with conn->reply() or conn->replyError().
  virtual void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) = 0;
  // The connection closed (EOF, reset, bad frame, close()). Its pending requests have failed.
  virtual void onClosed(const std::shared_ptr<Connection>& conn, const Error& reason) = 0;
};

// The bytes that the connections of one node hold in partly received frames, and their limit
// (TransportOptions::maxBufferedBytes). Shared by the connections of a Transport; thread-safe.
class BufferBudget {
 public:
  explicit BufferBudget(std::size_t limit) noexcept : limit_(limit) {}
  // Takes `bytes` if that keeps the total within the limit; false (nothing taken) otherwise.
  bool take(std::size_t bytes) noexcept;
  void give(std::size_t bytes) noexcept;
  std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  // The most ever held at once.
  std::size_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }
  std::size_t limit() const noexcept { return limit_; }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> peak_{0};
};

struct ConnectionOptions {
  // Largest frame body accepted or sent. Default: 16 MiB.
  std::uint32_t maxBodyBytes = kDefaultMaxBodyBytes;
  // Test hook: faults injected into the frames this connection writes (frame_faults.h). Null:
  // none.
  std::shared_ptr<FrameFaults> faults;
  // How long the peer has to send its first complete frame before the connection is closed.
  // 0: no limit. The Transport sets it for accepted connections (TransportOptions).
  std::chrono::milliseconds handshakeTimeout{0};
  // How long a connection whose peer is not a member (peerId == 0: clients, tools, strangers)
  // may go without sending a complete frame before it is closed. 0: no limit. The Transport sets
  // it for accepted connections.
  std::chrono::milliseconds idleTimeout{0};
  // Most bytes queued for writing to a peer that is not a member; one that does not read its
  // replies past this is disconnected. Members are exempt (a snapshot may queue more). 0: no
  // limit. The Transport sets it for accepted connections (TransportOptions). Default: 0.
  std::size_t maxQueuedBytes = 0;
  // The node-wide bound on partly received frames, shared by its connections: a peer that is not
  // a member, whose frame (beyond the first kReadChunkBytes of its read buffer) would take the
  // total past the limit, is answered with an `overloaded` error naming the limit and closed.
  // Members' links are not counted (they are authenticated; a snapshot may be large). Null: no
  // bound. The Transport sets it for accepted connections.
  std::shared_ptr<BufferBudget> budget;
};

// Every connection reads into a buffer of this many bytes; only a frame larger than that grows
// it (as its bytes arrive), and only that growth counts against ConnectionOptions::budget.
inline constexpr std::size_t kReadChunkBytes = 16 * 1024;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using ResponseHandler = UniqueFunction<void(Result<Frame>)>;
  using CloseListener = UniqueFunction<void(const Error&)>;

  // `handler` must outlive the connection. Call start() once to begin reading.
  Connection(asio::ip::tcp::socket socket, ConnectionOptions options, ConnectionHandler& handler);
  // Over `stream` (under TLS, after its handshake).
  Connection(Stream stream, ConnectionOptions options, ConnectionHandler& handler);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  void start();

  // Sends a request. `done` runs exactly once on the network thread with: the reply frame; or
  // the Error carried by an error reply (its Errc and message); or Errc::timeout after
  // `timeout`; or Errc::unreachable if the connection closes first (the request may or may not
  // have been processed by the peer). A body larger than maxBodyBytes fails with
  // Errc::malformed_message without being sent. `done` never runs inside this call: called on
  // the network thread the request is queued at once, from elsewhere it is posted there.
  void request(MessageType type, std::uint64_t topologyVersion, std::string body,
               std::chrono::milliseconds timeout, ResponseHandler done);

  // Sends a one-way request (kFlagOneWay, request id 0): no reply, no deadline, nothing kept; the
  // receiver's reply() and replyError() to it send nothing.
  // Dropped if the connection is closed or the body exceeds maxBodyBytes; only for messages whose
  // loss the protocol above repairs (Raft). From any thread, like request().
  void notify(MessageType type, std::uint64_t topologyVersion, std::string body);

  // Replies to `request` (same request id, kFlagResponse set). On the connection's thread the
  // reply is queued at once (within a read pass, it leaves with the pass's other frames in one
  // write); from another thread it is posted there.
  void reply(const FrameHeader& request, MessageType type, std::uint64_t topologyVersion,
             std::string body);
  // Error reply to `request`: kFlagResponse|kFlagError, body ErrorBody{code, message}.
  void replyError(const FrameHeader& request, const Error& error);

  // Round end (WriteRound): starts the write of the frames deferred to it. Network thread.
  void flushDeferred();
  // Closes the connection: fails pending requests (Errc::unreachable with `reason` in the
  // message), calls close listeners and the handler's onClosed once. Idempotent.
  void close(const Error& reason);
  // Refuses the connection itself (before start()): sends `why` as an error frame with request
  // id 0, which the peer's Connection takes as its close reason, then closes once it is flushed.
  // Network thread only.
  void refuse(const Error& why);
  // Runs `listener` once when the connection closes (at once, on the network thread, if it
  // already has).
  void onClose(CloseListener listener);

  bool isOpen() const noexcept;
  // While requests wait for replies: since when this connection has heard nothing, at the
  // granularity of a read pass (the last pass that brought frames, or the first request sent
  // after it; a request that timed out unanswered keeps that time for the next one). With no
  // request waiting: time_point::max(). Network thread only.
  std::chrono::steady_clock::time_point owedSince() const noexcept {
    return pending_.empty() ? Clock::time_point::max() : owedSince_;
  }
  // "host:port" of the remote end, fixed at construction ("?" if unknown).
  const std::string& remote() const noexcept { return remote_; }
  // Writes started (each one gathered system call, or one TLS record), for tests. Network
  // thread only.
  std::uint64_t TEST_writes() const noexcept { return writesStarted_; }

  // An identity the owner may attach (e.g. the peer's member id after its Hello). Network
  // thread only.
  std::uint64_t peerId = 0;
  // State the owner may keep during a handshake (member authentication's nonces). Network
  // thread only.
  std::string handshake;
  // Set by the Transport on a TLS connection whose peer presented a certificate that the CA
  // verified (a member's link must). Network thread only.
  bool peerCertified = false;
  // Set by the Transport with peerCertified when that certificate's extended key usage names
  // serverAuth, as a member's must (a client's names clientAuth only). Network thread only.
  bool peerMemberCertificate = false;
  // Set by the owner once the peer proved the client secret (NodeOptions::clientSecret).
  // Network thread only.
  bool clientAuthenticated = false;
  // Set by the Transport on a connection accepted past maxConnections (within the members'
  // reserve): its owner takes only a member's Hello (and Auth) on it. Network thread only.
  bool overLimit = false;

 private:
  // Implementation state; see connection.cpp. Touched only on the network thread.
  using Clock = std::chrono::steady_clock;
  struct Pending {
    ResponseHandler done;
    Clock::time_point deadline;
    std::chrono::milliseconds timeout{0};
    MessageType type = MessageType::kHello;
  };
  struct Deadline {
    Clock::time_point at;
    std::uint64_t id = 0;
    // Orders a std::*_heap as a min-heap on (`at`, `id`): requests due at once time out in
    // request order.
    bool operator<(const Deadline& other) const noexcept {
      return at != other.at ? at > other.at : id > other.id;
    }
  };
  struct Outgoing {
    HeaderBytes header;
    std::string body;
  };

  // Resizes in_ to `size` bytes (copying what it holds), charging options_.budget for the bytes
  // past kReadChunkBytes; false (in_ unchanged) if the budget refuses.
  bool resizeIn(std::size_t size);
  // Reads whatever has arrived into in_ (growing it only as a frame's bytes arrive), then
  // handles every complete frame in it before reading again (coalesced reads).
  void readMore();
  void onRead(const std::error_code& ec, std::size_t bytes);
  // Handles every complete frame in in_; false once the connection closed meanwhile.
  bool parseFrames();
  void onReadError(const std::error_code& ec);
  void dispatch(Frame frame);
  void startRequest(MessageType type, std::uint64_t topologyVersion, std::string body,
                    std::chrono::milliseconds timeout, ResponseHandler done);
  // Times out every pending request whose deadline has passed, then arms deadlineTimer_ for
  // the earliest one left.
  void expireDue();
  void armDeadline(Clock::time_point at);
  // notify() and reply() on the connection's thread.
  void sendOneWay(MessageType type, std::uint64_t topologyVersion, std::string body);
  void sendReply(const FrameHeader& request, MessageType type, std::uint64_t topologyVersion,
                 std::string body);
  void enqueue(const FrameHeader& header, std::string body);
  // Queues the encoded frame for writing (enqueue, past the fault hook).
  void write(HeaderBytes header, std::string body);
  void sendError(const FrameHeader& request, const Error& error);
  // Fills gather_ with the first frames of writes_ that one write takes; returns how many frames
  // and bytes.
  std::pair<std::size_t, std::size_t> gatherWrites();
  void writeNext();
  // Plain TCP, open: hands the queued frames to the kernel with non-blocking sends, with no
  // completion handler (an async write's completes through a posted handler: another pass of the
  // scheduler, and another poll of the reactor, per write). A simulated stream takes them whole.
  // True if nothing is left; false if the kernel took only part (frames sent whole are dropped, and
  // frontSent_ says how much of the next one left) or the send failed: an async write goes on from
  // there, and reports a failure.
  bool writeNow();
  // Before the socket closes: a best-effort, non-blocking send of the frames deferred to the
  // round's end (what an immediate write would have handed to the kernel already).
  void sendDeferredNow();
  // Fails pending requests and runs the close callbacks: at once, or posted (when called from
  // outside our own handlers, whose caller may not expect re-entry).
  void closeNow(const Error& reason, bool deferCallbacks = false);
  // Answers a bad or truncated frame with an error reply, then closes once it is flushed.
  void failProtocol(std::uint64_t requestId, MessageType type, const Error& error);
  void drainUntilEof();
  void drainRead();
  void closeSocket();
  // Closes a connection that stayed silent past handshakeTimeout or idleTimeout, or arms
  // silenceTimer_ for when it would have.
  void checkSilence();
  // True on the thread that runs the connection's io_context.
  bool onOwnThread() const noexcept;
  // True on the network thread, or when nothing runs the io_context any more: then close()
  // may touch the socket directly.
  bool canRunInline() noexcept;

  Stream stream_;
  ConnectionOptions options_;
  ConnectionHandler& handler_;
  std::string remote_;
  std::string localIp_, remoteIp_;  // for options_.faults
  // Received bytes not yet handled: in_[inBegin_, inEnd_). header_ is valid while haveHeader_
  // (its body is still arriving).
  std::vector<char> in_;
  std::size_t inBegin_ = 0, inEnd_ = 0;
  bool haveHeader_ = false;
  FrameHeader header_{};
  // While onRead handles the frames of one read: writes wait for its end (one gathered write).
  // Only under TLS; on plain TCP the round_ does the same for every connection of the thread.
  bool inPass_ = false;
  // Plain TCP (or simulated) on an io_context: a frame queued on the connection's thread waits for
  // the end of the round (write_round.h), so what every handler of the round produced leaves in one
  // write. deferred_: this connection is in the round's list. Null under TLS (see inPass_).
  WriteRound* round_ = nullptr;
  bool deferred_ = false;
  // The io_context the socket runs on (null if its executor is not an io_context's).
  asio::io_context* io_ = nullptr;
  std::uint64_t writesStarted_ = 0;
  // Its blocks from the thread's block cache (block_cache.h): a queue that frames pass through
  // frees a block at one end and takes one at the other every few frames.
  std::deque<Outgoing, CachedAllocator<Outgoing>> writes_;
  // The first writing_ frames of writes_ are in one gathered write; gather_ holds its buffers.
  std::size_t writing_ = 0;
  // Bytes of writes_.front() already sent (by a partial writeNow); gatherWrites skips them.
  std::size_t frontSent_ = 0;
  std::vector<asio::const_buffer> gather_;
  // Under TLS, the gathered frames copied into one buffer: one TLS record per write, not one
  // per frame.
  std::string tlsOut_;
  bool closed_ = false;
  // After a protocol error: the socket stays open until the error reply is flushed and the
  // peer's EOF is read, or lingerTimer_ fires (at most kLinger later).
  bool lingering_ = false;
  Timer lingerTimer_;
  std::array<char, 1024> drainBuf_{};
  Error closeReason_;
  std::atomic<bool> open_{true};
  std::uint64_t nextRequestId_ = 1;
  // Open addressing: no allocation per request once the table has grown to the requests in flight.
  absl::flat_hash_map<std::uint64_t, Pending> pending_;
  // One timer for every pending request (no timer per request): deadlines_ is a min-heap of
  // (deadline, id); an answered request's entry stays until it surfaces or the heap is rebuilt
  // from pending_ (once it holds more than twice as many entries, so a rebuild is amortized).
  // deadlineTimer_ is armed for armedFor_ (Clock::time_point::max() when not armed).
  std::vector<Deadline> deadlines_;
  Timer deadlineTimer_;
  Clock::time_point armedFor_ = Clock::time_point::max();
  std::vector<CloseListener> closeListeners_;
  // handshakeTimeout / idleTimeout: when the last read pass with a complete frame ended (or the
  // connection started), and the frames read so far.
  Timer silenceTimer_;
  Clock::time_point lastFrameAt_{};
  Clock::time_point owedSince_ = Clock::time_point::max();  // see owedSince()
  std::uint64_t framesRead_ = 0;
  // Bytes in writes_ (bounded by maxQueuedBytes for a peer that is not a member).
  std::size_t queuedBytes_ = 0;
  // Bytes of in_ charged to options_.budget (given back when it shrinks or the connection closes).
  std::size_t charged_ = 0;
};

}  // namespace ingrid
