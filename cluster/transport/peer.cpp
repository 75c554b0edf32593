#include "cluster/transport/peer.h"

#include <algorithm>
#include <utility>

#include <asio/post.hpp>

namespace ingrid {
namespace {

std::string describe(const Error& error) {
  return error.detail().empty() ? error.code().message() : error.detail();
}

}  // namespace

std::shared_ptr<Peer> Peer::create(Transport& transport, std::string address, PeerOptions options) {
  std::shared_ptr<Peer> peer(new Peer(transport, std::move(address), std::move(options)));
  if (peer->options_.dial) {
    asio::post(transport.io(), [peer] { peer->dialNow(); });
  }
  return peer;
}

Peer::Peer(Transport& transport, std::string address, PeerOptions options)
    : transport_(transport),
      address_(std::move(address)),
      options_(std::move(options)),
      backoffTimer_(transport.io()),
      backoff_(std::max(options_.backoffMin, std::chrono::milliseconds(1))) {}

// Reached when no handler holds the peer any more, possibly while the io_context is destroyed:
// nothing here may post or call back. Queued requests keep the peer alive, so none is left.
Peer::~Peer() = default;

std::chrono::steady_clock::time_point Peer::unansweredSince() const noexcept {
  auto oldest = conn_ ? conn_->owedSince() : std::chrono::steady_clock::time_point::max();
  for (const auto& [id, q] : queue_) oldest = std::min(oldest, q.deadline - q.timeout);
  return oldest;
}

bool Peer::connected() const noexcept { return connectedFlag_.load(std::memory_order_acquire); }

void Peer::request(MessageType type, std::uint64_t topologyVersion, std::string body,
                   std::chrono::milliseconds timeout, Connection::ResponseHandler done) {
  if (transport_.io().get_executor().running_in_this_thread() && !closed_ && ready_ && conn_ &&
      conn_->isOpen()) {
    // On the network thread with a connection ready: hand over without a re-post.
    conn_->request(type, topologyVersion, std::move(body), timeout, std::move(done));
    return;
  }
  asio::post(transport_.io(), [self = shared_from_this(), type, topologyVersion,
                               body = std::move(body), timeout, done = std::move(done)]() mutable {
    self->startRequest(type, topologyVersion, std::move(body), timeout, std::move(done));
  });
}

void Peer::notify(MessageType type, std::uint64_t topologyVersion, std::string body,
                  std::chrono::milliseconds timeout) {
  auto linked = [this] { return !closed_ && ready_ && conn_ && conn_->isOpen(); };
  if (transport_.io().get_executor().running_in_this_thread() && linked()) {
    conn_->notify(type, topologyVersion, std::move(body));
    return;
  }
  asio::post(transport_.io(), [self = shared_from_this(), linked, type, topologyVersion,
                               body = std::move(body), timeout]() mutable {
    if (linked()) {
      self->conn_->notify(type, topologyVersion, std::move(body));
    } else {
      self->startRequest(type, topologyVersion, std::move(body), timeout, [](Result<Frame>) {});
    }
  });
}

void Peer::startRequest(MessageType type, std::uint64_t topologyVersion, std::string body,
                        std::chrono::milliseconds timeout, Connection::ResponseHandler done) {
  if (closed_) {
    done(Error(Errc::shutting_down, "peer " + address_ + " is closed"));
    return;
  }
  if (ready_ && conn_ && conn_->isOpen()) {  // closed but not yet told: queue for the next one
    conn_->request(type, topologyVersion, std::move(body), timeout, std::move(done));
    return;
  }
  if (queue_.size() >= options_.maxQueued) {
    done(Error(Errc::overloaded, std::to_string(queue_.size()) +
                                     " requests already wait for a connection to " + address_ +
                                     " (PeerOptions.maxQueued)"));
    return;
  }
  // No connection and none coming (dialOnDemand): this request asks for one, at once after a
  // clean close, after the current backoff after failed dials.
  const bool wantDial = options_.dialOnDemand && options_.dial && !conn_ && !dialing_;
  const std::uint64_t id = nextQueued_++;
  auto timer = std::make_unique<Timer>(transport_.io(), timeout);
  timer->async_wait([self = shared_from_this(), id](const std::error_code& ec) {
    if (!ec) self->expire(id);
  });
  queue_.emplace(id, Queued{type, topologyVersion, std::move(body), timeout, steadyNow() + timeout,
                            std::move(done), std::move(timer)});
  if (wantDial) {
    if (backoff_ <= std::max(options_.backoffMin, std::chrono::milliseconds(1))) {
      dialNow();
    } else {
      scheduleDial();
    }
  }
}

void Peer::expire(std::uint64_t id) {
  auto it = queue_.find(id);
  if (it == queue_.end()) return;  // sent or failed meanwhile
  Queued expired = std::move(it->second);
  queue_.erase(it);
  std::string why = lastError_;
  if (why.empty() && conn_ && !ready_) {
    why = "connected, but no reply to Hello yet";
  } else if (why.empty()) {
    why = options_.dial ? "not connected yet" : "waiting for the peer to connect to us";
  }
  expired.done(Error(Errc::unreachable, "no connection to " + address_ + " within " +
                                            std::to_string(expired.timeout.count()) +
                                            " ms: " + why));
}

void Peer::adopt(std::shared_ptr<Connection> conn) {
  asio::post(transport_.io(), [self = shared_from_this(), conn = std::move(conn)]() mutable {
    if (self->closed_ || !conn) return;
    if (self->conn_ && self->conn_->isOpen()) {
      // Keep the older connection, and this one as its spare: the older may be a stale link (a
      // former member's, dialed to this address before it was restarted) that its owner closes
      // once it sees whom it reached, and on this side only the member with the smaller id dials,
      // so without the spare nothing would carry our frames to that member again.
      self->spare_ = std::move(conn);
      return;
    }
    self->useConnection(std::move(conn), /*dialed=*/false);
  });
}

void Peer::abandonQueued(std::string why) {
  asio::post(transport_.io(), [self = shared_from_this(), why = std::move(why)] {
    if (!self->closed_) self->failQueued(why);
  });
}

void Peer::close() {
  asio::io_context& io = transport_.io();
  if (io.get_executor().running_in_this_thread() || io.stopped()) {
    closeNow(/*deferCallbacks=*/true);  // so that the connection closes even if io stops next
  } else {
    asio::post(io, [self = shared_from_this()] { self->closeNow(false); });
  }
}

void Peer::abandon(std::string why) {
  asio::post(transport_.io(), [self = shared_from_this(), why = std::move(why)] {
    self->closeNow(false, Error(Errc::unavailable, "not sent to " + self->address_ + ": " + why),
                   Error(Errc::unreachable, "no answer from " + self->address_ + ": " + why));
  });
}

void Peer::closeNow(bool deferCallbacks) {
  const Error reason(Errc::shutting_down, "peer " + address_ + " closed");
  closeNow(deferCallbacks, reason, reason);
}

void Peer::closeNow(bool deferCallbacks, const Error& reason, const Error& sent) {
  if (closed_) return;
  closed_ = true;
  backoffTimer_.cancel();
  auto queued = std::exchange(queue_, {});
  for (auto& [id, q] : queued) q.timer->cancel();
  auto fail = [queued = std::move(queued), reason]() mutable {
    for (auto& [id, q] : queued) q.done(reason);
  };
  if (deferCallbacks) {
    asio::post(transport_.io(), std::move(fail));
  } else {
    fail();
  }
  if (conn_) conn_->close(sent);
  conn_.reset();
  if (spare_) spare_->close(sent);
  spare_.reset();
  ready_ = false;
  connectedFlag_.store(false, std::memory_order_release);
}

void Peer::dialNow() {
  if (closed_ || dialing_ || conn_) return;
  dialing_ = true;
  transport_.connect(
      address_,
      [weak = weak_from_this()](Result<std::shared_ptr<Connection>> result) mutable {
        auto self = weak.lock();
        if (!self) {
          if (result) result.value()->close(Error(Errc::shutting_down, "peer gone"));
          return;
        }
        self->onDialed(std::move(result));
      },
      options_.dialTimeout);
}

void Peer::scheduleDial() {
  if (closed_ || !options_.dial || dialing_ || conn_) return;
  if (options_.dialOnDemand && queue_.empty()) return;  // the next request dials
  dialing_ = true;
  backoffTimer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, std::max(options_.backoffMax, backoff_));
  backoffTimer_.async_wait([weak = weak_from_this()](const std::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) {
      self->dialing_ = false;
      self->dialNow();
    }
  });
}

