// Membership from a member's point of view: start (bootstrap or join), stop (leave), the
// two-phase topology install, peers, and the dispatch of incoming requests.
#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <random>
#include <set>
#include <tuple>

#include <ingrid/cluster/node_impl.h>

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kMembershipTimeout{10000};

std::string describeNames(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

namespace {
std::uint64_t randomIncarnation() {
  std::random_device random;
  return (std::uint64_t{random()} << 32) | random();
}
}  // namespace

NodeImpl::NodeImpl(NodeOptions options, ProcessorRegistry registry)
    : options_(std::move(options)),
      registry_(std::move(registry)),
      clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()),
      incarnation_(randomIncarnation()) {}

NodeImpl::~NodeImpl() { stop(); }

Result<bool> NodeImpl::start() {
  if (state_.load() != kCreated) {
    return Error(Errc::not_running, "start(): a Node is started once; this one already was");
  }
  if (options_.partitions == 0) {
    return Error(Errc::invalid_configuration, "NodeOptions.partitions must be > 0");
  }
  if (options_.expirySweepInterval.count() <= 0 || options_.expirySweepBuckets == 0) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.expirySweepInterval and expirySweepBuckets must be > 0");
  }
  std::optional<std::pair<std::string, std::uint16_t>> listen;
  if (!options_.listenAddress.empty()) {
    // Port 0 is allowed here (ephemeral), which parseAddress refuses; check the form by hand.
    const auto colon = options_.listenAddress.rfind(':');
    const auto port =
        colon == std::string::npos ? std::string() : options_.listenAddress.substr(colon + 1);
    if (colon == std::string::npos || colon == 0 || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), ::isdigit) || std::stoul(port) > 65535) {
      return Error(Errc::invalid_configuration,
                   "NodeOptions.listenAddress '" + options_.listenAddress + "' is not host:port");
    }
    listen.emplace(options_.listenAddress.substr(0, colon),
                   static_cast<std::uint16_t>(std::stoul(port)));
  }
  for (const auto& seed : options_.seeds) {
    if (!parseAddress(seed)) {
      return Error(Errc::invalid_configuration, "seed '" + seed + "' is not host:port");
    }
  }
  unsigned threads = options_.workerThreads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_ =
      std::make_unique<PartitionWorkers>(options_.partitions, threads, clock_,
                                         options_.expirySweepInterval, options_.expirySweepBuckets);
  replicas_ = std::make_unique<Replica[]>(options_.partitions);
  {
    auto empty = std::make_shared<Topology>();
    empty->table = PartitionTable(options_.partitions,
                                  std::vector<std::vector<MemberId>>(options_.partitions));
    empty->backups = options_.backups;
    topology_.store(std::move(empty));
  }
  workers_->start();

  if (!listen) {
    Result<bool> made = bootstrap();
    state_.store(kRunning, std::memory_order_release);
    return made;
  }
  TransportOptions topts;
  topts.listenHost = listen->first;
  topts.listenPort = listen->second;
  transport_ = std::make_unique<Transport>(netIo_, topts, *this);
  Result<std::uint16_t> port = transport_->listen();
  if (!port) {
    workers_->stop();
    transport_.reset();
    state_.store(kStopped);
    return std::move(port).error();
  }
  selfAddress_ = transport_->listenAddress();
  netGuard_.emplace(netIo_.get_executor());
  netThread_ = std::thread([this] { netIo_.run(); });
  state_.store(kRunning, std::memory_order_release);
  Result<bool> joined = options_.seeds.empty() ? bootstrap() : join();
  if (!joined) {
    stop();
    return joined;
  }
  asio::post(netIo_, [this] { startHeartbeats(); });
  return joined;
}

Result<bool> NodeImpl::bootstrap() {
  auto t = std::make_shared<Topology>();
  t->version = 1;
  t->members.push_back(MemberInfo{1, selfAddress_, incarnation_});
  const std::vector<MemberId> ids{1};
  t->table = PartitionTable::balanced(options_.partitions, ids, options_.backups);
  t->backups = options_.backups;
  t->nextMemberId = 2;
  for (PartitionId p = 0; p < options_.partitions; ++p) replicas_[p].mode = ReplicaMode::kReady;
  selfId_.store(1, std::memory_order_release);
  topology_.store(t);
  if (options_.onTopology) options_.onTopology(*t);
  if (transport_) {
    std::promise<void> made;
    asio::post(netIo_, [this, &made] {
      coordinator_ = std::make_unique<Coordinator>(static_cast<CoordinatorHost&>(*this));
      made.set_value();
    });
    made.get_future().wait();
  }
  return true;
}

