// Recovery after a lost quorum (kRecover, sent by `ingrid-cli recover`): a survivor restarts its
// control plane from the recovered topology that the operator's plan gives every survivor
// (cluster/transport/recovery_plan.h; docs/operations.md, "Recovery after a lost quorum").
#include <algorithm>
#include <chrono>
#include <string>

#include "cluster/node_impl.h"
#include "cluster/transport/member_auth.h"

namespace ingrid {

void NodeImpl::handleRecover(const std::shared_ptr<Connection>& conn, Frame frame) {
  const FrameHeader header = frame.header;
  RecoverRequest req = decode<RecoverRequest>(frame.body);  // a bad body: onRequest answers
  const MemberId self = memberId();
  const std::string who = "member " + std::to_string(self) + " (" + selfAddress_ + ")";
  auto refuse = [&](Errc code, const std::string& why) {
    log_.warn({.member = knownMember(self)}, who, " refuses to recover: ", why);
    conn->replyError(header, Error(code, who + " refuses to recover: " + why));
  };
  const std::string topologyBytes = encode(TopologyBody{req.topology});
  if (!options_.clusterSecret.empty() &&
      !member_auth::sameProof(req.proof,
                              member_auth::recoverProof(options_.clusterSecret, self, topologyBytes,
                                                        req.term, req.index, req.force))) {
    return refuse(Errc::unauthenticated,
                  "the request does not prove the cluster secret (give ingrid-cli recover the "
                  "cluster's --cluster-secret-file)");
  }
  if (self == 0 || !control_ || rejoining_.load() || restored_.load() != 0) {
    return refuse(
        Errc::unavailable,
        "it is not a member now (joining, rejoining, or restored from its data directory)");
  }
  const Topology& next = req.topology;
  if (!next.hasMember(self)) {
    return refuse(Errc::invalid_argument,
                  "the recovered topology v" + std::to_string(next.version) + " does not list it");
  }
  const TopologyPtr cur = topology();
  if (next.version <= cur->version) {
    return refuse(Errc::invalid_argument, "it holds topology v" + std::to_string(cur->version) +
                                              " already, not older than the recovered v" +
                                              std::to_string(next.version) +
                                              " (recovered before?)");
  }
  if (auto why = successorInvalidReason(*cur, next)) return refuse(Errc::invalid_argument, *why);
  ControlStatus c = control_->status();
  // A member that does not vote hears nothing from the leader through Raft: its last lease grant
  // is its last word from a leader (the grant proves that leader led a lease before it runs out).
  if (lease_.everGranted()) {
    const auto grantAgo = std::chrono::duration_cast<std::chrono::milliseconds>(
        steadyNow() - lease_.until() + leaseDuration());
    c.leaderSilentMs = std::min<std::uint64_t>(
        c.leaderSilentMs, static_cast<std::uint64_t>(std::max<std::int64_t>(grantAgo.count(), 0)));
  }
  if (req.term <= c.term || req.index == 0) {
    return refuse(Errc::invalid_argument, "the recovery's Raft term " + std::to_string(req.term) +
                                              " is not above its term " + std::to_string(c.term) +
                                              " (or its log index is 0)");
  }
  // A member that heard from a leader lately may be part of a live quorum, and the leases that
  // leader granted may still run: only once it has been silent for a lease and an election
  // timeout may the survivors' new primaries act.
  const auto quiet = static_cast<std::uint64_t>((leaseDuration() + electionTimeout()).count());
  if (!req.force && (c.isLeader || c.leaderSilentMs < quiet)) {
    return refuse(Errc::unavailable,
                  c.isLeader ? "it leads the control plane in term " + std::to_string(c.term) +
                                   ": a quorum is alive (--force recovers anyway)"
                             : "it heard from the control plane's leader " +
                                   std::to_string(c.leaderSilentMs) +
                                   " ms ago: a quorum may be alive, and that leader's leases may "
                                   "still run; ask again once it has been silent for " +
                                   std::to_string(quiet) + " ms (--force recovers anyway)");
  }
  // The old Raft instance goes (and with it any leadership and coordinator); the new one starts
  // from the recovered topology, which raft hands back to commitTopology (restore).
  coordinator_.reset();
  control_->stop();
  control_.reset();
  const std::uint64_t previousVersion = cur->version;
  auto recovered = std::make_shared<const Topology>(std::move(req.topology));
  // The data directory's Raft state is the old control plane's: the new one starts from the
  // recovered topology alone.
  Result<bool> started = claimDataDir(self);
  if (started) {
    started =
        startControl(self, /*bootstrap=*/false, ControlRecovery{recovered, req.term, req.index});
  }
  if (!started) {
    // Without a control plane this member takes no part until restarted; say so loudly.
    return refuse(Errc::unavailable,
                  "its control plane did not restart: " + started.error().detail() +
                      "; restart this process and run recover again");
  }
  log_.info({.member = knownMember(self), .term = req.term}, who,
            " recovered: its control plane restarted from topology v", recovered->version,
            " (was v", previousVersion, ", term ", c.term, ") in term ", req.term, " with ",
            recovered->members.size(), " voter(s)");
  conn->reply(header, MessageType::kRecover, topology()->version,
              encode(RecoverReply{self, previousVersion, c.term}));
}

}  // namespace ingrid
