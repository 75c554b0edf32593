#include "cluster/transport/connection.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include <asio/bind_executor.hpp>
#include <asio/buffer.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <ingrid/processors/codec.h>

#include <ingrid/string_pool.h>
#include "cluster/transport/tls.h"

namespace ingrid {
namespace {

// How long a connection that answered a bad frame waits for its error reply to flush and for
// the peer to close before it closes anyway.
constexpr std::chrono::milliseconds kLinger{1000};
// Reads land in a buffer of this size (it grows only for a larger frame, as its bytes arrive).
constexpr std::size_t kReadChunk = kReadChunkBytes;
// One gathered write carries at most this many frames (and stops adding past the byte bound).
constexpr std::size_t kMaxGatheredFrames = 64;
constexpr std::size_t kMaxGatheredBytes = 256 * 1024;

std::string describe(const Error& reason) {
  return reason.detail().empty() ? reason.code().message() : reason.detail();
}

std::uint64_t readLe(const unsigned char* in, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= std::uint64_t{in[i]} << (8 * i);
  return value;
}

// An ErrorBody from the wire. Its string length is checked against the bytes that are there
// before Cereal allocates anything (invariant 11).
Error decodeErrorReply(const std::string& bytes, const std::string& remote) {
  // Cereal portable binary: u8 little-endian flag, u16 code, u64 length, bytes.
  constexpr std::size_t kFixed = 1 + 2 + 8;
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  std::uint64_t length = 0;
  if (bytes.size() >= kFixed && raw[0] == 1) {
    length = readLe(raw + 3, 8);
  } else if (bytes.size() >= kFixed && raw[0] == 0) {  // written by a big-endian host
    for (std::size_t i = 0; i < 8; ++i) length = (length << 8) | raw[3 + i];
  }
  if (bytes.size() < kFixed || raw[0] > 1 || length != bytes.size() - kFixed) {
    return Error(Errc::malformed_message, "error reply from " + remote + " has a malformed body (" +
                                              std::to_string(bytes.size()) + " bytes)");
  }
  ErrorBody body;
  try {
    body = decode<ErrorBody>(bytes);
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message,
                 "error reply from " + remote + " does not decode: " + e.what());
  }
  return errorFromBody(std::move(body), remote);
}

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, ConnectionOptions options,
                       ConnectionHandler& handler)
    : Connection(Stream(std::move(socket)), std::move(options), handler) {}

Connection::Connection(Stream stream, ConnectionOptions options, ConnectionHandler& handler)
    : stream_(std::move(stream)),
      options_(options),
      handler_(handler),
      remote_(stream_.remoteName()),
      lingerTimer_(stream_.executor()),
      deadlineTimer_(stream_.executor()),
      silenceTimer_(stream_.executor()) {
  stream_.setNoDelay();
  {
    // A copy: target() points into it.
    const asio::any_io_executor executor = stream_.executor();
    if (const auto* io = executor.target<asio::io_context::executor_type>()) {
      io_ = &io->context();
      if (stream_.tls() == nullptr) round_ = &WriteRound::of(*io_);
    }
  }
  if (options_.faults) {
    localIp_ = stream_.localHost();
    remoteIp_ = stream_.remoteHost();
  }
}

Connection::~Connection() = default;

bool Connection::onOwnThread() const noexcept {
  return io_ != nullptr && io_->get_executor().running_in_this_thread();
}

bool Connection::canRunInline() noexcept {
  return onOwnThread() || (io_ != nullptr && io_->stopped());
}

void Connection::start() {
  asio::post(stream_.executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->lastFrameAt_ = steadyNow();
    if (self->options_.handshakeTimeout.count() > 0 || self->options_.idleTimeout.count() > 0) {
      self->checkSilence();
    }
    self->readMore();
  });
}

void Connection::refuse(const Error& why) { failProtocol(0, MessageType::kHello, why); }