Result<bool> NodeImpl::join() {
  const auto deadline = SteadyClock::now() + options_.joinTimeout;
  JoinRequest request{selfAddress_, options_.partitions, options_.backups, registry_.names(),
                      incarnation_};
  std::deque<std::string> targets(options_.seeds.begin(), options_.seeds.end());
  std::string tried;
  std::string lastError = "no seed answered";
  while (SteadyClock::now() < deadline) {
    if (targets.empty()) {
      targets.assign(options_.seeds.begin(), options_.seeds.end());
      std::unique_lock lock(topoMu_);  // pause briefly between rounds of seeds
      topoCv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    const std::string seed = targets.front();
    targets.pop_front();
    if (tried.find(seed) == std::string::npos) tried += (tried.empty() ? "" : ", ") + seed;
    std::promise<Result<Frame>> answered;
    auto answer = answered.get_future();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    transport_->connect(
        seed, [&answered, &request, left](Result<std::shared_ptr<Connection>> conn) mutable {
          if (!conn) {
            answered.set_value(std::move(conn).error());
            return;
          }
          auto c = conn.value();
          c->request(MessageType::kJoin, 0, encode(request),
                     std::max(left, std::chrono::milliseconds(1)),
                     [&answered, c](Result<Frame> r) mutable {
                       answered.set_value(std::move(r));
                       c->close(Error(Errc::shutting_down, "join finished"));
                     });
        });
    Result<Frame> reply = answer.get();
    if (!reply) {
      if (reply.error() == Errc::join_refused) return std::move(reply).error();
      lastError = seed + ": " + reply.error().message();
      continue;
    }
    try {
      if (reply->header.type == MessageType::kRedirect) {  // not the coordinator: go there
        const Topology t = decode<TopologyBody>(reply->body).topology;
        if (const MemberInfo* c = t.member(t.coordinator())) targets.push_front(c->address);
        continue;
      }
      const JoinReply joined = decode<JoinReply>(reply->body);
      selfId_.store(joined.memberId, std::memory_order_release);
    } catch (const std::exception& e) {
      lastError = seed + ": reply does not decode: " + e.what();
      continue;
    }
    const bool member = waitForTopology(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()),
        [this] { return topology()->hasMember(memberId()); });
    if (member) return true;
    lastError =
        "admitted as member " + std::to_string(memberId()) + " but no topology with it arrived";
    break;
  }
  return Error(Errc::unreachable, "could not join through seeds [" + tried + "] within " +
                                      std::to_string(options_.joinTimeout.count()) +
                                      " ms; last error: " + lastError);
}

bool NodeImpl::waitForTopology(std::chrono::milliseconds limit, const std::function<bool()>& pred) {
  std::unique_lock lock(topoMu_);
  return topoCv_.wait_for(lock, limit, pred);
}

void NodeImpl::leave() {
  const auto deadline = SteadyClock::now() + options_.leaveTimeout;
  const MemberId self = memberId();
  // Gone once a topology without this member is installed here and, if this member was the
  // coordinator, the others have acknowledged it too.
  auto gone = [this, self] { return !topology()->hasMember(self) && commitRounds_.load() == 0; };
  while (!gone() && SteadyClock::now() < deadline) {
    if (topology()->members.size() <= 1) return;  // last member: nothing to hand over
    asio::post(netIo_, [this, self] {
      const TopologyPtr t = topology();
      if (t->coordinator() == self) {
        if (coordinator_) coordinator_->requestLeave(self);
        return;
      }
      const MemberInfo* c = t->member(t->coordinator());
      if (auto peer = c ? peerFor(c->id, c->address) : nullptr) {
        peer->request(MessageType::kLeave, t->version, encode(LeaveBody{self}),
                      options_.requestTimeout, [](Result<Frame>) {});
      }
    });
    waitForTopology(std::chrono::milliseconds(2000), gone);
  }
}

