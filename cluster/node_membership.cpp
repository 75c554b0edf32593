// Membership from a member's point of view: start (bootstrap or join), stop (leave), the
// two-phase topology install, peers, and the dispatch of incoming requests.
#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "cluster/node_impl.h"
#include "cluster/transport/member_auth.h"
#include "cluster/transport/tls.h"

namespace ingrid {
namespace {

// What an acceptor keeps between a member's Hello and its Auth (Connection::handshake).
struct PendingAuth {
  MemberId dialerId = 0;
  MemberId acceptorId = 0;
  std::string address;
  std::string dialerNonce;
  std::string acceptorNonce;
  bool joiner = false;  // a joining node's Hello: its Join proves the secret, not an Auth
  template <class A>
  void serialize(A& ar) {
    ar(dialerId, acceptorId, address, dialerNonce, acceptorNonce, joiner);
  }
};

}  // namespace
namespace {

using SteadyClock = std::chrono::steady_clock;

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
  if (options_.partitions == 0 || options_.partitions > kMaxPartitionCount) {
    return Error(Errc::invalid_configuration, "NodeOptions.partitions must be from 1 to " +
                                                  std::to_string(kMaxPartitionCount) + ", got " +
                                                  std::to_string(options_.partitions));
  }
  if (options_.backups >= kMaxOwnersPerPartition) {
    return Error(Errc::invalid_configuration, "NodeOptions.backups must be below " +
                                                  std::to_string(kMaxOwnersPerPartition) +
                                                  ", got " + std::to_string(options_.backups));
  }
  if (options_.minInSyncReplicas > 1 && options_.replication == ReplicationMode::kPrimarySync) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.minInSyncReplicas above 1 needs synchronous replication (kSync): "
                 "with kPrimarySync the answer goes out before any backup holds the write");
  }
  if (options_.minInSyncReplicas == 0 || options_.minInSyncReplicas > options_.backups + 1) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.minInSyncReplicas must be from 1 to backups + 1 (" +
                     std::to_string(options_.backups + 1) + "), got " +
                     std::to_string(options_.minInSyncReplicas));
  }
  if (options_.idleTimeout.count() != 0 && options_.idleTimeout < options_.requestTimeout) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.idleTimeout (" + std::to_string(options_.idleTimeout.count()) +
                     " ms) must be 0 or at least requestTimeout (" +
                     std::to_string(options_.requestTimeout.count()) +
                     " ms): a client waiting on a slow request would be cut off");
  }
  if (options_.maxConnections == 0) {
    return Error(Errc::invalid_configuration, "NodeOptions.maxConnections must be > 0");
  }
  std::shared_ptr<asio::ssl::context> tls;
  if (options_.tls.configured()) {
    auto made = makeTlsContext(options_.tls, "NodeOptions", /*needCertificate=*/true);
    if (!made) return std::move(made).error();
    tls = std::move(made).value();
  }
  if (!options_.clientSecret.empty() && options_.clusterSecret.empty()) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.clientSecret needs a clusterSecret: without one, a client could say "
                 "Hello as a member and skip the client secret");
  }
  if (options_.expirySweepInterval.count() <= 0 || options_.expirySweepEntries == 0) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.expirySweepInterval and expirySweepEntries must be > 0");
  }
  const auto ms = [](std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; };
  if (options_.heartbeatInterval.count() <= 0 ||
      options_.failureTimeout <= options_.heartbeatInterval) {
    return Error(Errc::invalid_configuration, "NodeOptions.heartbeatInterval (" +
                                                  ms(options_.heartbeatInterval) +
                                                  ") must be > 0 and below failureTimeout (" +
                                                  ms(options_.failureTimeout) + ")");
  }
  // A lease must outlast the renewal interval (or it lapses between renewals) and end before the
  // member is declared failed (or a silent member's partitions wait past the failure timeout).
  if (leaseDuration() <= options_.heartbeatInterval || leaseDuration() >= options_.failureTimeout) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.leaseDuration (" + ms(leaseDuration()) +
                     (options_.leaseDuration.count() > 0 ? "" : ", failureTimeout / 2") +
                     ") must be above heartbeatInterval (" + ms(options_.heartbeatInterval) +
                     ") and below failureTimeout (" + ms(options_.failureTimeout) + ")");
  }
  if (options_.dedupWindow < std::chrono::milliseconds(1000) ||
      options_.requestTimeout > options_.dedupWindow / 2) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.dedupWindow (" + ms(options_.dedupWindow) +
                     ") must be at least 1000 ms and at least twice requestTimeout (" +
                     ms(options_.requestTimeout) + "): a retry must find its request's record");
  }
  if (options_.zone.size() > MemberInfo::kMaxZoneBytes ||
      std::any_of(options_.zone.begin(), options_.zone.end(),
                  [](char c) { return c <= ' ' || c > '~'; })) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.zone '" + options_.zone + "' must be at most " +
                     std::to_string(MemberInfo::kMaxZoneBytes) + " printable bytes with no space");
  }
  if (options_.voters != 1 && options_.voters != 3 && options_.voters != 5 &&
      options_.voters != 7) {
    return Error(Errc::invalid_configuration, "NodeOptions.voters (" +
                                                  std::to_string(options_.voters) +
                                                  ") must be 1, 3, 5 or 7: a majority of an even "
                                                  "count survives no more losses than one fewer");
  }
  if (options_.migrationStallTimeout.count() <= 0) {
    return Error(Errc::invalid_configuration, "NodeOptions.migrationStallTimeout (" +
                                                  ms(options_.migrationStallTimeout) +
                                                  ") must be > 0");
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
  // The address advertised to the cluster: never a wildcard (the others could not reach it).
  std::optional<std::pair<std::string, std::uint16_t>> advertise;
  if (!options_.advertiseAddress.empty()) {
    const auto colon = options_.advertiseAddress.rfind(':');
    const std::string host =
        colon == std::string::npos ? std::string() : options_.advertiseAddress.substr(0, colon);
    const std::string port =
        colon == std::string::npos ? std::string() : options_.advertiseAddress.substr(colon + 1);
    if (host.empty() || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), ::isdigit) || std::stoul(port) > 65535) {
      return Error(
          Errc::invalid_configuration,
          "NodeOptions.advertiseAddress '" + options_.advertiseAddress + "' is not host:port");
    }
    advertise.emplace(host, static_cast<std::uint16_t>(std::stoul(port)));
  }
  const auto wildcard = [](const std::string& host) {
    return host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty();
  };
  if (advertise && wildcard(advertise->first)) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.advertiseAddress '" + options_.advertiseAddress +
                     "' is a wildcard: advertise an address the other members can reach");
  }
  if (listen && wildcard(listen->first) && !advertise) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.listenAddress '" + options_.listenAddress +
                     "' listens on every interface: set advertiseAddress (--advertise HOST:PORT) "
                     "to the address the other members reach this one at");
  }
  for (const auto& seed : options_.seeds) {
    if (!parseAddress(seed)) {
      return Error(Errc::invalid_configuration, "seed '" + seed + "' is not host:port");
    }
  }
  if (options_.bootstrapExpect > 0 && !options_.seedProvider) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.bootstrapExpect needs a seedProvider (--seed-dns): it counts the "
                 "discovered nodes");
  }
  unsigned threads = options_.workerThreads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  data_ = std::make_unique<DataPlane>(static_cast<DataPlaneHost&>(*this), options_, registry_,
                                      clock_, netIo_, threads,
                                      options_.partitionsOnNetworkThread && listen.has_value());
  // A remote primary silent this long is asked again (same request id), by then perhaps at the
  // member that took its partitions over.
  router_.setAttemptTimeout(std::max(options_.heartbeatInterval, options_.failureTimeout / 2));
  {
    auto empty = std::make_shared<Topology>();
    empty->table = PartitionTable(options_.partitions,
                                  std::vector<std::vector<MemberId>>(options_.partitions));
    empty->backups = options_.backups;
    topology_.store(std::move(empty));
  }
  data_->start();

  if (!listen) {
    Result<bool> made = bootstrap();
    state_.store(kRunning, std::memory_order_release);
    return made;
  }
  TransportOptions topts;
  topts.listenHost = listen->first;
  topts.listenPort = listen->second;
  topts.connection.faults = options_.frameFaults;
  topts.maxConnections = options_.maxConnections;
  topts.handshakeTimeout = options_.handshakeTimeout;
  topts.idleTimeout = options_.idleTimeout;
  topts.maxQueuedBytes = options_.maxQueuedBytes;
  topts.maxBufferedBytes = options_.maxBufferedBytes;
  topts.tls = std::move(tls);
  transport_ = std::make_unique<Transport>(netIo_, topts, *this);
  Result<std::uint16_t> port = transport_->listen();
  if (!port) {
    data_->stop();
    transport_.reset();
    state_.store(kStopped);
    return std::move(port).error();
  }
  selfAddress_ = transport_->listenAddress();
  if (advertise) {
    const std::string bound = selfAddress_.substr(selfAddress_.rfind(':') + 1);
    selfAddress_ =
        advertise->second == 0 ? advertise->first + ":" + bound : options_.advertiseAddress;
  }
  // Links to shard ports say Hello as this member: exempt from the client limits there.
  shardLinks_.emplace(*transport_, [this](MemberId id) { return shardLinkOptions(id); });
  if (Result<bool> shards = startShardPorts(topts); !shards) {
    stopShardPorts();
    transport_->stop();
    data_->stop();
    replicaLinks_.clear();
    replicaLinksAs_.clear();
    shardTransports_.clear();
    transport_.reset();
    state_.store(kStopped);
    return shards;
  }
  netGuard_.emplace(netIo_.get_executor());
  netThread_ = std::thread([this] { netIo_.run(); });
  state_.store(kRunning, std::memory_order_release);
  Result<bool> joined = options_.seeds.empty() && !options_.seedProvider
                            ? bootstrap()
                            : join(options_.seeds, /*mayBootstrap=*/true);
  if (!joined) {
    stop();
    return joined;
  }
  asio::post(netIo_, [this] { startHeartbeats(); });
  return joined;
}

