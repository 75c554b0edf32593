#include "cluster/transport/sim_network.h"

#include <algorithm>

#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>

#include "cluster/transport/address.h"

namespace ingrid {
// Named, not anonymous: SimNetwork's nested types hold a Waiting (GCC's -Wsubobject-linkage in a
// unity build, where this file is an included one).
namespace sim_network_detail {

// A handler waiting for its operation, and the work that keeps its io_context from running out
// while it waits (as a socket's pending operation does: io_context::poll() stops a context that
// has no work left, and then runs nothing posted later until restarted).
template <class Signature>
struct Waiting {
  UniqueFunction<Signature> handler;
  asio::any_io_executor work;  // outstanding_work.tracked while a handler waits

  explicit operator bool() const noexcept { return static_cast<bool>(handler); }
  void hold(UniqueFunction<Signature> h, const asio::any_io_executor& executor) {
    handler = std::move(h);
    work = asio::prefer(executor, asio::execution::outstanding_work.tracked);
  }
  // Posts the handler with `args` (the post keeps the context busy), then lets the work go.
  template <class... Args>
  void post(Args... args) {
    asio::post(work, [h = std::move(handler), args...]() mutable { h(std::move(args)...); });
    handler = {};
    work = {};
  }
  // A crash: the handler is handed back to be destroyed uncalled.
  UniqueFunction<Signature> drop() {
    work = {};
    return std::exchange(handler, {});
  }
};

}  // namespace sim_network_detail
using sim_network_detail::Waiting;

struct SimNetwork::Segment {
  enum class Kind { kData, kFin, kRst };
  Kind kind = Kind::kData;
  std::string bytes;
  SteadyTime due{};  // in the receiving member's time

  static Segment of(Kind kind, std::string bytes = {}) {
    Segment s;
    s.kind = kind;
    s.bytes = std::move(bytes);
    return s;
  }
};

struct SimNetwork::End {
  enum class State { kIdle, kConnecting, kOpen, kClosed };