void NodeImpl::stop() {
  if (stopCalled_.exchange(true)) return;  // stopping or stopped elsewhere
  if (state_.load() == kCreated) {
    state_.store(kStopped);
    return;
  }
  // 1. Hand this member's partitions over while still serving (graceful leave), then keep
  //    answering (redirects) for the drain period so that stale senders learn where keys went.
  if (transport_ && state_.load() == kRunning && !crashed_.load()) {
    leave();
    // A grace period, not a condition: the senders it serves (clients with a stale topology)
    // cannot be observed from here; they learn the new owners from the redirects it answers.
    std::this_thread::sleep_for(options_.drainPeriod);
  }
  // 2. Refuse new invocations; let every admitted one finish.
  state_.store(kStopping, std::memory_order_release);
  for (std::int64_t n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  // 3. Close the network: no more requests in or out.
  if (transport_) {
    netGuard_.reset();
    asio::post(netIo_, [this] {
      heartbeatsStopped_ = true;
      heartbeatTimer_.cancel();
      for (auto& [id, peer] : peers_) peer->close();
      peers_.clear();
      transport_->stop();
      // Handlers queued by the closes above may still reach the coordinator: stop first.
      netIo_.stop();
      coordinator_.reset();
    });
    if (netThread_.joinable()) netThread_.join();
  }
  // 4. Drain and join the partition workers.
  if (workers_) workers_->stop();
  state_.store(kStopped, std::memory_order_release);
}

std::shared_ptr<Peer> NodeImpl::peerFor(MemberId id, const std::string& address) {
  return linkTo(id, address, /*dialedByThem=*/false);
}

std::shared_ptr<Peer> NodeImpl::linkTo(MemberId id, const std::string& address, bool dialedByThem) {
  const MemberId self = memberId();
  if (id == 0 || id == self || !transport_) return nullptr;
  if (auto it = peers_.find(id); it != peers_.end()) return it->second;
  PeerOptions o;
  o.dial = self != 0 && self < id;  // one connection per pair: the smaller id dials
  // A link that waits to be dialed, to a member that is not (or no longer) in our topology,
  // would only queue requests until their deadlines: that member will not dial us. The caller
  // routes again instead (a departed primary's partitions have moved).
  if (!o.dial && !dialedByThem && !topology()->hasMember(id)) return nullptr;
  o.failQueuedOnDialError = true;  // a member that refuses connections is gone: route elsewhere
  o.peerId = id;
  o.helloBody = [this] { return encode(HelloBody{HelloBody::kPeer, memberId(), selfAddress_}); };
  // The process at a member's address must be that member: a restarted process there (empty,
  // not yet admitted, or admitted under a new id) must not take the old member's updates.
  o.checkHello = [id](const Frame& reply) -> std::string {
    try {
      const HelloBody hello = decode<HelloBody>(reply.body);
      if (hello.memberId == id) return {};
      return "it answers as member " + std::to_string(hello.memberId) + ", not member " +
             std::to_string(id);
    } catch (const std::exception& e) {
      return std::string("Hello reply does not decode: ") + e.what();
    }
  };
  auto peer = Peer::create(*transport_, address, std::move(o));
  peers_.emplace(id, peer);
  return peer;
}

void NodeImpl::syncPeers(const Topology& t) {
  for (const auto& m : t.members) peerFor(m.id, m.address);
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (t.hasMember(it->first)) {
      ++it;
      continue;
    }
    // A member that left may still answer requests already sent to it (redirects, the last
    // replies): close its link only after a request's full deadline. What is still queued (a
    // link waiting for a member that died) goes elsewhere now.
    it->second->abandonQueued("member " + std::to_string(it->first) + " left the topology");
    auto timer = std::make_shared<asio::steady_timer>(netIo_, options_.requestTimeout);
    timer->async_wait([timer, peer = it->second](std::error_code) { peer->close(); });
    it = peers_.erase(it);
  }
}

void NodeImpl::prepareTopology(const Topology& next, UniqueFunction<void()> done) {
  const TopologyPtr cur = topology();
  const MemberId self = memberId();
  std::vector<PartitionId> losing;
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    if (cur->table.primary(p) == self && next.table.primary(p) != self) losing.push_back(p);
  }
  if (losing.empty()) {
    done();
    return;
  }
  // Fence each losing partition on its worker, then wait until its in-flight replication is
  // acknowledged, so the next primary has every update before it starts serving.
  struct Drain {
    std::vector<PartitionId> partitions;
    std::size_t fencing;
    UniqueFunction<void()> done;
    asio::steady_timer timer;
    SteadyClock::time_point deadline;
  };
  auto drain = std::make_shared<Drain>(Drain{losing, losing.size(), std::move(done),
                                             asio::steady_timer(netIo_),
                                             SteadyClock::now() + kMembershipTimeout});
  auto poll = std::make_shared<std::function<void()>>();
  *poll = [this, drain, poll] {
    bool idle = true;
    for (PartitionId p : drain->partitions) {
      idle = idle && replicas_[p].outstanding.load(std::memory_order_acquire) == 0;
    }
    if (idle || SteadyClock::now() >= drain->deadline) {
      auto finished = std::move(drain->done);
      *poll = nullptr;  // break the cycle
      finished();
      return;
    }
    drain->timer.expires_after(std::chrono::milliseconds(1));
    drain->timer.async_wait([poll](std::error_code) {
      if (*poll) (*poll)();
    });
  };
  for (PartitionId p : losing) {
    workers_->post(p, [this, p, drain, poll](PartitionStore&) {
      replicas_[p].fenced = true;
      asio::post(netIo_, [drain, poll] {
        if (--drain->fencing == 0) (*poll)();
      });
    });
  }
}