void Connection::checkSilence() {
  if (closed_) return;
  // Before the first frame the handshake timeout runs; after it, the idle timeout (not for a
  // member: its links stay however quiet they are).
  const bool inHandshake = framesRead_ == 0 && options_.handshakeTimeout.count() > 0;
  if (!inHandshake && (options_.idleTimeout.count() == 0 || peerId != 0)) return;
  const std::chrono::milliseconds limit =
      inHandshake ? options_.handshakeTimeout : options_.idleTimeout;
  if (steadyNow() - lastFrameAt_ >= limit) {
    const std::string ms = std::to_string(limit.count());
    closeNow(Error(Errc::timeout, inHandshake
                                      ? "no complete frame from " + remote_ + " within " + ms +
                                            " ms of connecting (handshake timeout)"
                                      : "no frame from " + remote_ + " (not a member) for " + ms +
                                            " ms (idle timeout)"));
    return;
  }
  silenceTimer_.expires_at(lastFrameAt_ + limit);
  silenceTimer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
    if (!ec) self->checkSilence();
  });
}

bool Connection::isOpen() const noexcept { return open_.load(std::memory_order_acquire); }

void Connection::request(MessageType type, std::uint64_t topologyVersion, std::string body,
                         std::chrono::milliseconds timeout, ResponseHandler done) {
  if (onOwnThread() && !closed_ && body.size() <= options_.maxBodyBytes) {
    // Already on the network thread and sure to be accepted: no re-post (startRequest calls
    // back only from later handlers on this path).
    startRequest(type, topologyVersion, std::move(body), timeout, std::move(done));
    return;
  }
  asio::post(stream_.executor(),
             [self = shared_from_this(), type, topologyVersion, body = std::move(body), timeout,
              done = std::move(done)]() mutable {
               self->startRequest(type, topologyVersion, std::move(body), timeout, std::move(done));
             });
}

void Connection::startRequest(MessageType type, std::uint64_t topologyVersion, std::string body,
                              std::chrono::milliseconds timeout, ResponseHandler done) {
  if (closed_) {
    done(Error(Errc::unreachable,
               "connection to " + remote_ + " closed: " + describe(closeReason_)));
    return;
  }
  if (body.size() > options_.maxBodyBytes) {
    done(Error(Errc::malformed_message, std::string(messageTypeName(type)) + " request body of " +
                                            std::to_string(body.size()) +
                                            " bytes exceeds the limit of " +
                                            std::to_string(options_.maxBodyBytes)));
    return;
  }
  const std::uint64_t id = nextRequestId_++;
  const Clock::time_point deadline = steadyNow() + timeout;
  pending_.emplace(id, Pending{std::move(done), deadline, timeout, type});
  if (owedSince_ == Clock::time_point::max()) owedSince_ = steadyNow();
  if (deadlines_.size() > 2 * pending_.size() + 64) {
    // Mostly answered requests: rebuild from the pending ones (amortized O(1) per request).
    deadlines_.clear();
    for (const auto& [pid, p] : pending_) deadlines_.push_back(Deadline{p.deadline, pid});
    std::make_heap(deadlines_.begin(), deadlines_.end());
  } else {
    deadlines_.push_back(Deadline{deadline, id});
    std::push_heap(deadlines_.begin(), deadlines_.end());
  }
  if (deadline < armedFor_) armDeadline(deadline);
  FrameHeader header;
  header.type = type;
  header.requestId = id;
  header.topologyVersion = topologyVersion;
  enqueue(header, std::move(body));
}

void Connection::armDeadline(Clock::time_point at) {
  armedFor_ = at;
  deadlineTimer_.expires_at(at);  // cancels an earlier wait, whose handler then does nothing
  // A weak reference: the wait must not keep a connection alive (an open one is held by its
  // read, and a closed one has failed every pending request).
  deadlineTimer_.async_wait([weak = weak_from_this(), at](const std::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || self->armedFor_ != at) return;  // cancelled or re-armed
    self->armedFor_ = Clock::time_point::max();
    self->expireDue();
  });
}

void Connection::expireDue() {
  const Clock::time_point now = steadyNow();
  while (!deadlines_.empty() && !closed_) {
    const Deadline top = deadlines_.front();
    auto it = pending_.find(top.id);
    if (it != pending_.end() && it->second.deadline > now) break;
    std::pop_heap(deadlines_.begin(), deadlines_.end());
    deadlines_.pop_back();
    if (it == pending_.end()) continue;  // answered already
    Pending expired = std::move(it->second);
    pending_.erase(it);
    expired.done(Error(Errc::timeout, "no reply from " + remote_ + " to " +
                                          messageTypeName(expired.type) + " request " +
                                          std::to_string(top.id) + " within " +
                                          std::to_string(expired.timeout.count()) + " ms"));
  }
  if (!deadlines_.empty() && !closed_) {
    // The earliest entry that may still be pending (answered ones on top are dropped above).
    const Clock::time_point next = deadlines_.front().at;
    if (next < armedFor_) armDeadline(next);
  }
}