  SimNetwork* network = nullptr;
  SimulatedMember* member = nullptr;  // null once its member crashed (closeAll)
  asio::any_io_executor executor;
  std::uint64_t id = 0;
  State state = State::kIdle;
  std::string host, address, peerHost, peerAddress;
  std::weak_ptr<End> peer;
  bool sendShut = false;  // our FIN is sent
  bool eof = false;       // the peer's FIN arrived
  bool wasReset = false;  // reset here, or the peer's RST arrived
  std::string inbox;      // delivered, not yet read
  // In flight to this end, in order; due times in member's time, never decreasing.
  std::deque<Segment> incoming;
  SteadyTime lastDue{};
  std::uint64_t pumpEvent = 0;  // member's event that delivers incoming.front(); 0: none
  bool stalled = false;         // incoming.front() is due and held by a cut (no event)
  std::uint64_t dialEvent = 0;  // kConnecting: member's event that answers the dial
  std::vector<asio::mutable_buffer> readBuffers;
  Waiting<void(std::error_code, std::size_t)> reading;
  Waiting<void(std::error_code)> connecting;
};

struct SimNetwork::Listener {
  SimNetwork* network = nullptr;
  SimulatedMember* member = nullptr;
  asio::any_io_executor executor;
  std::string host, address;
  std::uint16_t port = 0;
  bool listening = false;
  bool closed = false;
  std::deque<std::shared_ptr<End>> backlog;  // connected, not yet accepted
  Waiting<void(std::error_code, std::shared_ptr<End>)> accepting;
};

SimNetwork::~SimNetwork() = default;

void SimNetwork::cut(const std::string& fromHost, const std::string& toHost) {
  cuts_.insert({fromHost, toHost});
}

void SimNetwork::heal(const std::string& fromHost, const std::string& toHost) {
  if (cuts_.erase({fromHost, toHost}) == 0) return;
  std::vector<std::shared_ptr<End>> stalled;
  for (const auto& [id, weak] : ends_) {
    auto end = weak.lock();
    if (end && end->stalled && end->peerHost == fromHost && end->host == toHost) {
      stalled.push_back(std::move(end));
    }
  }
  for (const auto& end : stalled) {
    end->stalled = false;
    if (end->member == nullptr || end->incoming.empty()) continue;
    // What was held leaves now, a fresh latency later, in its order.
    auto writer = end->peer.lock();
    const SteadyTime base =
        end->member->now() + draw(writer && writer->member ? writer->member : end->member);
    for (Segment& s : end->incoming) s.due = std::max(s.due, base);
    end->lastDue = std::max(end->lastDue, end->incoming.back().due);
    schedulePump(end);
  }
}

bool SimNetwork::isCut(const std::string& fromHost, const std::string& toHost) const {
  return cuts_.contains({fromHost, toHost});
}

void SimNetwork::reset(const std::string& host) {
  std::vector<std::shared_ptr<End>> hit;
  for (const auto& [id, weak] : ends_) {
    auto end = weak.lock();
    if (end && end->host == host && end->state == End::State::kOpen) hit.push_back(std::move(end));
  }
  for (const auto& end : hit) resetEnd(*end, /*notifyPeer=*/true);
}

void SimNetwork::closeAll(SimulatedMember& member) {
  std::vector<std::shared_ptr<End>> mine;
  for (const auto& [id, weak] : ends_) {
    auto end = weak.lock();
    if (end && end->member == &member) mine.push_back(std::move(end));
  }
  // Handlers of the crashed member are destroyed uncalled, once the network's state is settled
  // (destroying one may close a stream: that finds its end closed already).
  std::vector<UniqueFunction<void(std::error_code, std::size_t)>> reads;
  std::vector<UniqueFunction<void(std::error_code)>> connects;
  std::vector<UniqueFunction<void(std::error_code, std::shared_ptr<End>)>> accepts;
  for (const auto& end : mine) {
    if (end->state == End::State::kOpen) {
      auto peer = end->peer.lock();
      if (peer && peer->member != &member)
        transmit(&member, peer, Segment::of(Segment::Kind::kRst));
    }
    if (end->pumpEvent != 0) member.cancel(end->pumpEvent);
    if (end->dialEvent != 0) member.cancel(end->dialEvent);
    end->pumpEvent = end->dialEvent = 0;
    reads.push_back(end->reading.drop());
    connects.push_back(end->connecting.drop());
    end->state = End::State::kClosed;
    end->member = nullptr;
    end->incoming.clear();
    end->inbox.clear();
    unregister(*end);
  }
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    auto listener = it->second.lock();
    if (listener && listener->member == &member) {
      listener->closed = true;
      accepts.push_back(listener->accepting.drop());
      listener->backlog.clear();  // their ends are the member's: closed above
      it = listeners_.erase(it);
    } else {
      ++it;
    }
  }
}

void SimNetwork::kill(SimulatedMember& member) {
  closeAll(member);
  dead_.insert(&member);
}

std::shared_ptr<SimNetwork::End> SimNetwork::makeEnd(SimulatedMember& member,
                                                     asio::any_io_executor executor) {
  auto end = std::make_shared<End>();
  end->network = this;
  end->member = &member;
  end->executor = std::move(executor);
  end->id = nextEndId_++;
  end->host = member.host();
  ends_.emplace(end->id, end);
  return end;
}

std::error_code SimNetwork::listen(const std::shared_ptr<Listener>& listener,
                                   const std::string& host, std::uint16_t port) {
  auto inUse = [this](const std::string& address) {
    auto it = listeners_.find(address);
    return it != listeners_.end() && !it->second.expired();
  };
  if (port == 0) {
    auto it = nextListenPort_.try_emplace(host, kFirstListenPort).first;
    while (inUse(joinAddress(host, it->second))) ++it->second;
    port = it->second++;
  }
  if (listener->member != nullptr && dead_.count(listener->member) != 0) {
    return std::make_error_code(std::errc::address_not_available);
  }
  const std::string address = joinAddress(host, port);
  if (inUse(address)) return asio::error::address_in_use;
  listener->host = host;
  listener->port = port;
  listener->address = address;
  listener->listening = true;
  listeners_[address] = listener;
  return {};
}