void NodeImpl::commitTopology(TopologyPtr next) {
  const TopologyPtr cur = topology();
  if (next->version <= cur->version) return;  // already installed
  if (memberId() == 0) {                      // admitted, but the join reply has not arrived yet
    for (const auto& m : next->members) {
      if (m.address == selfAddress_) selfId_.store(m.id, std::memory_order_release);
    }
  }
  const MemberId self = memberId();
  {
    std::lock_guard lock(topoMu_);
    topology_.store(next);
  }
  topoCv_.notify_all();
  if (options_.onTopology) options_.onTopology(*next);
  syncPeers(*next);
  if (next->coordinator() == self && !coordinator_) {
    coordinator_ = std::make_unique<Coordinator>(static_cast<CoordinatorHost&>(*this));
  } else if (next->coordinator() != self && coordinator_) {
    // The role moved on; let the current call chain unwind before destroying it.
    asio::post(netIo_, [c = std::shared_ptr<Coordinator>(std::move(coordinator_))] {});
  }
  // Snapshots this node (as a primary in `next`) starts: every syncing replica that is new, whose
  // snapshot was restarted (a new `since`), or that was another primary's to serve.
  std::vector<std::vector<MemberId>> snapshots(options_.partitions);
  {
    std::set<std::tuple<PartitionId, MemberId, std::uint64_t>> underway;
    for (const SyncingReplica& r : cur->syncing) {
      if (cur->table.primary(r.partition) == self) underway.emplace(r.partition, r.member, r.since);
    }
    for (const SyncingReplica& r : next->syncing) {
      if (r.partition >= options_.partitions || next->table.primary(r.partition) != self) continue;
      if (underway.count({r.partition, r.member, r.since}) == 0) {
        snapshots[r.partition].push_back(r.member);
      }
    }
  }
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    const bool wasOwner = cur->table.isOwner(p, self);
    const bool isOwner = next->table.isOwner(p, self);
    if (!wasOwner && !isOwner) continue;
    workers_->post(p, [this, p, next, self, wasOwner, isOwner,
                       to = std::move(snapshots[p])](PartitionStore& store) {
      Replica& rep = replicas_[p];
      if (!isOwner) {  // moved away: drop it
        if (wasOwner) store.clear();
        rep.mode = ReplicaMode::kEmpty;
        rep.seq = 0;
        rep.fenced = false;
        return;
      }
      if (next->table.primary(p) != self) return;
      rep.fenced = false;
      // A primary serves what it holds: only a partition that lost every replica (it restarts
      // empty) has a primary that was not a complete replica.
      rep.mode = ReplicaMode::kReady;
      for (MemberId m : to) sendSnapshot(p, store, m, next->version);
    });
  }
}

void NodeImpl::onRequest(const std::shared_ptr<Connection>& conn, Frame frame) {
  const FrameHeader header = frame.header;
  try {
    switch (header.type) {
      case MessageType::kHello:
        return handleHello(conn, std::move(frame));
      case MessageType::kJoin:
        return handleJoin(conn, std::move(frame));
      case MessageType::kInvoke:
        return handleInvoke(conn, std::move(frame));
      case MessageType::kReplicate:
        return handleReplicate(conn, std::move(frame));
      case MessageType::kSnapshot:
        return handleSnapshot(conn, std::move(frame));
      case MessageType::kGetTopology:
        conn->reply(header, header.type, topology()->version, encode(TopologyBody{*topology()}));
        return;
      case MessageType::kHeartbeat:  // the reply's header carries this member's topology version
        conn->reply(header, header.type, topology()->version, {});
        return;
      case MessageType::kTopologyPrepare: {
        auto next = decode<TopologyBody>(frame.body).topology;
        prepareTopology(next, [conn, header, this] {
          conn->reply(header, MessageType::kTopologyPrepare, topology()->version, {});
        });
        return;
      }
      case MessageType::kTopologyCommit: {
        commitTopology(std::make_shared<Topology>(decode<TopologyBody>(frame.body).topology));
        conn->reply(header, MessageType::kTopologyCommit, topology()->version, {});
        return;
      }
      case MessageType::kSynced: {
        const SyncedBody s = decode<SyncedBody>(frame.body);
        if (!coordinator_) {  // the reporter retries at the coordinator its topology names
          conn->replyError(header, Error(Errc::unavailable, "member " + std::to_string(memberId()) +
                                                                " is not the coordinator"));
          return;
        }
        coordinator_->onSynced(s.partition, s.member, s.topologyVersion);
        conn->reply(header, MessageType::kSynced, topology()->version, {});
        return;
      }
      case MessageType::kLeave: {
        const LeaveBody l = decode<LeaveBody>(frame.body);
        if (!coordinator_) {
          conn->reply(header, MessageType::kRedirect, topology()->version,
                      encode(TopologyBody{*topology()}));
          return;
        }
        coordinator_->requestLeave(l.memberId);
        conn->reply(header, MessageType::kLeave, topology()->version, {});
        return;
      }
      case MessageType::kRedirect:
        break;
    }
    conn->replyError(header, Error(Errc::protocol_error, std::string(messageTypeName(header.type)) +
                                                             " is a reply, not a request"));
  } catch (const std::exception& e) {
    conn->replyError(header,
                     Error(Errc::malformed_message, std::string(messageTypeName(header.type)) +
                                                        " body does not decode: " + e.what()));
  }
}