void Connection::notify(MessageType type, std::uint64_t topologyVersion, std::string body) {
  if (onOwnThread()) {
    sendOneWay(type, topologyVersion, std::move(body));
    return;
  }
  asio::post(stream_.executor(),
             [self = shared_from_this(), type, topologyVersion, body = std::move(body)]() mutable {
               self->sendOneWay(type, topologyVersion, std::move(body));
             });
}

void Connection::sendOneWay(MessageType type, std::uint64_t topologyVersion, std::string body) {
  if (closed_ || body.size() > options_.maxBodyBytes) return;
  FrameHeader header;
  header.type = type;
  header.flags = kFlagOneWay;
  header.topologyVersion = topologyVersion;
  enqueue(header, std::move(body));
}

void Connection::reply(const FrameHeader& request, MessageType type, std::uint64_t topologyVersion,
                       std::string body) {
  if (onOwnThread()) {
    // On the connection's own thread (a request run where it was read): queued at once, and it
    // leaves with the rest of this round's frames.
    sendReply(request, type, topologyVersion, std::move(body));
    return;
  }
  asio::post(stream_.executor(), [self = shared_from_this(), request, type, topologyVersion,
                                  body = std::move(body)]() mutable {
    self->sendReply(request, type, topologyVersion, std::move(body));
  });
}

void Connection::sendReply(const FrameHeader& request, MessageType type,
                           std::uint64_t topologyVersion, std::string body) {
  if (closed_ || request.isOneWay()) return;  // a one-way request is never answered
  if (body.size() > options_.maxBodyBytes) {
    // The requester would otherwise wait for its deadline; tell it why instead.
    sendError(request, Error(Errc::malformed_message,
                             std::string(messageTypeName(type)) + " reply body of " +
                                 std::to_string(body.size()) + " bytes exceeds the limit of " +
                                 std::to_string(options_.maxBodyBytes)));
    return;
  }
  FrameHeader header;
  header.type = type;
  header.flags = kFlagResponse;
  header.requestId = request.requestId;
  header.topologyVersion = topologyVersion;
  enqueue(header, std::move(body));
}

void Connection::replyError(const FrameHeader& request, const Error& error) {
  asio::post(stream_.executor(), [self = shared_from_this(), request, error] {
    if (!self->closed_) self->sendError(request, error);
  });
}

void Connection::sendError(const FrameHeader& request, const Error& error) {
  if (request.isOneWay()) return;  // never answered (an error to request id 0 closes the link)
  FrameHeader header;
  header.type = request.type;
  header.flags = kFlagResponse | kFlagError;
  header.requestId = request.requestId;
  enqueue(header, encode(errorBodyFor(error)));
}

void Connection::close(const Error& reason) {
  auto closeHere = [self = shared_from_this(), reason](bool deferCallbacks) {
    if (self->closed_) {
      if (self->lingering_) {     // stop waiting for the error reply to flush
        self->sendDeferredNow();  // (one still waiting for its round's end goes first)
        self->closeSocket();
      }
      return;
    }
    self->closeNow(reason, deferCallbacks);
  };
  if (canRunInline()) {
    closeHere(/*deferCallbacks=*/true);
  } else {
    asio::post(stream_.executor(), [closeHere] { closeHere(false); });
  }
}

void Connection::onClose(CloseListener listener) {
  asio::post(stream_.executor(),
             [self = shared_from_this(), listener = std::move(listener)]() mutable {
               if (self->closed_) {
                 listener(self->closeReason_);
               } else {
                 self->closeListeners_.push_back(std::move(listener));
               }
             });
}

bool BufferBudget::take(std::size_t bytes) noexcept {
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - std::min(used, limit_)) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  std::size_t peak = peak_.load(std::memory_order_relaxed);
  while (peak < used + bytes &&
         !peak_.compare_exchange_weak(peak, used + bytes, std::memory_order_relaxed)) {
  }
  return true;
}

