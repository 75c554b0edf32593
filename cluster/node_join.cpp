// NodeImpl joining a cluster: the seed rounds (NodeOptions::seeds and the seed provider's
// discovery), the Join and its redirects, bootstrapExpect's rule, and a removed member's rejoin as
// a new member.
#include "cluster/node_impl.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/transport/member_auth.h"

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

std::vector<std::string> NodeImpl::seedRound(const std::vector<std::string>& seeds,
                                             std::vector<std::string>* discovered,
                                             std::string* providerError) const {
  std::vector<std::string> out;
  auto add = [&](const std::string& a) {
    if (a != selfAddress_ && std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  for (const std::string& a : seeds) add(a);
  if (restored_.load() != 0) {  // its log names the members: they are where the cluster is
    std::lock_guard lock(committedMu_);
    for (const std::string& a : committedAddresses_) add(a);
  }
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
  auto deadline = steadyNow() + options_.joinTimeout;
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
  while (steadyNow() < deadline) {
    if (stopCalled_.load()) return Error(Errc::shutting_down, "stopped while joining");
    if (targets.empty()) {
      if (const MemberId was = restored_.load(); was != 0 && restoredAlone()) {
        log_.warn({.member = was}, selfAddress_, ": member ", was,
                  ", whose Raft state it restored, was the cluster's only member: its buckets "
                  "went with it and no one is left to join; it starts a new cluster");
        return startAfresh();
      }
      if (mayBootstrap && options_.bootstrapExpect > 0 && !clusterSeen &&
          std::find(discovered.begin(), discovered.end(), selfAddress_) != discovered.end() &&
          idle.size() + 1 >= options_.bootstrapExpect &&
          (idle.empty() || selfAddress_ < *idle.begin())) {
        log_.info({}, selfAddress_, " starts a new cluster: it is the smallest of ",
                  idle.size() + 1, " nodes found in no cluster (bootstrapExpect ",
                  options_.bootstrapExpect, ")");
        return bootstrap();
      }
      if (mayBootstrap && options_.bootstrapExpect > 0 && !warnedNotListed && !discovered.empty() &&
          std::find(discovered.begin(), discovered.end(), selfAddress_) == discovered.end()) {
        warnedNotListed = true;
        log_.warn({}, selfAddress_, " is not among the ", discovered.size(),
                  " discovered addresses (first: ", discovered.front(),
                  "): it will join, never start a cluster (bootstrapExpect ",
                  options_.bootstrapExpect, "); advertise the address the name lists");
      }
      pauseUntil(steadyNow() + std::chrono::milliseconds(100));  // between rounds of seeds
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
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steadyNow());
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
    waitFor(answer);  // each request has its timeout: it is answered
    Result<Frame> reply = answer.get();
    // Only "come again" answers extend the wait: "unavailable" (a busy leader, a member's
    // address still leased) and a redirect that decodes (below); not a reply that does not.
    if (!reply && reply.error() == Errc::unavailable) {
      deadline = std::max(deadline, steadyNow() + options_.joinTimeout);
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
    MemberId admitted = 0;
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
        deadline = std::max(deadline, steadyNow() + options_.joinTimeout);
        continue;
      }
      const JoinReply joined = decode<JoinReply>(reply->body);
      if (joined.memberId == 0) throw std::invalid_argument("member id 0");
      admitted = joined.memberId;
    } catch (const std::exception& e) {
      lastError = seed + ": reply does not decode: " + e.what();
      continue;
    }
    // Admitted: the leader sends this member each topology it commits (the first one listing
    // this member makes the join complete). One committed before this member knew its id (its
    // join's answer was lost) found no link to it: it asks the leader too.
    // It waits at least a join timeout from the admission: the change that lists it may wait its
    // turn.
    const auto admittedBy = std::max(deadline, steadyNow() + options_.joinTimeout);
    std::promise<Result<bool>> made;
    asio::post(netIo_, [this, &made, admitted, seed, admittedBy] {
      Result<bool> became = becomeMember(admitted);
      if (became) awaitAdmission(seed, admitted, admittedBy);
      made.set_value(std::move(became));
    });
    auto becameMember = made.get_future();
    waitFor(becameMember);
    if (Result<bool> started = becameMember.get(); !started) return started;
    const bool member = waitUntil(
        admittedBy, [this] { return topology()->hasMember(memberId()) || stopCalled_.load(); });
    if (member && !stopCalled_.load()) {
      // A rejoin says so itself (rejoin()).
      if (!rejoining_.load()) {
        log_.info({.member = admitted}, selfAddress_, " joined the cluster as member ", admitted,
                  " (admitted by the leader at ", seed, ")");
      }
      return true;
    }
    if (stopCalled_.load()) return Error(Errc::shutting_down, "stopped while joining");
    // The id was given by a leader whose change never committed (it lost leadership first; the
    // next leader may give that id to another joiner). This node forgets it and joins again, with
    // the same incarnation: if that change did commit after all, the leader answers with the same
    // id (Coordinator::requestJoin).
    log_.warn({.member = admitted}, selfAddress_, " was admitted as member ", admitted,
              " but no topology listing it arrived within ", options_.joinTimeout.count(),
              " ms; it forgets that id and joins again");
    // Shared: stop() may end this wait first (its network thread then never runs the forget).
    struct Forgot {
      bool listed = false;  // a topology listing it arrived after all: joined
      std::optional<Error> error;
    };
    auto forgot = std::make_shared<std::promise<Forgot>>();
    auto forgotten = forgot->get_future();
    asio::post(netIo_, [this, forgot, admitted] {
      // A topology listing it may have arrived since the wait ended (a watch's answer, a push).
      if (topology()->hasMember(admitted)) {
        forgot->set_value(Forgot{true, std::nullopt});
        return;
      }
      forgetIdentity();
      Forgot f;
      // The data directory no longer names that id (a restart would claim it).
      if (dataDir_) {
        if (Result<bool> r = dataDir_->forget(); !r) f.error = std::move(r).error();
      }
      forgot->set_value(std::move(f));
    });
    while (!waitFor(forgotten, steadyNow() + std::chrono::milliseconds(50))) {
      if (stopCalled_.load()) return Error(Errc::shutting_down, "stopped while joining");
    }
    Forgot f = forgotten.get();
    if (f.listed) return true;
    if (f.error) return std::move(*f.error);
    lastError = "admitted as member " + std::to_string(admitted) +
                " but no topology with it arrived (it forgot that id and asked again)";
    deadline = std::max(deadline, steadyNow() + options_.joinTimeout);
    targets.assign(round.begin(), round.end());
  }
  // The seed provider's latest failure is kept beside the seeds' (a name that stopped resolving
  // explains why no seed answered).
  if (!providerError.empty() && lastError.find(providerError) == std::string::npos) {
    lastError += "; " + providerError;
  }
  return Error(Errc::unreachable,
               "could not join through seeds [" + tried + "]: none answered for " +
                   std::to_string(options_.joinTimeout.count()) + " ms; last error: " + lastError);
}

void NodeImpl::awaitAdmission(const std::string& address, MemberId admitted,
                              SteadyClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steadyNow());
  if (!transport_ || stopCalled_.load() || left.count() <= 0 || memberId() != admitted ||
      topology()->hasMember(admitted)) {
    return;  // stopped, given up (a rejoin forgot that id), or admitted
  }
  // A watch: answered once the leader installs a topology newer than the newest this member has
  // seen (committed_, which a topology that does not list it yet advances too), or after a second
  // with the one it has (each answer is installed if it can follow this member's).
  auto probe = Peer::create(*transport_, address, clientLinkOptions(options_.clientSecret));
  const auto wait = std::min(left, std::chrono::milliseconds(1000));
  probe->request(
      MessageType::kGetTopology, topology()->version,
      encode(WatchTopologyBody{committed_->version, static_cast<std::uint32_t>(wait.count())}),
      wait + options_.requestTimeout, [this, probe, address, admitted, deadline](Result<Frame> r) {
        probe->close();
        if (r) {
          try {
            commitTopology(std::make_shared<Topology>(decode<TopologyBody>(r->body).topology));
          } catch (const std::exception&) {
            // Undecodable: asked again below.
          }
        } else if (r.error() != Errc::timeout) {
          return;  // the leader is gone or refuses: the join's wait runs out and it tries again
        }
        awaitAdmission(address, admitted, deadline);
      });
}