void NodeImpl::onClosed(const std::shared_ptr<Connection>&, const Error&) {}

void NodeImpl::handleHello(const std::shared_ptr<Connection>& conn, Frame frame) {
  const HelloBody hello = decode<HelloBody>(frame.body);
  if (hello.role == HelloBody::kPeer && hello.memberId != 0) {
    conn->peerId = hello.memberId;
    if (auto peer = linkTo(hello.memberId, hello.address, /*dialedByThem=*/true)) {
      peer->adopt(conn);
    }
  }
  conn->reply(frame.header, MessageType::kHello, topology()->version,
              encode(HelloBody{HelloBody::kPeer, memberId(), selfAddress_}));
}

void NodeImpl::handleJoin(const std::shared_ptr<Connection>& conn, Frame frame) {
  const JoinRequest req = decode<JoinRequest>(frame.body);
  if (!coordinator_) {  // not the coordinator: tell the joiner who is
    conn->reply(frame.header, MessageType::kRedirect, topology()->version,
                encode(TopologyBody{*topology()}));
    return;
  }
  if (req.partitions != options_.partitions) {
    conn->replyError(frame.header, Error(Errc::join_refused,
                                         "the cluster has " + std::to_string(options_.partitions) +
                                             " partitions, the joining node " + req.address +
                                             " has " + std::to_string(req.partitions)));
    return;
  }
  const std::vector<std::string> ours = registry_.names();
  if (req.processors != ours) {
    std::vector<std::string> missing, extra;
    std::set_difference(ours.begin(), ours.end(), req.processors.begin(), req.processors.end(),
                        std::back_inserter(missing));
    std::set_difference(req.processors.begin(), req.processors.end(), ours.begin(), ours.end(),
                        std::back_inserter(extra));
    conn->replyError(frame.header, Error(Errc::join_refused,
                                         "registered processors differ: the joining node " +
                                             req.address + " lacks [" + describeNames(missing) +
                                             "] and has extra [" + describeNames(extra) + "]"));
    return;
  }
  coordinator_->requestJoin(req.address, req.incarnation,
                            [this, conn, header = frame.header](Result<MemberId> id) {
                              if (!id) {
                                conn->replyError(header, id.error());
                                return;
                              }
                              conn->reply(header, MessageType::kJoin, topology()->version,
                                          encode(JoinReply{*id, selfAddress_}));
                            });
}

void NodeImpl::sendToMember(const MemberInfo& member, MessageType type, std::string body,
                            Connection::ResponseHandler done) {
  std::shared_ptr<Peer> peer = peerFor(member.id, member.address);
  if (!peer) {
    done(Error(Errc::unreachable, "no link to member " + std::to_string(member.id)));
    return;
  }
  peer->request(type, topology()->version, std::move(body), kMembershipTimeout, std::move(done));
}

void NodeImpl::prepareLocally(const Topology& next, UniqueFunction<void()> done) {
  prepareTopology(next, std::move(done));
}

void NodeImpl::commitLocally(TopologyPtr next) { commitTopology(std::move(next)); }

void NodeImpl::commitRoundFinished() {
  {
    std::lock_guard lock(topoMu_);
    commitRounds_.fetch_sub(1);
  }
  topoCv_.notify_all();
}

}  // namespace ingrid