void SimNetwork::unlisten(Listener& listener) {
  if (listener.closed) return;
  listener.closed = true;
  if (listener.listening) {
    auto it = listeners_.find(listener.address);
    if (it != listeners_.end() && it->second.lock().get() == &listener) listeners_.erase(it);
  }
  if (listener.accepting) {
    listener.accepting.post(std::error_code(asio::error::operation_aborted),
                            std::shared_ptr<End>());
  }
  std::deque<std::shared_ptr<End>> backlog = std::move(listener.backlog);
  listener.backlog.clear();
  for (const auto& end : backlog) {  // connected, never accepted: the dialer reads a reset
    resetEnd(*end, /*notifyPeer=*/true);
    close(*end);
  }
}

void SimNetwork::accept(const std::shared_ptr<Listener>& listener,
                        UniqueFunction<void(std::error_code, std::shared_ptr<End>)> handler) {
  if (listener->closed || !listener->listening) {
    asio::post(listener->executor,
               [h = std::move(handler)]() mutable { h(asio::error::bad_descriptor, nullptr); });
    return;
  }
  if (!listener->backlog.empty()) {
    std::shared_ptr<End> end = std::move(listener->backlog.front());
    listener->backlog.pop_front();
    asio::post(listener->executor,
               [h = std::move(handler), end = std::move(end)]() mutable { h({}, std::move(end)); });
    return;
  }
  listener->accepting.hold(std::move(handler), listener->executor);
}

void SimNetwork::connect(const std::shared_ptr<End>& end, const std::string& address,
                         UniqueFunction<void(std::error_code)> handler) {
  auto fail = [&](std::error_code ec) {
    asio::post(end->executor, [h = std::move(handler), ec]() mutable { h(ec); });
  };
  if (end->state == End::State::kClosed) return fail(asio::error::bad_descriptor);
  if (end->state != End::State::kIdle) return fail(asio::error::already_started);
  if (end->member == nullptr || dead_.count(end->member) != 0) {
    return fail(asio::error::host_unreachable);
  }
  auto it = listeners_.find(address);
  if (it == listeners_.end() || it->second.expired()) return fail(asio::error::connection_refused);
  end->state = End::State::kConnecting;
  end->peerAddress = address;
  end->connecting.hold(std::move(handler), end->executor);
  SimulatedMember& member = *end->member;
  end->dialEvent = member.schedule(member.now() + draw(&member),
                                   [this, weak = std::weak_ptr<End>(end), address] {
                                     auto dialer = weak.lock();
                                     if (!dialer || dialer->state != End::State::kConnecting)
                                       return;
                                     dialer->dialEvent = 0;
                                     answerDial(dialer, address);
                                   });
}

void SimNetwork::answerDial(const std::shared_ptr<End>& end, const std::string& address) {
  auto found = listeners_.find(address);
  auto listener = found != listeners_.end() ? found->second.lock() : nullptr;
  if (!listener || listener->closed) {
    end->state = End::State::kIdle;
    end->connecting.post(std::error_code(asio::error::connection_refused));
    return;
  }
  // Across a cut either way, the SYN or its answer is lost: the dial waits until closed.
  if (isCut(end->host, listener->host) || isCut(listener->host, end->host)) return;
  auto port = nextDialPort_.try_emplace(end->host, kFirstDialPort).first;
  end->address = joinAddress(end->host, port->second++);
  auto server = makeEnd(*listener->member, listener->executor);
  server->state = end->state = End::State::kOpen;
  server->address = listener->address;
  server->peerHost = end->host;
  server->peerAddress = end->address;
  server->peer = end;
  end->peerHost = listener->host;
  end->peer = server;
  end->connecting.post(std::error_code());
  if (listener->accepting) {
    listener->accepting.post(std::error_code(), server);
  } else {
    listener->backlog.push_back(std::move(server));
  }
}