void Peer::onDialed(Result<std::shared_ptr<Connection>> result) {
  dialing_ = false;
  if (closed_) {
    if (result) result.value()->close(Error(Errc::shutting_down, "peer " + address_ + " closed"));
    return;
  }
  if (!result) {
    dialFailedAt_.store(std::max<std::int64_t>(1, steadyNow().time_since_epoch().count()),
                        std::memory_order_relaxed);
    lastError_ = describe(result.error());
    if (result.error() == Errc::shutting_down) {  // the transport stopped: no more dialing
      closeNow(false);
      return;
    }
    if (options_.failQueuedOnDialError) failQueued("cannot connect to " + address_);
    scheduleDial();
    return;
  }
  if (conn_ && conn_->isOpen()) {  // an adopted connection won the race; keep it
    result.value()->close(
        Error(Errc::unavailable, "duplicate connection to " + address_ + "; keeping the older"));
    return;
  }
  dialFailedAt_.store(0, std::memory_order_relaxed);
  useConnection(std::move(result).value(), /*dialed=*/true);
}

std::optional<std::chrono::steady_clock::time_point> Peer::lastDialFailure() const noexcept {
  const std::int64_t at = dialFailedAt_.load(std::memory_order_relaxed);
  if (at == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(at));
}

void Peer::useConnection(std::shared_ptr<Connection> conn, bool dialed) {
  conn_ = std::move(conn);
  const bool hello = dialed && options_.helloBody;
  // A dialed connection speaks for the member only once its Hello reply was accepted. An adopted
  // one usually says so already (its owner set it on the Hello or Auth): written only if not,
  // since partition workers may read it meanwhile (a frame pipelined behind the Auth).
  if (options_.peerId != 0 && !hello && conn_->peerId != options_.peerId) {
    conn_->peerId = options_.peerId;
  }
  const std::uint64_t generation = ++generation_;
  ready_ = false;
  connectedFlag_.store(false, std::memory_order_release);
  conn_->onClose([weak = weak_from_this(), generation](const Error& reason) {
    if (auto self = weak.lock()) self->onConnectionClosed(generation, reason);
  });
  if (!hello) {
    markReady();
    return;
  }
  helloSent_ = options_.helloBody();
  conn_->request(MessageType::kHello, 0, helloSent_, transport_.options().connectTimeout,
                 [weak = weak_from_this(), generation](Result<Frame> reply) mutable {
                   if (auto self = weak.lock()) self->onHello(generation, std::move(reply));
                 });
}