Result<bool> NodeImpl::bootstrap() {
  if (!transport_) {  // a single member without a network: its topology needs no consensus
    std::shared_ptr<Topology> t = firstTopology();
    data_->markAllReady();
    selfId_.store(1, std::memory_order_release);
    topology_.store(t);
    if (options_.onTopology) options_.onTopology(*t);
    return true;
  }
  // The first member bootstraps the control plane alone; once elected, its coordinator commits
  // the first topology (this member alone) through the log.
  selfId_.store(1, std::memory_order_release);
  std::promise<Result<bool>> made;
  asio::post(netIo_, [this, &made] { made.set_value(startControl(1, /*bootstrap=*/true)); });
  Result<bool> started = made.get_future().get();
  if (!started) return started;
  if (waitForTopology(options_.joinTimeout, [this] { return topology()->hasMember(1); })) {
    return true;
  }
  return Error(Errc::unavailable, "the control plane of the first member " + selfAddress_ +
                                      " committed no topology within " +
                                      std::to_string(options_.joinTimeout.count()) + " ms");
}

std::shared_ptr<Topology> NodeImpl::firstTopology() const {
  auto t = std::make_shared<Topology>();
  t->version = 1;
  t->members.push_back(
      MemberInfo{1, selfAddress_, incarnation_.load(), shardPorts_, options_.zone});
  t->table = Topology::balancedFor(options_.partitions, t->members, options_.backups);
  t->backups = options_.backups;
  t->dedupWindowMs = static_cast<std::uint32_t>(options_.dedupWindow.count());
  t->nextMemberId = 2;
  return t;
}

Result<bool> NodeImpl::startControl(MemberId self, bool bootstrap,
                                    std::optional<ControlRecovery> recovery) {
  if (control_) return true;
  ControlPlaneOptions o;
  o.self = self;
  o.address = selfAddress_;
  o.voters = options_.voters;
  o.electionTimeout = electionTimeout();
  o.heartbeatInterval = std::max(std::chrono::milliseconds(10), electionTimeout() / 5);
  control_ = std::make_unique<ControlPlane>(static_cast<ControlHost&>(*this), o);
  Result<bool> started = control_->start(bootstrap, std::move(recovery));
  if (!started) control_.reset();
  return started;
}