void NodeImpl::rejoin(std::vector<std::string> seeds) {
  // 0. Keep the old Raft server a while: the others may need its vote to commit its removal from
  //    the Raft configuration (with 2 voters, always). Wait until its vote is not needed (out of
  //    the configuration as it knows it, or the other voters are a majority without it) and it
  //    does not lead, or it has not led for a few elections' time; bounded by joinTimeout.
  const auto start = steadyNow();
  SteadyClock::time_point notLeadingSince = start;
  bool notLeading = false;
  while (!stopCalled_.load() && steadyNow() - start < options_.joinTimeout) {
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
    if (!waitFor(answer, steadyNow() + std::chrono::seconds(1))) break;
    const auto [leads, needed] = answer.get();
    if (!needed && !leads) break;
    if (leads) {
      notLeading = false;
    } else if (!notLeading) {
      notLeading = true;
      notLeadingSince = steadyNow();
    } else if (steadyNow() - notLeadingSince > 3 * electionTimeout()) {
      break;
    }
    // A bounded poll; stop() notifies.
    waitUntil(steadyNow() + std::chrono::milliseconds(20), [this] { return stopCalled_.load(); });
  }
  // 1. Forget the old identity (network thread): its control plane, role, links and lease. Also
  //    before each new attempt (an admission that never completed left a control plane behind).
  auto forget = [this]() -> bool {
    auto forgot = std::make_shared<std::promise<void>>();  // shared: stop() may end the wait first
    auto forgotten = forgot->get_future();
    asio::post(netIo_, [this, forgot] {
      forgetIdentity();
      incarnation_.store(randomIncarnation());
      auto empty = std::make_shared<Topology>();
      empty->table = PartitionTable(options_.partitions,
                                    std::vector<std::vector<MemberId>>(options_.partitions));
      empty->backups = options_.backups;
      committed_ = empty;
      {
        std::lock_guard lock(topoMu_);
        topology_.store(std::move(empty));
      }
      forgot->set_value();
    });
    while (!waitFor(forgotten, steadyNow() + std::chrono::milliseconds(50))) {
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
      log_.info({.member = knownMember(memberId())}, selfAddress_, " joined again as member ",
                memberId());
      break;
    }
    if (stopCalled_.load()) break;
    log_.warn({}, selfAddress_, " could not join again: ", joined.error().message(),
              "; trying again in ", backoff.count(), " ms");
    waitUntil(steadyNow() + backoff, [this] { return stopCalled_.load(); });  // stop() notifies
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
  rejoining_.store(false);
}

}  // namespace ingrid