void SimNetwork::read(const std::shared_ptr<End>& end, std::vector<asio::mutable_buffer> buffers,
                      UniqueFunction<void(std::error_code, std::size_t)> handler) {
  std::error_code ec;
  if (end->state == End::State::kClosed) {
    ec = asio::error::bad_descriptor;
  } else if (end->state != End::State::kOpen) {
    ec = asio::error::not_connected;
  } else if (end->reading) {
    ec = asio::error::already_started;
  }
  if (ec) {
    asio::post(end->executor, [h = std::move(handler), ec]() mutable { h(ec, 0); });
    return;
  }
  end->readBuffers = std::move(buffers);
  end->reading.hold(std::move(handler), end->executor);
  completeRead(*end);
}

void SimNetwork::completeRead(End& end) {
  if (!end.reading) return;
  std::error_code ec;
  std::size_t n = 0;
  if (!end.inbox.empty()) {
    n = asio::buffer_copy(end.readBuffers, asio::buffer(end.inbox));
    end.inbox.erase(0, n);
  } else if (asio::buffer_size(end.readBuffers) == 0) {
    // as Asio: a read into no room completes at once with nothing
  } else if (end.wasReset) {
    ec = asio::error::connection_reset;
  } else if (end.eof) {
    ec = asio::error::eof;
  } else {
    return;  // waits for bytes
  }
  end.readBuffers.clear();
  end.reading.post(ec, n);
}

std::error_code SimNetwork::send(End& end, std::string bytes) {
  if (end.state == End::State::kClosed) return asio::error::bad_descriptor;
  if (end.state != End::State::kOpen) return asio::error::not_connected;
  if (end.wasReset) return asio::error::connection_reset;
  if (end.sendShut) return asio::error::broken_pipe;
  if (bytes.empty()) return {};
  // To a peer that closed, the bytes are lost (its FIN, on its way or read already, ends this
  // side's reading; real TCP would answer them with a reset).
  if (auto peer = end.peer.lock()) {
    transmit(end.member, peer, Segment::of(Segment::Kind::kData, std::move(bytes)));
  }
  return {};
}

void SimNetwork::shutdownSend(End& end) {
  if (end.state != End::State::kOpen || end.sendShut || end.wasReset) return;
  end.sendShut = true;
  if (auto peer = end.peer.lock()) transmit(end.member, peer, Segment::of(Segment::Kind::kFin));
}

void SimNetwork::close(End& end) {
  if (end.state == End::State::kClosed) return;
  const bool wasOpen = end.state == End::State::kOpen;
  end.state = End::State::kClosed;
  if (end.member != nullptr) {
    if (end.pumpEvent != 0) end.member->cancel(end.pumpEvent);
    if (end.dialEvent != 0) end.member->cancel(end.dialEvent);
  }
  end.pumpEvent = end.dialEvent = 0;
  end.stalled = false;
  end.incoming.clear();
  end.inbox.clear();
  if (end.reading)
    end.reading.post(std::error_code(asio::error::operation_aborted), std::size_t{0});
  if (end.connecting) {  // a dial in progress is cancelled
    end.connecting.post(std::error_code(asio::error::operation_aborted));
  }
  if (wasOpen && !end.sendShut && !end.wasReset) {
    end.sendShut = true;
    if (auto peer = end.peer.lock()) transmit(end.member, peer, Segment::of(Segment::Kind::kFin));
  }
  unregister(end);
}

SteadyTime::duration SimNetwork::draw(SimulatedMember* member) {
  const auto span = options_.maxLatency - options_.minLatency;
  if (member == nullptr || span.count() <= 0) return options_.minLatency;
  const auto range = static_cast<std::uint64_t>(span.count()) + 1;
  return options_.minLatency +
         SteadyTime::duration(static_cast<SteadyTime::rep>(member->random() % range));
}

void SimNetwork::transmit(SimulatedMember* fromMember, const std::shared_ptr<End>& to,
                          Segment segment) {
  if (to->state != End::State::kOpen || to->member == nullptr || to->wasReset) return;
  // Per direction FIFO, in the receiver's time: never before the previous segment.
  segment.due = std::max(to->member->now() + draw(fromMember), to->lastDue);
  to->lastDue = segment.due;
  to->incoming.push_back(std::move(segment));
  if (to->pumpEvent == 0 && !to->stalled) schedulePump(to);
}