std::vector<std::string> NodeImpl::seedRound(const std::vector<std::string>& seeds,
                                             std::vector<std::string>* discovered,
                                             std::string* providerError) const {
  std::vector<std::string> out;
  auto add = [&](const std::string& a) {
    if (a != selfAddress_ && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  for (const std::string& a : seeds) add(a);
  discovered->clear();
  providerError->clear();
  if (options_.seedProvider) {
    Result<std::vector<std::string>> found = options_.seedProvider();
    if (found) {
      *discovered = std::move(found).value();
      for (const std::string& a : *discovered) add(a);
    } else {
      *providerError = "seed discovery: " + found.error().message();
    }
  }
  return out;
}

Result<bool> NodeImpl::join(const std::vector<std::string>& seeds, bool mayBootstrap) {
  // Tries until admitted, refused (a wrong secret, other processors or timing) or stopped, as
  // long as some seed answers: each answer (a redirect, "unavailable" while the leader is busy
  // or a member's lease runs out) gives it joinTimeout more. It gives up only when no seed has
  // answered for joinTimeout.
  auto deadline = SteadyClock::now() + options_.joinTimeout;
  JoinRequest request{selfAddress_,
                      options_.partitions,
                      options_.backups,
                      registry_.names(),
                      incarnation_.load(),
                      {},
                      shardPorts_,
                      static_cast<std::uint32_t>(leaseDuration().count()),
                      static_cast<std::uint32_t>(options_.failureTimeout.count()),
                      static_cast<std::uint32_t>(options_.dedupWindow.count()),
                      options_.zone};
  std::vector<std::string> discovered;  // the seed provider's candidates, this round
  std::string providerError;
  std::vector<std::string> round = seedRound(seeds, &discovered, &providerError);
  std::deque<std::string> targets(round.begin(), round.end());
  // NodeOptions::bootstrapExpect: the candidates that answered this round as nodes in no
  // cluster, and whether any answered as a member of one.
  std::set<std::string> idle;
  bool clusterSeen = false;
  bool warnedNotListed = false;
  std::string tried;
  std::string lastError = providerError.empty() ? "no seed answered" : providerError;
  while (SteadyClock::now() < deadline) {
    if (stopCalled_.load()) return Error(Errc::shutting_down, "stopped while joining");
    if (targets.empty()) {
      if (mayBootstrap && options_.bootstrapExpect > 0 && !clusterSeen &&
          std::find(discovered.begin(), discovered.end(), selfAddress_) != discovered.end() &&
          idle.size() + 1 >= options_.bootstrapExpect &&
          (idle.empty() || selfAddress_ < *idle.begin())) {
        std::cerr << "ingrid: " << selfAddress_ << " starts a new cluster: it is the smallest of "
                  << idle.size() + 1 << " nodes found in no cluster (bootstrapExpect "
                  << options_.bootstrapExpect << ")\n";
        return bootstrap();
      }
      if (mayBootstrap && options_.bootstrapExpect > 0 && !warnedNotListed && !discovered.empty() &&
          std::find(discovered.begin(), discovered.end(), selfAddress_) == discovered.end()) {
        warnedNotListed = true;
        std::cerr << "ingrid: " << selfAddress_ << " is not among the " << discovered.size()
                  << " discovered addresses (first: " << discovered.front()
                  << "): it will join, never start a cluster (bootstrapExpect "
                  << options_.bootstrapExpect << "); advertise the address the name lists\n";
      }
      {
        std::unique_lock lock(topoMu_);  // pause briefly between rounds of seeds
        topoCv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      round = seedRound(seeds, &discovered, &providerError);
      if (!providerError.empty()) lastError = providerError;
      targets.assign(round.begin(), round.end());
      idle.clear();
      clusterSeen = false;
      if (targets.empty()) continue;
    }
    const std::string seed = targets.front();
    targets.pop_front();
    if (tried.find(seed) == std::string::npos) tried += (tried.empty() ? "" : ", ") + seed;
    std::promise<Result<Frame>> answered;
    auto answer = answered.get_future();
    // Each seed gets its share of the deadline, so that a frozen one (it accepts the connection
    // and never answers) does not take all of it; a join sent again is the same join (same
    // incarnation), so asking the next seed is safe.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    const auto share = std::min(
        left, std::max(options_.joinTimeout / (2 * std::max(1, static_cast<int>(round.size()))),
                       std::chrono::milliseconds(200)));
    // Hello (role peer, no id yet, a fresh nonce), then the Join on the same connection, proven
    // over both nonces when the cluster has a secret (member_auth.h).
    const std::string& secret = options_.clusterSecret;
    const HelloBody hello{HelloBody::kPeer, 0, selfAddress_, member_auth::freshNonce(), {}};
    const auto timeout = std::max(share, std::chrono::milliseconds(1));
    transport_->connect(seed, [&answered, &request, &secret, hello,
                               timeout](Result<std::shared_ptr<Connection>> conn) mutable {
      if (!conn) {
        answered.set_value(std::move(conn).error());
        return;
      }
      auto c = conn.value();
      auto finish = [&answered, c](Result<Frame> r) mutable {
        answered.set_value(std::move(r));
        c->close(Error(Errc::shutting_down, "join finished"));
      };
      c->request(
          MessageType::kHello, 0, encode(hello), timeout,
          [&request, &secret, hello, timeout, c, finish](Result<Frame> r) mutable {
            if (!r) return finish(std::move(r));
            JoinRequest proven = request;
            if (!secret.empty()) {
              try {
                proven.proof =
                    member_auth::joinProof(secret, request.address, request.incarnation,
                                           hello.nonce, decode<HelloBody>(r->body).nonce);
              } catch (const std::exception& e) {
                return finish(Error(Errc::protocol_error,
                                    std::string("Hello reply does not decode: ") + e.what()));
              }
            }
            c->request(MessageType::kJoin, 0, encode(proven), timeout, std::move(finish));
          });
    });
    Result<Frame> reply = answer.get();
    // Only "come again" answers extend the wait: "unavailable" (a busy leader, a member's
    // address still leased) and a redirect that decodes (below); not a reply that does not.
    if (!reply && reply.error() == Errc::unavailable) {
      deadline = std::max(deadline, SteadyClock::now() + options_.joinTimeout);
      clusterSeen = true;  // a member, busy
    }
    if (!reply) {
      // Refused, or refused our credentials (no TLS, an untrusted certificate): final.
      if (reply.error() == Errc::join_refused || reply.error() == Errc::unauthenticated) {
        return std::move(reply).error();
      }
      lastError = seed + ": " + reply.error().message();
      continue;
    }
    try {
      if (reply->header.type == MessageType::kRedirect) {  // not the coordinator: go there
        const Topology t = decode<TopologyBody>(reply->body).topology;
        if (const MemberInfo* c = t.member(t.coordinator())) {
          targets.push_front(c->address);
          clusterSeen = true;
        } else {
          // A node in no cluster yet, counted once: only a discovered address, of this node's
          // own family (a dual-stack name lists each node twice, this one too).
          const bool v6 = !seed.empty() && seed.front() == '[';
          const bool selfV6 = !selfAddress_.empty() && selfAddress_.front() == '[';
          if (t.members.empty() && v6 == selfV6 &&
              std::find(discovered.begin(), discovered.end(), seed) != discovered.end()) {
            idle.insert(seed);
          } else if (!t.members.empty()) {
            clusterSeen = true;  // a member between leaders, or rejoining: a cluster exists
          }
        }
        deadline = std::max(deadline, SteadyClock::now() + options_.joinTimeout);
        continue;
      }
      const JoinReply joined = decode<JoinReply>(reply->body);
      if (joined.memberId == 0) throw std::invalid_argument("member id 0");
      selfId_.store(joined.memberId, std::memory_order_release);
    } catch (const std::exception& e) {
      lastError = seed + ": reply does not decode: " + e.what();
      continue;
    }
    // Admitted: the leader adds this member to the control plane, whose log brings the
    // topologies (the first one listing this member makes the join complete).
    std::promise<Result<bool>> made;
    asio::post(netIo_,
               [this, &made] { made.set_value(startControl(memberId(), /*bootstrap=*/false)); });
    if (Result<bool> started = made.get_future().get(); !started) return started;
    const bool member = waitForTopology(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()),
        [this] { return topology()->hasMember(memberId()) || stopCalled_.load(); });
    if (member && !stopCalled_.load()) return true;
    if (stopCalled_.load()) return Error(Errc::shutting_down, "stopped while joining");
    lastError =
        "admitted as member " + std::to_string(memberId()) + " but no topology with it arrived";
    break;
  }
  return Error(Errc::unreachable,
               "could not join through seeds [" + tried + "]: none answered for " +
                   std::to_string(options_.joinTimeout.count()) + " ms; last error: " + lastError);
}

bool NodeImpl::waitForTopology(std::chrono::milliseconds limit, const std::function<bool()>& pred) {
  std::unique_lock lock(topoMu_);
  return topoCv_.wait_for(lock, limit, pred);
}

void NodeImpl::rejoin(std::vector<std::string> seeds) {
  // 0. Keep the old Raft server a while: the others may need its vote to commit its removal from
  //    the Raft configuration (with 2 voters, always). Wait until its vote is not needed (out of
  //    the configuration as it knows it, or the other voters are a majority without it) and it
  //    does not lead, or it has not led for a few elections' time; bounded by joinTimeout.
  const auto start = SteadyClock::now();
  SteadyClock::time_point notLeadingSince = start;
  bool notLeading = false;
  while (!stopCalled_.load() && SteadyClock::now() - start < options_.joinTimeout) {
    // (leads, its vote may be needed); shared: the answer may come after this wait gave up.
    auto asked = std::make_shared<std::promise<std::pair<bool, bool>>>();
    auto answer = asked->get_future();
    asio::post(netIo_, [this, asked] {
      if (!control_) {
        asked->set_value({false, false});
        return;
      }
      const ControlStatus c = control_->status();
      const MemberId self = c.self;
      const bool voter = std::count(c.voters.begin(), c.voters.end(), self) > 0;
      // The others can commit its removal without it when they are a majority of the voters.
      const bool othersSuffice = c.voters.size() - (voter ? 1 : 0) >= c.voters.size() / 2 + 1;
      asked->set_value({c.isLeader, voter && !othersSuffice});
    });
    if (answer.wait_for(std::chrono::seconds(1)) != std::future_status::ready) break;
    const auto [leads, needed] = answer.get();
    if (!needed && !leads) break;
    if (leads) {
      notLeading = false;
    } else if (!notLeading) {
      notLeading = true;
      notLeadingSince = SteadyClock::now();
    } else if (SteadyClock::now() - notLeadingSince > 3 * electionTimeout()) {
      break;
    }
    std::unique_lock lock(topoMu_);  // a bounded poll; stop() notifies
    topoCv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopCalled_.load(); });
  }
  // 1. Forget the old identity (network thread): its control plane, role, links and lease. Also
  //    before each new attempt (an admission that never completed left a control plane behind).
  auto forget = [this]() -> bool {
    auto forgot = std::make_shared<std::promise<void>>();  // shared: stop() may end the wait first
    auto forgotten = forgot->get_future();
    asio::post(netIo_, [this, forgot] {
      if (control_) control_->stop();
      control_.reset();
      coordinator_.reset();
      for (auto& [id, peer] : peers_) peer->close();
      peers_.clear();
      if (shardLinks_) shardLinks_->closeAll();
      closeReplicaLinks();  // they said Hello as the old member
      lastHeard_.clear();
      leaseUntil_.store(0, std::memory_order_release);
      selfId_.store(0, std::memory_order_release);
      incarnation_.store(randomIncarnation());
      auto empty = std::make_shared<Topology>();
      empty->table = PartitionTable(options_.partitions,
                                    std::vector<std::vector<MemberId>>(options_.partitions));
      empty->backups = options_.backups;
      {
        std::lock_guard lock(topoMu_);
        topology_.store(std::move(empty));
      }
      forgot->set_value();
    });
    while (forgotten.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (stopCalled_.load()) return false;  // stop() waits for this thread before closing the net
    }
    return true;
  };
  // 2. Join as a new member, empty: its partitions come from their primaries by migration. Until
  //    it is admitted (the seeds may be cut off from it still), it tries again, backing off up to
  //    5 s between attempts, until stop().
  auto backoff = std::chrono::milliseconds(250);
  while (!stopCalled_.load() && forget()) {
    Result<bool> joined = join(seeds);
    if (joined) {
      std::cerr << "ingrid: " << selfAddress_ << " joined again as member " << memberId() << "\n";
      break;
    }
    if (stopCalled_.load()) break;
    std::cerr << "ingrid: " << selfAddress_ << " could not join again: " << joined.error().message()
              << "; trying again in " << backoff.count() << " ms\n";
    std::unique_lock lock(topoMu_);  // stop() notifies
    topoCv_.wait_for(lock, backoff, [this] { return stopCalled_.load(); });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
  rejoining_.store(false);
}