void BufferBudget::give(std::size_t bytes) noexcept {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

bool Connection::resizeIn(std::size_t size) {
  if (options_.budget) {
    const std::size_t charge = size > kReadChunk && peerId == 0 ? size - kReadChunk : 0;
    if (charge > charged_ && !options_.budget->take(charge - charged_)) return false;
    if (charge < charged_) options_.budget->give(charged_ - charge);
    charged_ = charge;
  }
  if (size < in_.size()) {
    in_ = std::vector<char>(size);  // give the memory back (only done when in_ is empty)
  } else {
    in_.resize(size);
  }
  return true;
}

void Connection::readMore() {
  if (inBegin_ == inEnd_) {
    inBegin_ = inEnd_ = 0;
    // After a large frame, give the memory back (and the bytes charged to the budget).
    if (in_.size() > kReadChunk * 4 || charged_ > 0) resizeIn(kReadChunk);
  }
  if (in_.empty()) resizeIn(kReadChunk);
  if (inEnd_ == in_.size()) {
    if (inBegin_ > 0) {  // move the partial frame to the front
      std::memmove(in_.data(), in_.data() + inBegin_, inEnd_ - inBegin_);
      inEnd_ -= inBegin_;
      inBegin_ = 0;
    }
    if (inEnd_ == in_.size()) {
      // A frame larger than the buffer: grow by doubling as its bytes arrive, never past the
      // frame itself (its length was checked against maxBodyBytes), so what is allocated stays
      // within twice what has arrived.
      std::size_t want = in_.size() * 2;
      if (haveHeader_) want = std::min<std::size_t>(want, header_.bodyLength);
      if (!resizeIn(std::max(want, in_.size() + 1))) {
        const BufferBudget& budget = *options_.budget;
        failProtocol(
            header_.requestId, header_.type,
            Error(Errc::overloaded,
                  std::string(messageTypeName(header_.type)) + " frame of " +
                      std::to_string(header_.bodyLength) + " bytes from " + remote_ +
                      " refused: the node's connections hold " + std::to_string(budget.used()) +
                      " bytes of partly received frames, and this one would take them "
                      "past the limit of " +
                      std::to_string(budget.limit()) + " (maxBufferedBytes)"));
        return;
      }
    }
  }
  stream_.asyncReadSome(asio::buffer(in_.data() + inEnd_, in_.size() - inEnd_),
                        [self = shared_from_this()](const std::error_code& ec, std::size_t n) {
                          self->onRead(ec, n);
                        });
}

bool Connection::parseFrames() {
  while (!closed_) {
    const std::size_t available = inEnd_ - inBegin_;
    if (!haveHeader_) {
      if (available < kFrameHeaderBytes) return true;
      HeaderBytes bytes;
      std::memcpy(bytes.data(), in_.data() + inBegin_, kFrameHeaderBytes);
      if (auto error = decodeHeader(bytes, options_.maxBodyBytes, header_)) {
        // Answer in kind when the header is ours at least: the request id and a valid type.
        const bool ours = readLe(&bytes[0], 4) == kFrameMagic;
        if (!ours && static_cast<unsigned char>(bytes[0]) == kTlsHandshakeRecord && bytes[1] == 3 &&
            stream_.tls() == nullptr) {
          failProtocol(0, MessageType::kHello,
                       Error(Errc::protocol_error,
                             remote_ + " speaks TLS, and this side does not (plain TCP): start "
                                       "both with TLS (TlsOptions), or neither"));
          return false;
        }
        const auto rawType = static_cast<std::uint16_t>(readLe(&bytes[6], 2));
        const auto type = ours && rawType >= 1 && rawType <= kMaxMessageType
                              ? static_cast<MessageType>(rawType)
                              : MessageType::kHello;
        failProtocol(ours ? readLe(&bytes[16], 8) : 0, type, *error);
        return false;
      }
      inBegin_ += kFrameHeaderBytes;
      haveHeader_ = true;
      continue;
    }
    if (available < header_.bodyLength) return true;
    std::string body = StringPool::copy({in_.data() + inBegin_, header_.bodyLength});
    inBegin_ += header_.bodyLength;
    haveHeader_ = false;
    ++framesRead_;
    dispatch(Frame{header_, std::move(body)});
  }
  return false;
}

void Connection::onRead(const std::error_code& ec, std::size_t bytes) {
  if (closed_) return;
  inEnd_ += bytes;
  const std::uint64_t framesBefore = framesRead_;
  // What the frames of this pass produce on this connection (replies to requests run in place,
  // requests sent by the callbacks of replies) leaves in one gathered write after the pass.
  inPass_ = true;
  const bool more = parseFrames();
  inPass_ = false;
  if (round_ == nullptr && !writes_.empty() && writing_ == 0 && (!closed_ || lingering_)) {
    writeNext();
  }
  if (!more) return;
  // One clock read per pass, not per frame: the idle timeout and owedSince() need no finer time.
  if (framesRead_ != framesBefore) {
    if (!pending_.empty() || options_.idleTimeout.count() > 0) {
      const Clock::time_point now = steadyNow();
      lastFrameAt_ = now;
      owedSince_ = pending_.empty() ? Clock::time_point::max() : now;
    } else {
      owedSince_ = Clock::time_point::max();
    }
  }
  if (ec) {
    const std::size_t partial = inEnd_ - inBegin_;
    if (ec == asio::error::eof && haveHeader_) {
      failProtocol(header_.requestId, header_.type,
                   Error(Errc::malformed_message,
                         "frame truncated: connection closed after " + std::to_string(partial) +
                             " of " + std::to_string(header_.bodyLength) + " body bytes (" +
                             messageTypeName(header_.type) + " frame)"));
    } else if (ec == asio::error::eof && partial > 0) {
      failProtocol(0, MessageType::kHello,
                   Error(Errc::malformed_message,
                         "frame truncated: connection closed after " + std::to_string(partial) +
                             " of " + std::to_string(kFrameHeaderBytes) + " header bytes"));
    } else {
      onReadError(ec);
    }
    return;
  }
  readMore();
}

void Connection::onReadError(const std::error_code& ec) {
  if (ec == asio::error::operation_aborted) return;  // we closed the socket
  closeNow(Error(Errc::unreachable, ec == asio::error::eof ? "closed by peer" : ec.message()));
}

void Connection::dispatch(Frame frame) {
  if (frame.header.isResponse() && frame.header.requestId == 0 && frame.header.isError()) {
    // Not an answer to any request of ours: the peer refuses the connection itself (too many
    // connections, a bad frame) and closes it. Its reason becomes ours.
    closeNow(decodeErrorReply(frame.body, remote_), /*deferCallbacks=*/true);
    return;
  }
  if (frame.header.isResponse()) {
    auto it = pending_.find(frame.header.requestId);
    if (it == pending_.end()) return;  // timed out already, or never ours: ignore
    Pending answered = std::move(it->second);
    pending_.erase(it);
    if (frame.header.isError()) {
      answered.done(decodeErrorReply(frame.body, remote_));
    } else {
      answered.done(std::move(frame));
    }
    return;
  }
  const FrameHeader request = frame.header;
  try {
    handler_.onRequest(shared_from_this(), std::move(frame));
  } catch (const std::exception& e) {
    // A body the handler could not decode must not take the node down (invariant 11).
    if (!closed_) {
      sendError(request,
                Error(Errc::malformed_message, std::string(messageTypeName(request.type)) +
                                                   " request could not be handled: " + e.what()));
    }
  }
}

void Connection::enqueue(const FrameHeader& header, std::string body) {
  FrameHeader h = header;
  h.bodyLength = static_cast<std::uint32_t>(body.size());
  if (options_.faults && options_.faults->active() && h.type != MessageType::kHello) {
    const FrameFaults::Decision d = options_.faults->decide(localIp_, remoteIp_, h.type);
    if (d.drop) return;
    if (d.delay.count() > 0) {
      auto timer = std::make_shared<Timer>(stream_.executor(), d.delay);
      timer->async_wait([self = shared_from_this(), timer, bytes = encodeHeader(h),
                         body = std::move(body), twice = d.duplicate](std::error_code) mutable {
        if (self->closed_) return;  // held for a connection that closed meanwhile: gone
        if (twice) self->write(bytes, body);
        self->write(bytes, std::move(body));
      });
      return;
    }
    if (d.duplicate) write(encodeHeader(h), body);
  }
  write(encodeHeader(h), std::move(body));
}

void Connection::write(HeaderBytes header, std::string body) {
  const std::size_t bytes = header.size() + body.size();
  if (options_.maxQueuedBytes > 0 && peerId == 0 && !lingering_ &&
      queuedBytes_ + bytes > options_.maxQueuedBytes) {
    // A peer that sends but does not read: its replies pile up here. Drop it, not the node.
    if (!closed_) {
      closeNow(Error(Errc::overloaded, remote_ + " does not read what is sent to it: " +
                                           std::to_string(queuedBytes_ + bytes) +
                                           " bytes would be queued, more " + "than the limit of " +
                                           std::to_string(options_.maxQueuedBytes)),
               /*deferCallbacks=*/true);
    }
    return;
  }
  queuedBytes_ += bytes;
  writes_.push_back(Outgoing{header, std::move(body)});
  if (writing_ != 0) return;  // leaves with the next write, once the one in flight completes
  if (round_ != nullptr && onOwnThread()) {
    if (writes_.size() >= kMaxGatheredFrames) {
      writeNext();  // a whole write's worth: waiting for the round's end would gain nothing
      return;
    }
    // Written at the end of the round, with whatever the round's other handlers queue here.
    if (!deferred_) {
      deferred_ = true;
      round_->defer(shared_from_this());
    }
    return;
  }
  if (!inPass_) writeNext();  // in a read pass (TLS): written once the pass ends
}

void Connection::flushDeferred() {
  deferred_ = false;
  if (!writes_.empty() && writing_ == 0 && (!closed_ || lingering_)) writeNext();
}

void Connection::sendDeferredNow() {
  // (only plain TCP and simulated streams defer)
  if (!deferred_ || writing_ != 0 || writes_.empty()) return;
  gatherWrites();
  // One try, as the first attempt of an async write would make: what the kernel takes now leaves.
  std::error_code ignored;
  if (Stream::Tcp* tcp = stream_.tcp()) {
    tcp->non_blocking(true, ignored);
    tcp->send(gather_, 0, ignored);
  } else {
    stream_.sim()->send(gather_, ignored);
  }
  writes_.clear();
  queuedBytes_ = 0;
  frontSent_ = 0;
}

std::pair<std::size_t, std::size_t> Connection::gatherWrites() {
  gather_.clear();
  std::size_t bytes = 0;
  std::size_t frames = 0;
  for (const Outgoing& o : writes_) {  // deque: elements stay put while later frames queue
    if (frames == kMaxGatheredFrames || (frames > 0 && bytes >= kMaxGatheredBytes)) break;
    gather_.push_back(asio::buffer(o.header));
    if (!o.body.empty()) gather_.push_back(asio::buffer(o.body));
    bytes += o.header.size() + o.body.size();
    ++frames;
  }
  if (frontSent_ > 0) {  // the front frame left in part: the rest of it goes first
    std::size_t skip = frontSent_;
    bytes -= skip;
    std::size_t i = 0;
    while (skip >= gather_[i].size()) skip -= gather_[i++].size();
    gather_.erase(gather_.begin(), gather_.begin() + static_cast<std::ptrdiff_t>(i));
    gather_.front() += skip;
  }
  return {frames, bytes};
}

bool Connection::writeNow() {
  Stream::Tcp* tcp = stream_.tcp();
  std::error_code ec;
  if (tcp != nullptr && !tcp->non_blocking()) tcp->non_blocking(true, ec);
  // Bounded: a queue of many writes' worth is left to the async write after a few.
  for (int attempt = 0; attempt < 4 && !ec && !writes_.empty(); ++attempt) {
    const auto [frames, bytes] = gatherWrites();
    ++writesStarted_;
    std::size_t sent =
        tcp != nullptr ? tcp->send(gather_, 0, ec) : stream_.sim()->send(gather_, ec);
    if (ec) sent = 0;  // would_block: the kernel's buffer is full; else the async write reports it
    sent += frontSent_;
    frontSent_ = 0;
    for (std::size_t i = 0; i < frames; ++i) {
      const std::size_t size = writes_.front().header.size() + writes_.front().body.size();
      if (sent < size) {
        frontSent_ = sent;
        return false;
      }
      sent -= size;
      queuedBytes_ -= size;
      StringPool::give(std::move(writes_.front().body));
      writes_.pop_front();
    }
  }
  return writes_.empty();
}

void Connection::writeNext() {
  if (stream_.tls() == nullptr && !closed_ && !lingering_ && writeNow()) return;
  // Everything queued so far goes out in one gathered write (bounded per write), so a round that
  // produced many frames costs one system call.
  const auto [frames, bytes] = gatherWrites();
  writing_ = frames;
  ++writesStarted_;
  if (stream_.tls() != nullptr && gather_.size() > 1) {
    tlsOut_.resize(bytes);
    asio::buffer_copy(asio::buffer(tlsOut_), gather_);
    gather_.assign(1, asio::buffer(tlsOut_));
  }
  stream_.asyncWrite(gather_, [self = shared_from_this()](const std::error_code& ec, std::size_t) {
    const std::size_t written = std::exchange(self->writing_, 0);
    if (ec) {
      self->writes_.clear();
      self->queuedBytes_ = 0;
      self->frontSent_ = 0;
      if (!self->closed_) {
        self->closeNow(Error(Errc::unreachable, "write failed: " + ec.message()));
      } else if (self->lingering_) {
        self->closeSocket();
      }
      return;
    }
    self->frontSent_ = 0;  // the write took the rest of the front frame too
    for (std::size_t i = 0; i < written; ++i) {
      self->queuedBytes_ -= self->writes_[i].header.size() + self->writes_[i].body.size();
      StringPool::give(std::move(self->writes_[i].body));
    }
    self->writes_.erase(self->writes_.begin(),
                        self->writes_.begin() + static_cast<std::ptrdiff_t>(written));
    if (!self->writes_.empty()) {
      if (!self->closed_ || self->lingering_) self->writeNext();
    } else if (self->lingering_) {
      self->drainUntilEof();
    }
  });
}

void Connection::failProtocol(std::uint64_t requestId, MessageType type, const Error& error) {
  if (closed_) return;
  lingering_ = true;
  FrameHeader request;
  request.type = type;
  request.requestId = requestId;
  sendError(request, error);
  lingerTimer_.expires_after(kLinger);
  lingerTimer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
    if (!ec) self->closeSocket();
  });
  closeNow(error);
}