void SimNetwork::schedulePump(const std::shared_ptr<End>& to) {
  to->pumpEvent =
      to->member->schedule(to->incoming.front().due, [this, weak = std::weak_ptr<End>(to)] {
        auto end = weak.lock();
        if (!end) return;
        end->pumpEvent = 0;
        pump(end);
      });
}

void SimNetwork::pump(const std::shared_ptr<End>& to) {
  if (to->state != End::State::kOpen || to->member == nullptr) {
    to->incoming.clear();
    return;
  }
  const SteadyTime now = to->member->now();
  while (!to->incoming.empty() && to->incoming.front().due <= now) {
    if (isCut(to->peerHost, to->host)) {  // held until heal()
      to->stalled = true;
      break;
    }
    Segment s = std::move(to->incoming.front());
    to->incoming.pop_front();
    if (s.kind == Segment::Kind::kData) {
      bytesDelivered_ += s.bytes.size();
      ++writesDelivered_;
      to->inbox += s.bytes;
    } else if (s.kind == Segment::Kind::kFin) {
      to->eof = true;
    } else {  // a reset drops what was not read, and what follows
      to->wasReset = true;
      to->inbox.clear();
      to->incoming.clear();
    }
  }
  completeRead(*to);
  if (!to->incoming.empty() && !to->stalled && to->pumpEvent == 0) schedulePump(to);
}

void SimNetwork::resetEnd(End& end, bool notifyPeer) {
  if (end.state != End::State::kOpen || end.wasReset) return;
  end.wasReset = true;
  end.inbox.clear();
  end.incoming.clear();
  end.stalled = false;
  if (end.pumpEvent != 0 && end.member != nullptr) end.member->cancel(end.pumpEvent);
  end.pumpEvent = 0;
  completeRead(end);
  if (!notifyPeer) return;
  if (auto peer = end.peer.lock()) transmit(end.member, peer, Segment::of(Segment::Kind::kRst));
}

void SimNetwork::unregister(End& end) { ends_.erase(end.id); }

// --- SimStream ---

SimStream::SimStream(SimNetwork& network, SimulatedMember& member, asio::any_io_executor executor)
    : end_(network.makeEnd(member, std::move(executor))) {}

SimNetwork& SimStream::network() const { return *end_->network; }

asio::any_io_executor SimStream::executor() const { return end_->executor; }

void SimStream::shutdownSend() {
  if (end_) network().shutdownSend(*end_);
}

void SimStream::close() {
  if (end_) network().close(*end_);
}

bool SimStream::isOpen() const noexcept {
  return end_ && end_->state != SimNetwork::End::State::kClosed;
}

const std::string& SimStream::localHost() const { return end_->host; }
const std::string& SimStream::remoteHost() const { return end_->peerHost; }
const std::string& SimStream::localAddress() const { return end_->address; }
const std::string& SimStream::remoteAddress() const { return end_->peerAddress; }

void SimStream::postWrite(UniqueFunction<void(std::error_code, std::size_t)> handler,
                          std::error_code ec, std::size_t n) {
  asio::post(end_->executor, [h = std::move(handler), ec, n]() mutable { h(ec, n); });
}

// --- SimAcceptor ---

SimAcceptor::SimAcceptor(SimNetwork& network, SimulatedMember& member,
                         asio::any_io_executor executor)
    : network_(network), listener_(std::make_shared<SimNetwork::Listener>()) {
  listener_->network = &network;
  listener_->member = &member;
  listener_->executor = std::move(executor);
}

std::uint16_t SimAcceptor::listen(const std::string& host, std::uint16_t port,
                                  std::error_code& ec) {
  if (listener_->listening || listener_->closed) {
    ec = asio::error::already_open;
    return 0;
  }
  ec = network_.listen(listener_, host, port);
  return ec ? 0 : listener_->port;
}

void SimAcceptor::close() { network_.unlisten(*listener_); }

}  // namespace ingrid