void NodeImpl::leave() {
  const auto deadline = SteadyClock::now() + options_.leaveTimeout;
  const MemberId self = memberId();
  // Gone once a topology without this member is committed (and installed here).
  auto gone = [this, self] { return !topology()->hasMember(self); };
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
  // A leader that left hands the control plane to another voter (ControlPlane::reconcile); wait
  // a little for that, so that the others need not wait for an election.
  const auto handOver = SteadyClock::now() + 2 * electionTimeout();
  while (SteadyClock::now() < handOver) {
    std::promise<bool> leading;
    asio::post(netIo_, [this, &leading] { leading.set_value(control_ && control_->isLeader()); });
    if (!leading.get_future().get()) break;
    std::unique_lock lock(topoMu_);  // a bounded poll: leadership has no condition to wait on
    topoCv_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

void NodeImpl::stop() {
  if (stopCalled_.exchange(true)) return;  // stopping or stopped elsewhere
  if (state_.load() == kCreated) {
    state_.store(kStopped);
    return;
  }
  {
    std::lock_guard lock(topoMu_);  // wakes a rejoin waiting for its topology
  }
  topoCv_.notify_all();
  std::thread rejoining;
  {
    std::lock_guard lock(rejoinMu_);
    rejoining = std::move(rejoinThread_);
  }
  if (rejoining.joinable()) rejoining.join();  // it sees stopCalled_ and ends
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
  // 3. Close the network: no more requests in or out (and none tried again from the workers).
  if (data_) data_->beginStop();
  if (transport_) {
    netGuard_.reset();
    asio::post(netIo_, [this] {
      // The control plane first: its callbacks only post here, and nothing below runs them.
      if (control_) control_->stop();
      coordinator_.reset();
      heartbeatsStopped_ = true;
      heartbeatTimer_.cancel();
      leaseTimer_.cancel();
      judgeTimer_.cancel();
      watchers_.stop();
      for (auto& [id, peer] : peers_) peer->close();
      peers_.clear();
      if (shardLinks_) shardLinks_->closeAll();
      transport_->stop();
      // Handlers queued by the closes above may still reach the coordinator: stop first.
      netIo_.stop();
    });
    if (netThread_.joinable()) netThread_.join();
    control_.reset();
  }
  // 4. Close the shard ports (on their workers, which run the closes before they end), then drain
  //    and join the partition workers.
  stopShardPorts();
  if (data_) data_->stop();
  state_.store(kStopped, std::memory_order_release);
}

std::shared_ptr<Peer> NodeImpl::peerFor(MemberId id, const std::string& address) {
  return linkTo(id, address, /*dialedByThem=*/false);
}

std::shared_ptr<Peer> NodeImpl::linkTo(MemberId id, const std::string& address, bool dialedByThem) {
  const MemberId self = memberId();
  if (id == 0 || id == self || !transport_) return nullptr;
  if (auto it = peers_.find(id); it != peers_.end()) return it->second;
  PeerOptions o = memberLinkOptions(id);
  o.dial = self != 0 && self < id;  // one connection per pair: the smaller id dials
  // A link that waits to be dialed, to a member that is not (or no longer) in our topology,
  // would only queue requests until their deadlines: that member will not dial us. The caller
  // routes again instead (a departed primary's partitions have moved).
  if (!o.dial && !dialedByThem && !topology()->hasMember(id)) return nullptr;
  o.failQueuedOnDialError = true;  // a member that refuses connections is gone: route elsewhere
  auto peer = Peer::create(*transport_, address, std::move(o));
  peers_.emplace(id, peer);
  return peer;
}

PeerOptions NodeImpl::shardLinkOptions(MemberId id) {
  PeerOptions o = memberLinkOptions(id);
  // Not sent: a call is routed again (to the member port meanwhile); an update or a snapshot is
  // tried again on the same link.
  o.failQueuedOnDialError = true;
  o.dialOnDemand = true;
  return o;
}

PeerOptions NodeImpl::memberLinkOptions(MemberId id) {
  PeerOptions o;
  o.peerId = id;
  const std::string& secret = options_.clusterSecret;
  o.helloBody = [this, &secret] {
    HelloBody hello{HelloBody::kPeer, memberId(), selfAddress_, {}, {}};
    if (!secret.empty()) hello.nonce = member_auth::freshNonce();
    return encode(hello);
  };
  // The process at a member's address must be that member: a restarted process there (empty,
  // not yet admitted, or admitted under a new id) must not take the old member's updates. With a
  // cluster secret it must also prove that it knows the secret.
  o.checkHello = [id, &secret](const std::string& sent, const Frame& reply) -> std::string {
    try {
      const HelloBody hello = decode<HelloBody>(reply.body);
      if (hello.memberId != id) {
        return "it answers as member " + std::to_string(hello.memberId) + ", not member " +
               std::to_string(id);
      }
      if (secret.empty()) return {};
      const HelloBody mine = decode<HelloBody>(sent);
      if (hello.proof.empty()) {
        return "it did not prove that it knows the cluster secret (is it started without one?)";
      }
      if (!member_auth::sameProof(
              hello.proof,
              member_auth::acceptorProof(secret, mine.nonce, hello.nonce, mine.memberId, id))) {
        return "its proof does not match the cluster secret";
      }
      return {};
    } catch (const std::exception& e) {
      return std::string("Hello reply does not decode: ") + e.what();
    }
  };
  o.authBody = [id, &secret](const std::string& sent, const Frame& reply) -> std::string {
    if (secret.empty()) return {};
    const HelloBody mine = decode<HelloBody>(sent);
    const HelloBody theirs = decode<HelloBody>(reply.body);
    return encode(
        AuthBody{member_auth::dialerProof(secret, mine.nonce, theirs.nonce, mine.memberId, id)});
  };
  return o;
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
  if (shardLinks_) shardLinks_->retain(t, options_.requestTimeout);
}

void NodeImpl::prepareTopology(const Topology& next, UniqueFunction<void()> done) {
  // The drain waits at most a failure timeout; a fence whose topology is not committed within
  // twice that (its leader was deposed, or failed) lifts, and the partitions serve again.
  data_->prepare(*topology(), next, options_.failureTimeout, 2 * options_.failureTimeout,
                 std::move(done));
}

void NodeImpl::commitTopology(TopologyPtr next) {
  const TopologyPtr cur = topology();
  if (next->version <= cur->version) return;  // already installed
  if (auto why = successorInvalidReason(*cur, *next)) {
    std::cerr << "ingrid: member " << memberId() << " (" << selfAddress_ << ") ignores " << *why
              << "\n";
    return;
  }
  if (memberId() == 0) {  // admitted, but the join reply has not arrived yet
    for (const auto& m : next->members) {
      if (m.address == selfAddress_ && m.incarnation == incarnation_.load()) {
        selfId_.store(m.id, std::memory_order_release);
      }
    }
  }
  const MemberId self = memberId();
  // A joining member replays the log from its start: topologies from before it was admitted
  // (that list neither it nor the members it links to yet) are history, not news.
  if (!cur->hasMember(self) && !next->hasMember(self)) return;
  {
    std::lock_guard lock(topoMu_);
    topology_.store(next);
  }
  topoCv_.notify_all();
  watchers_.publish(next);
  // A member's silence is measured from when this node first saw it listed (not from its next
  // heartbeat tick, up to an interval later), until it answers a heartbeat.
  const auto listedAt = std::chrono::steady_clock::now();
  for (const auto& m : next->members) {
    if (m.id != self) lastHeard_.try_emplace(m.id, Hearing{listedAt});
  }
  if (options_.onTopology) options_.onTopology(*next);
  syncPeers(*next);
  retainReplicaLinks(next);
  if (self != 0 && cur->hasMember(self) && !next->hasMember(self) && !stopCalled_.load() &&
      !rejoining_.exchange(true)) {
    // Removed while alive (paused, or cut off, past the failure timeout): the others promoted
    // its backups long ago. It never acts on its old view again: it joins anew, empty.
    std::cerr << "ingrid: member " << self << " (" << selfAddress_
              << ") was removed from the cluster at topology v" << next->version
              << "; joining again as a new member\n";
    std::vector<std::string> seeds;
    for (const auto& m : next->members) seeds.push_back(m.address);
    seeds.insert(seeds.end(), options_.seeds.begin(), options_.seeds.end());
    std::lock_guard lock(rejoinMu_);
    if (stopCalled_.load()) {
      rejoining_.store(false);
    } else {
      if (rejoinThread_.joinable()) rejoinThread_.join();  // an earlier rejoin, finished
      rejoinThread_ = std::thread([this, seeds = std::move(seeds)] { rejoin(seeds); });
    }
  }
  data_->install(cur, next);
}

bool NodeImpl::admitted(const std::shared_ptr<Connection>& conn, const Frame& frame, Port port) {
  SenderFacts sender{conn->peerId, conn->clientAuthenticated, conn->overLimit, std::nullopt};
  if (conn->peerId != 0 && (frame.header.type == MessageType::kReplicate ||
                            frame.header.type == MessageType::kSnapshot)) {
    const TopologyPtr t = topology();
    const MemberInfo* from = t->member(conn->peerId);
    const MemberInfo* self = t->member(memberId());
    if (from && self) {
      sender.replicaPort =
          replicatesOnShardPorts(!from->shardPorts.empty(), *self) ? Port::kShard : Port::kMember;
    }
  }
  const AdmissionPolicy policy{!options_.clientSecret.empty(), !options_.clusterSecret.empty(),
                               options_.maxConnections};
  const Admission a = admit(sender, frame.header.type, frame.body, port, policy);
  if (a) return true;
  refusals_[static_cast<std::size_t>(a.verdict) - 1].fetch_add(1, std::memory_order_relaxed);
  const std::string why =
      describeRefusal(a, frame.header.type, port, sender, conn->remote(),
                      "member " + std::to_string(memberId()) + " (" + selfAddress_ + ")", policy);
  switch (a.verdict) {
    case Verdict::kOverLimit:
      conn->refuse(Error(Errc::overloaded, why));
      break;
    case Verdict::kUnauthenticated:
      conn->refuse(Error(Errc::unauthenticated, why));
      break;
    case Verdict::kWrongPort:
      conn->replyError(
          frame.header,
          Error(Errc::protocol_error, port == Port::kShard
                                          ? why + "; send it to the member's port " + selfAddress_
                                          : why));
      break;
    case Verdict::kWrongPath:
      conn->replyError(frame.header, Error(Errc::protocol_error, why));
      break;
    case Verdict::kMembersOnly:
    case Verdict::kForgedSender:
      if (a.verdict == Verdict::kForgedSender) std::cerr << "ingrid: " << why << "\n";
      conn->replyError(frame.header, Error(Errc::unauthenticated, why));
      break;
    case Verdict::kAdmit:
      break;
  }
  return false;
}

void NodeImpl::onRequest(const std::shared_ptr<Connection>& conn, Frame frame) {
  const FrameHeader header = frame.header;
  if (!admitted(conn, frame, Port::kMember)) return;
  try {
    switch (header.type) {
      case MessageType::kHello:
        return handleHello(conn, std::move(frame));
      case MessageType::kAuth:
        return handleAuth(conn, std::move(frame));
      case MessageType::kJoin:
        return handleJoin(conn, std::move(frame));
      case MessageType::kInvoke:
        return data_->handleInvoke(conn, std::move(frame));
      case MessageType::kReplicate:
        return data_->handleReplicate(conn, std::move(frame));
      case MessageType::kSnapshot:
        return data_->handleSnapshot(conn, std::move(frame));
      case MessageType::kGetTopology:
        if (frame.body.empty()) {
          conn->reply(header, header.type, topology()->version, encode(TopologyBody{*topology()}));
        } else {  // a watch: answered when a newer topology is installed, or its wait ran out
          const WatchTopologyBody watch = decode<WatchTopologyBody>(frame.body);
          // Answered before the connection's idle timeout would close it.
          auto wait = std::chrono::milliseconds(watch.waitMs);
          if (options_.idleTimeout.count() > 0) wait = std::min(wait, options_.idleTimeout / 2);
          watchers_.hold(conn, header, watch.after, wait, topology());
        }
        return;
      case MessageType::kHeartbeat:  // the reply's header carries this member's topology version
        conn->reply(header, header.type, topology()->version, {});
        return;
      case MessageType::kTopologyPrepare:
        return handlePrepare(conn, std::move(frame));
      case MessageType::kRaft:  // admitted: from the member it names
        if (control_) control_->deliver(std::move(frame.body));
        conn->reply(header, MessageType::kRaft, topology()->version, {});
        return;
      case MessageType::kLease:
        return handleLease(conn, std::move(frame));
      case MessageType::kStatus:
        conn->reply(header, header.type, topology()->version, encode(ownStatus()));
        return;
      case MessageType::kRecover:
        return handleRecover(conn, std::move(frame));
      case MessageType::kTopologyCommit:  // retired: topologies are committed by the Raft log
        break;
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
        coordinator_->requestLeave(l.memberId);  // admitted: the leaving member's own link
        conn->reply(header, MessageType::kLeave, topology()->version, {});
        return;
      }
      case MessageType::kRedirect:
        break;
    }
    conn->replyError(header, Error(Errc::protocol_error, std::string(messageTypeName(header.type)) +
                                                             " is not a request this member takes"
                                                             " on this connection"));
  } catch (const std::exception& e) {
    conn->replyError(header,
                     Error(Errc::malformed_message, std::string(messageTypeName(header.type)) +
                                                        " body does not decode: " + e.what()));
  }
}

void NodeImpl::reportSynced(PartitionId p, MemberId member, std::uint64_t version) {
  const TopologyPtr topo = topology();
  const MemberId coordinatorId = topo->coordinator();
  if (coordinatorId == memberId()) {
    if (coordinator_) coordinator_->onSynced(p, member, version);
    return;
  }
  const MemberInfo* info = topo->member(coordinatorId);
  std::shared_ptr<Peer> peer = info ? peerFor(coordinatorId, info->address) : nullptr;
  if (!peer) return;
  peer->request(MessageType::kSynced, topo->version, encode(SyncedBody{p, member, version}),
                options_.requestTimeout, [this, p, member, version](Result<Frame> r) {
                  if (r) return;
                  // Lost on the way (or the coordinator changed): report again while the
                  // replica is still awaited and this node still its primary.
                  auto timer =
                      std::make_shared<asio::steady_timer>(netIo_, std::chrono::milliseconds(100));
                  timer->async_wait([this, timer, p, member, version](std::error_code ec) {
                    const TopologyPtr t = topology();
                    if (ec || state_.load() == kStopped || t->table.primary(p) != memberId() ||
                        t->syncingReplica(p, member) == nullptr) {
                      return;
                    }
                    reportSynced(p, member, version);
                  });
                });
}

void NodeImpl::onClosed(const std::shared_ptr<Connection>&, const Error&) {}

void NodeImpl::handleHello(const std::shared_ptr<Connection>& conn, Frame frame, bool link) {
  const HelloBody hello = decode<HelloBody>(frame.body);
  HelloBody mine{HelloBody::kPeer, memberId(), selfAddress_, {}, {}};
  if (hello.role == HelloBody::kClient && !options_.clientSecret.empty()) {
    // The client proves the client secret in its Auth (handleAuth), over both nonces.
    mine.nonce = member_auth::freshNonce();
    conn->handshake = encode(PendingAuth{0, mine.memberId, {}, hello.nonce, mine.nonce});
  } else if (hello.role == HelloBody::kPeer && hello.memberId == 0) {
    // A joining node: its Join on this connection proves the cluster secret over both nonces.
    if (!options_.clusterSecret.empty()) {
      mine.nonce = member_auth::freshNonce();
      conn->handshake = encode(
          PendingAuth{0, mine.memberId, hello.address, hello.nonce, mine.nonce, /*joiner=*/true});
    }
  } else if (hello.role == HelloBody::kPeer) {
    if (auto why = memberCertificateRefusal(*conn)) {
      conn->refuse(Error(Errc::unauthenticated, "member " + std::to_string(memberId()) + " (" +
                                                    selfAddress_ + ") refuses " + conn->remote() +
                                                    ", which says it is member " +
                                                    std::to_string(hello.memberId) + ": " + *why));
      return;
    }
    if (options_.clusterSecret.empty()) {
      acceptMember(conn, hello.memberId, hello.address, link);
    } else {
      // Prove ourselves; the dialer proves itself in its Auth, which decides (handleAuth).
      mine.nonce = member_auth::freshNonce();
      mine.proof = member_auth::acceptorProof(options_.clusterSecret, hello.nonce, mine.nonce,
                                              hello.memberId, mine.memberId);
      conn->handshake = encode(
          PendingAuth{hello.memberId, mine.memberId, hello.address, hello.nonce, mine.nonce});
    }
  }
  conn->reply(frame.header, MessageType::kHello, topology()->version, encode(mine));
}

void NodeImpl::acceptMember(const std::shared_ptr<Connection>& conn, MemberId id,
                            const std::string& address, bool link) {
  conn->peerId = id;
  if (!link) return;
  if (auto peer = linkTo(id, address, /*dialedByThem=*/true)) peer->adopt(conn);
}

void NodeImpl::handleAuth(const std::shared_ptr<Connection>& conn, Frame frame, bool link) {
  const std::string who = "member " + std::to_string(memberId()) + " (" + selfAddress_ + ")";
  if (conn->handshake.empty()) {
    conn->refuse(Error(Errc::protocol_error, who + " got an Auth from " + conn->remote() +
                                                 " without a Hello that asked for one"));
    return;
  }
  const PendingAuth pending = decode<PendingAuth>(std::exchange(conn->handshake, {}));
  const AuthBody auth = decode<AuthBody>(frame.body);
  if (pending.joiner) {
    conn->refuse(Error(Errc::protocol_error, who + " got an Auth from " + conn->remote() +
                                                 ", which said Hello as a joining node: it "
                                                 "proves the secret in its Join"));
    return;
  }
  if (pending.dialerId == 0) {  // a client's proof of the client secret
    if (!member_auth::sameProof(
            auth.proof, member_auth::clientProof(options_.clientSecret, pending.dialerNonce,
                                                 pending.acceptorNonce, pending.acceptorId))) {
      conn->refuse(Error(Errc::unauthenticated, who + " refuses the client at " + conn->remote() +
                                                    ": its proof does not match the client secret "
                                                    "(ClientOptions::clientSecret)"));
      return;
    }
    conn->clientAuthenticated = true;
    conn->reply(frame.header, MessageType::kAuth, topology()->version, {});
    return;
  }
  if (!member_auth::sameProof(
          auth.proof,
          member_auth::dialerProof(options_.clusterSecret, pending.dialerNonce,
                                   pending.acceptorNonce, pending.dialerId, pending.acceptorId))) {
    const std::string why = who + " refuses " + conn->remote() + ", which says it is member " +
                            std::to_string(pending.dialerId) +
                            ": its proof does not match the cluster secret";
    std::cerr << "ingrid: " << why << "\n";
    conn->refuse(Error(Errc::unauthenticated, why));
    return;
  }
  acceptMember(conn, pending.dialerId, pending.address, link);
  conn->reply(frame.header, MessageType::kAuth, topology()->version, {});
}

std::optional<std::string> NodeImpl::memberCertificateRefusal(const Connection& conn) const {
  if (!options_.tls.enabled() || conn.peerMemberCertificate) return std::nullopt;
  if (!conn.peerCertified) {
    return std::string(
        "under TLS a member must present a certificate that the cluster's CA "
        "signed (TlsOptions::certificateChainFile)");
  }
  return std::string(
      "its certificate is not a member's: under TLS a member's certificate must "
      "name serverAuth in its extended key usage (a client's names clientAuth "
      "only)");
}

void NodeImpl::handleJoin(const std::shared_ptr<Connection>& conn, Frame frame) {
  // Past the connection limit a refused joiner's connection is closed with the reason: the
  // members' reserve is not held by strangers.
  auto refuseJoin = [conn, header = frame.header](Error why) {
    if (conn->overLimit && conn->peerId == 0) {
      conn->refuse(std::move(why));
    } else {
      conn->replyError(header, std::move(why));
    }
  };
  const JoinRequest req = decode<JoinRequest>(frame.body);
  if (auto why = memberCertificateRefusal(*conn)) {
    refuseJoin(Error(Errc::join_refused, "the node at " + req.address + " cannot join: " + *why));
    return;
  }
  if (!parseAddress(req.address)) {
    refuseJoin(Error(Errc::join_refused,
                     "the joining node's address '" + req.address + "' is not host:port"));
    return;
  }
  if (!options_.clusterSecret.empty()) {
    // Proven over this connection's nonces (handleHello): a Join recorded elsewhere, or sent
    // without that Hello, proves nothing.
    std::optional<PendingAuth> pending;
    if (!conn->handshake.empty()) pending = decode<PendingAuth>(std::exchange(conn->handshake, {}));
    if (!pending || !pending->joiner ||
        !member_auth::sameProof(
            req.proof, member_auth::joinProof(options_.clusterSecret, req.address, req.incarnation,
                                              pending->dialerNonce, pending->acceptorNonce))) {
      refuseJoin(Error(Errc::join_refused,
                       "the node at " + req.address +
                           " did not prove that it knows the cluster secret "
                           "(NodeOptions::clusterSecret) over the nonces of a Hello on "
                           "this connection"));
      return;
    }
  }
  if (!coordinator_) {  // not the coordinator: tell the joiner who is
    conn->reply(frame.header, MessageType::kRedirect, topology()->version,
                encode(TopologyBody{*topology()}));
    return;
  }
  if (req.partitions != options_.partitions) {
    refuseJoin(Error(Errc::join_refused, "the cluster has " + std::to_string(options_.partitions) +
                                             " partitions, the joining node " + req.address +
                                             " has " + std::to_string(req.partitions)));
    return;
  }
  const auto timing = [](std::uint64_t lease, std::uint64_t failure, std::uint64_t dedup) {
    return "leaseDuration " + std::to_string(lease) + " ms, failureTimeout " +
           std::to_string(failure) + " ms, dedupWindow " + std::to_string(dedup) + " ms";
  };
  const std::string ourTiming = timing(leaseDuration().count(), options_.failureTimeout.count(),
                                       options_.dedupWindow.count());
  if (const std::string theirs =
          timing(req.leaseDurationMs, req.failureTimeoutMs, req.dedupWindowMs);
      theirs != ourTiming) {
    // A lease longer than the leader's could outlive the wait a new leader makes before it
    // promotes; a shorter dedup window would break the exactly-once contract.
    refuseJoin(Error(Errc::join_refused, "timing differs: the cluster has " + ourTiming +
                                             ", the joining node " + req.address + " has " +
                                             theirs + "; every member needs the same"));
    return;
  }
  const std::vector<std::string> ours = registry_.names();
  if (req.processors != ours) {
    std::vector<std::string> missing, extra;
    std::set_difference(ours.begin(), ours.end(), req.processors.begin(), req.processors.end(),
                        std::back_inserter(missing));
    std::set_difference(req.processors.begin(), req.processors.end(), ours.begin(), ours.end(),
                        std::back_inserter(extra));
    refuseJoin(Error(Errc::join_refused, "registered processors differ: the joining node " +
                                             req.address + " lacks [" + describeNames(missing) +
                                             "] and has extra [" + describeNames(extra) + "]"));
    return;
  }
  coordinator_->requestJoin(req.address, req.incarnation, req.shardPorts, req.zone,
                            [this, conn, header = frame.header, refuseJoin](Result<MemberId> id) {
                              if (!id) {
                                refuseJoin(id.error());
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
  // Bounded by the failure timeout: a member silent that long is about to be declared failed, and
  // must not hold up a change meanwhile.
  peer->request(type, topology()->version, std::move(body), options_.failureTimeout,
                std::move(done));
}

void NodeImpl::prepareLocally(const Topology& next, UniqueFunction<void()> done) {
  prepareTopology(next, std::move(done));
}

void NodeImpl::handlePrepare(const std::shared_ptr<Connection>& conn, Frame frame) {
  const Topology next = decode<TopologyBody>(frame.body).topology;
  const TopologyPtr cur = topology();
  const std::uint64_t term = control_ ? control_->term() : 0;
  // Only the leader of the current term may fence: a deposed or paused leader's Prepare (an
  // older term), or one for a topology that is not newer than ours, changes nothing.
  if (next.term < term || next.version <= cur->version || next.leader == 0 ||
      conn->peerId != next.leader) {
    conn->replyError(
        frame.header,
        Error(Errc::unavailable,
              "member " + std::to_string(memberId()) + " refuses Prepare of v" +
                  std::to_string(next.version) + " (term " + std::to_string(next.term) +
                  ", from member " + std::to_string(conn->peerId) + "): it is at v" +
                  std::to_string(cur->version) + ", term " + std::to_string(term)));
    return;
  }
  if (auto why = successorInvalidReason(*cur, next)) {
    conn->replyError(frame.header,
                     Error(Errc::invalid_configuration,
                           "member " + std::to_string(memberId()) + " refuses Prepare: " + *why));
    return;
  }
  prepareTopology(next, [conn, header = frame.header, this] {
    conn->reply(header, MessageType::kTopologyPrepare, topology()->version, {});
  });
}

void NodeImpl::proposeTopology(std::shared_ptr<Topology> next,
                               UniqueFunction<void(Result<bool>)> done) {
  if (!control_) {
    done(Error(Errc::shutting_down, "no control plane"));
    return;
  }
  auto shared = std::make_shared<UniqueFunction<void(Result<bool>)>>(std::move(done));
  control_->propose(std::move(next), [this, shared](Result<bool> r) {
    // After the commit itself (posted earlier by the same thread): the topology is installed.
    asio::post(netIo_, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
  });
}

void NodeImpl::runAfter(std::chrono::milliseconds delay, UniqueFunction<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(netIo_, delay);
  auto shared = std::make_shared<UniqueFunction<void()>>(std::move(fn));
  timer->async_wait([timer, shared](std::error_code ec) {
    if (!ec) (*shared)();
  });
}

void NodeImpl::barrier(UniqueFunction<void(Result<bool>)> done) {
  if (!control_) {
    done(Error(Errc::shutting_down, "no control plane"));
    return;
  }
  auto shared = std::make_shared<UniqueFunction<void(Result<bool>)>>(std::move(done));
  control_->barrier([this, shared](Result<bool> r) {
    asio::post(netIo_, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
  });
}

std::chrono::milliseconds NodeImpl::leaseWait() const {
  // Clock rates are assumed to differ by less than 10% (steady clocks differ by parts per
  // million); the margin covers the timer's own lateness.
  return leaseDuration() + leaseDuration() / 10 + std::chrono::milliseconds(10);
}

void NodeImpl::sendControl(MemberId to, const std::string& address, std::string bytes) {
  asio::post(netIo_, [this, to, address, bytes = std::move(bytes)]() mutable {
    if (state_.load() == kStopped || heartbeatsStopped_) return;
    std::shared_ptr<Peer> peer = peerFor(to, address);
    if (!peer) return;  // no link yet (the other side dials): raft sends again
    peer->request(MessageType::kRaft, topology()->version, std::move(bytes),
                  std::max(electionTimeout(), std::chrono::milliseconds(100)),
                  [](Result<Frame>) {});
  });
}

void NodeImpl::topologyCommitted(TopologyPtr t) {
  asio::post(netIo_, [this, t = std::move(t)]() mutable { commitTopology(std::move(t)); });
}

void NodeImpl::leadershipChanged(bool leader, std::uint64_t term) {
  asio::post(netIo_, [this, leader, term] {
    if (heartbeatsStopped_) return;
    if (!leader) {
      coordinator_.reset();
      return;
    }
    if (!control_ || !control_->isLeader() || control_->term() != term) return;  // stale news
    coordinator_ = std::make_unique<Coordinator>(static_cast<CoordinatorHost&>(*this));
    coordinator_->start();
    // Its own lease at once: the old leader's grant may be about to run out.
    if (memberId() != 0 && topology()->hasMember(memberId())) renewLease();
  });
}

void NodeImpl::leaderLearnt(MemberId leader, std::uint64_t /*term*/) {
  asio::post(netIo_, [this, leader] {
    if (heartbeatsStopped_ || leader == memberId()) return;
    // A new leader: ask it for the lease now rather than at the next tick, before the grant of
    // the old one runs out.
    if (memberId() != 0 && topology()->hasMember(memberId())) renewLease();
  });
}

}  // namespace ingrid