void Connection::drainUntilEof() {
  // Our FIN goes after the error reply; reading until the peer's EOF keeps unread input from
  // turning our close into a reset that could destroy the reply before the peer reads it.
  stream_.shutdownSend();
  drainRead();
}

void Connection::drainRead() {
  stream_.asyncReadSome(asio::buffer(drainBuf_),
                        [self = shared_from_this()](const std::error_code& ec, std::size_t) {
                          if (ec) {
                            self->closeSocket();
                          } else if (self->stream_.isOpen()) {
                            self->drainRead();
                          }
                        });
}

void Connection::closeSocket() {
  lingerTimer_.cancel();
  stream_.close();
}

void Connection::closeNow(const Error& reason, bool deferCallbacks) {
  if (closed_) return;
  closed_ = true;
  open_.store(false, std::memory_order_release);
  closeReason_ = reason;
  if (options_.budget) options_.budget->give(std::exchange(charged_, 0));
  if (!lingering_) {
    sendDeferredNow();
    closeSocket();  // cancels the read and any write in flight
  }
  deadlineTimer_.cancel();
  silenceTimer_.cancel();
  armedFor_ = Clock::time_point::max();
  deadlines_.clear();
  auto notify = [self = shared_from_this(), pending = std::exchange(pending_, {}),
                 listeners = std::exchange(closeListeners_, {}), reason]() mutable {
    // A refusal for want of credentials is final (retrying cannot help); anything else leaves
    // the requests' fate unknown.
    const Error failure(reason == Errc::unauthenticated ? Errc::unauthenticated : Errc::unreachable,
                        "connection to " + self->remote_ + " closed: " + describe(reason));
    // In request order, not the hash table's (which depends on where the table lives).
    std::vector<std::uint64_t> ids;
    ids.reserve(pending.size());
    for (const auto& [id, p] : pending) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (std::uint64_t id : ids) pending.find(id)->second.done(failure);
    for (auto& listener : listeners) listener(reason);
    self->handler_.onClosed(self, reason);
  };
  if (deferCallbacks) {
    asio::post(stream_.executor(), std::move(notify));
  } else {
    notify();
  }
}

}  // namespace ingrid
