// NodeImpl's start and stop: the order in which a member's parts (transport, shard ports, data
// plane, control plane, heartbeats) come up, and go down again (stop(), crash()); a first
// member's bootstrap.
#include "cluster/node_impl.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cluster/transport/tls.h"

namespace ingrid {

std::uint64_t NodeImpl::randomIncarnation() {
  if (SimulatedMember* sim = simulatedMember()) return sim->random();
  std::random_device random;
  return (std::uint64_t{random()} << 32) | random();
}

NodeImpl::NodeImpl(NodeOptions options, ProcessorRegistry registry)
    : options_(std::move(options)),
      registry_(std::move(registry)),
      clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()),
      log_(options_.logSink, options_.logLevel),
      incarnation_(randomIncarnation()) {}

NodeImpl::~NodeImpl() { stop(); }

Result<bool> NodeImpl::start() {
  if (state_.load() != kCreated) {
    return Error(Errc::not_running, "start(): a Node is started once; this one already was");
  }
  sim_ = simulatedMember();
  if (sim_) {
    // No thread of its own: the partitions run on the network thread, which the simulator polls
    // (so there are no shard ports either: they would run on the workers' threads).
    if (options_.listenAddress.empty()) {
      return Error(Errc::invalid_configuration,
                   "NodeOptions.listenAddress is empty: a simulated node needs one (its "
                   "partitions run on the network thread)");
    }
    options_.partitionsOnNetworkThread = true;
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
  if (options_.minInSyncReplicas > 1 && options_.replication == ReplicationMode::kAsyncBackups) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.minInSyncReplicas above 1 needs synchronous replication (kSync): "
                 "with kAsyncBackups the answer goes out before any backup holds the write");
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
  const DataPlaneOptions dataOptions{.partitions = options_.partitions,
                                     .replication = options_.replication,
                                     .minInSyncReplicas = options_.minInSyncReplicas,
                                     .minMembers = options_.minMembers,
                                     .requestTimeout = options_.requestTimeout,
                                     .dedupWindow = options_.dedupWindow,
                                     .heartbeatInterval = options_.heartbeatInterval,
                                     .expirySweepInterval = options_.expirySweepInterval,
                                     .expirySweepEntries = options_.expirySweepEntries};
  data_ = std::make_unique<DataPlane>(static_cast<DataPlaneHost&>(*this), dataOptions, registry_,
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
    committed_ = empty;
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
  if (sim_) {
    sim_->adopt(netIo_);  // forgotten by stop()
  } else {
    netThread_ = std::thread([this] { netIo_.run(); });
  }
  state_.store(kRunning, std::memory_order_release);
  Result<MemberId> restored = openDataDir();
  if (!restored) {
    stop();
    return std::move(restored).error();
  }
  // A restored member never starts a cluster: it joins the one its log names.
  Result<bool> joined = *restored != 0 ? join(options_.seeds)
                        : options_.seeds.empty() && !options_.seedProvider
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
  if (Result<bool> claimed = claimDataDir(1); !claimed) return claimed;
  selfId_.store(1, std::memory_order_release);
  std::promise<Result<bool>> made;
  asio::post(netIo_, [this, &made] { made.set_value(startControl(1, /*bootstrap=*/true)); });
  auto answer = made.get_future();
  waitFor(answer);
  Result<bool> started = answer.get();
  if (!started) return started;
  if (waitUntil(steadyNow() + options_.joinTimeout, [this] { return topology()->hasMember(1); })) {
    log_.info({.member = 1}, selfAddress_, " started a new cluster as its member 1");
    return true;
  }
  return Error(Errc::unavailable, "the control plane of the first member " + selfAddress_ +
                                      " committed no topology within " +
                                      std::to_string(options_.joinTimeout.count()) + " ms");
}

bool NodeImpl::waitUntil(SteadyTime deadline, const std::function<bool()>& ready) {
  if (sim_) return sim_->block(deadline, ready);
  std::unique_lock lock(topoMu_);
  return topoCv_.wait_until(lock, deadline, ready);
}

void NodeImpl::pauseUntil(SteadyTime deadline) {
  if (sim_) {
    const std::uint64_t seen = topoNotified_.load();
    sim_->block(deadline, [this, seen] { return topoNotified_.load() != seen; });
    return;
  }
  std::unique_lock lock(topoMu_);
  topoCv_.wait_until(lock, deadline);
}

void NodeImpl::stop() {
  if (stopCalled_.exchange(true)) return;  // stopping or stopped elsewhere
  if (state_.load() == kCreated) {
    state_.store(kStopped);
    return;
  }
  {
    std::lock_guard lock(topoMu_);  // wakes a rejoin waiting for its topology
    topoNotified_.fetch_add(1);
  }
  topoCv_.notify_all();
  std::thread rejoining;
  std::vector<std::unique_ptr<SimulatedMember::Thread>> simRejoining;
  {
    std::lock_guard lock(rejoinMu_);
    rejoining = std::move(rejoinThread_);
    simRejoining = std::move(simRejoins_);
  }
  if (rejoining.joinable()) rejoining.join();  // it sees stopCalled_ and ends
  for (auto& t : simRejoining) t->join();
  // 1. Hand this member's partitions over while still serving (graceful leave), then keep
  //    answering (redirects) for the drain period so that stale senders learn where keys went.
  if (transport_ && state_.load() == kRunning && !crashed_.load()) {
    leave();
    // A grace period, not a condition: the senders it serves (clients with a stale topology)
    // cannot be observed from here; they learn the new owners from the redirects it answers.
    if (sim_) {
      sim_->block(steadyNow() + options_.drainPeriod, [] { return false; });
    } else {
      std::this_thread::sleep_for(options_.drainPeriod);
    }
  }
  // 2. Refuse new invocations; let every admitted one finish.
  state_.store(kStopping, std::memory_order_release);
  if (sim_) {
    sim_->block(SteadyTime::max(), [this] { return inflight_.load() == 0; });
  } else {
    for (std::int64_t n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  }
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
      for (auto& [id, peer] : departed_) peer->close();
      departed_.clear();
      if (shardLinks_) shardLinks_->closeAll();
      transport_->stop();
      // Handlers queued by the closes above may still reach the coordinator: stop first.
      netIo_.stop();
    });
    if (sim_) {
      // Adopted by start() (a transport here means it was): polled until the close above stops it.
      sim_->block(SteadyTime::max(), [this] { return netIo_.stopped(); });
      sim_->forget(netIo_);
    }
    if (netThread_.joinable()) netThread_.join();
    control_.reset();
  }
  // A member that has left (a committed topology without it) is no longer anyone's Raft server:
  // the next process with this directory starts afresh instead of voting as it.
  if (dataDir_ && restored_.load() == 0 && memberId() != 0 && !topology()->hasMember(memberId())) {
    if (Result<bool> forgot = dataDir_->forget(); !forgot) {
      log_.error({.member = knownMember(memberId())}, selfAddress_, ": ", forgot.error().message());
    }
  }
  // 4. Close the shard ports (on their workers, which run the closes before they end), then drain
  //    and join the partition workers.
  stopShardPorts();
  if (data_) data_->stop();
  state_.store(kStopped, std::memory_order_release);
}

}  // namespace ingrid