void Peer::onHello(std::uint64_t generation, Result<Frame> reply) {
  if (closed_ || generation != generation_ || !conn_) return;
  std::string refused;
  if (!reply) {
    refused = reply.error().message();
  } else if (options_.checkHello) {
    refused = options_.checkHello(helloSent_, reply.value());
  }
  if (!refused.empty()) {
    // The close event reconnects after the current backoff, which keeps doubling.
    lastError_ = "Hello refused by " + address_ + ": " + refused;
    if (options_.failQueuedOnDialError) failQueued("Hello refused by " + address_);
    conn_->close(Error(Errc::unavailable, lastError_));
    return;
  }
  if (options_.peerId != 0) conn_->peerId = options_.peerId;
  if (options_.authBody) {
    std::string auth = options_.authBody(helloSent_, reply.value());
    if (!auth.empty()) {
      // Frames on a connection are handled in order: the Auth is checked before what follows.
      conn_->request(MessageType::kAuth, 0, std::move(auth), transport_.options().connectTimeout,
                     [weak = weak_from_this(), generation](Result<Frame> answer) {
                       auto self = weak.lock();
                       if (!self || answer || self->generation_ != generation || !self->conn_) {
                         return;
                       }
                       self->lastError_ =
                           "Auth refused by " + self->address_ + ": " + answer.error().message();
                       self->conn_->close(Error(Errc::unavailable, self->lastError_));
                     });
    }
  }
  markReady();
}

void Peer::failQueued(const std::string& why) {
  auto queued = std::exchange(queue_, {});
  for (auto& [id, q] : queued) {
    q.timer->cancel();
    q.done(Error(Errc::unavailable, "not sent: " + why + ": " + lastError_));
  }
}

void Peer::markReady() {
  ready_ = true;
  lastError_.clear();
  backoff_ = std::max(options_.backoffMin, std::chrono::milliseconds(1));
  connectedFlag_.store(true, std::memory_order_release);
  flush();
}

void Peer::onConnectionClosed(std::uint64_t generation, const Error& reason) {
  if (generation != generation_) return;  // an older connection
  // Keep a Hello refusal (or an earlier connect error) over a close that followed it.
  if (ready_ || lastError_.empty()) lastError_ = "connection closed: " + describe(reason);
  conn_.reset();
  ready_ = false;
  connectedFlag_.store(false, std::memory_order_release);
  if (auto spare = std::exchange(spare_, nullptr); spare && spare->isOpen()) {
    useConnection(std::move(spare), /*dialed=*/false);  // the member's other link takes over
    return;
  }
  scheduleDial();
}

void Peer::flush() {
  const auto now = steadyNow();
  auto queued = std::exchange(queue_, {});
  for (auto& [id, q] : queued) {
    q.timer->cancel();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(q.deadline - now);
    if (left.count() <= 0) {  // its timer fired but has not run yet
      q.done(Error(Errc::unreachable, "no connection to " + address_ + " within " +
                                          std::to_string(q.timeout.count()) + " ms"));
      continue;
    }
    conn_->request(q.type, q.topologyVersion, std::move(q.body), left, std::move(q.done));
  }
}

}  // namespace ingrid
