// Replication to the backups: an update's attempts to each backup (on its partition's worker,
// retried until the backup answers, leaves the partition's owners or the deadline passes), the
// path each takes, the backups that lag, and the caller answered once every backup has answered.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "cluster/transport/timer.h"

#include "cluster/shard/data_plane.h"

namespace ingrid {

bool DataPlane::stillPrimaryOf(PartitionId p) const {
  const MemberId self = memberId();
  return self != 0 && topology()->table.primary(p) == self;
}

void DataPlane::noteLagging(PartitionId p, MemberId b, std::uint64_t seq) {
  Replica& rep = replicas_[p];
  auto it = std::find_if(rep.primary.lagging.begin(), rep.primary.lagging.end(),
                         [b](const auto& l) { return l.first == b; });
  if (it == rep.primary.lagging.end()) {
    rep.primary.lagging.emplace_back(b, seq);
  } else {
    it->second = std::max(it->second, seq);
  }
  rep.primary.laggingCount.store(static_cast<std::uint32_t>(rep.primary.lagging.size()),
                                 std::memory_order_relaxed);
}

void DataPlane::noteCaughtUp(PartitionId p, MemberId b, std::uint64_t seq) {
  Replica& rep = replicas_[p];
  if (rep.primary.lagging.empty()) return;  // the common case, on every acknowledgement: no store
  std::erase_if(rep.primary.lagging,
                [&](const auto& l) { return l.first == b && l.second <= seq; });
  rep.primary.laggingCount.store(static_cast<std::uint32_t>(rep.primary.lagging.size()),
                                 std::memory_order_relaxed);
}

void DataPlane::replicate(std::shared_ptr<Replication> r, TopologyPtr topo,
                          Result<std::string> result,
                          std::chrono::steady_clock::time_point deadline, RawCompletion done) {
  const PartitionId p = r->partition;
  r->pending = topo->table.owners(p).size() - 1;
  r->result = std::move(result);
  if (options_.replication == ReplicationMode::kAsyncBackups) {
    // Answer first; a failover may lose this update (documented). A pooled copy: the record's
    // own goes back when the record does.
    done(r->result.ok() ? Result<std::string>(StringPool::copy(*r->result)) : r->result);
  } else {
    r->done = std::move(done);
  }
  replicas_[p].primary.outstanding.fetch_add(1, std::memory_order_acq_rel);
  // From p's worker, where it stays: batched there per backup link, sent on the worker's own
  // links, and answered there when the acknowledgements come back.
  const std::vector<MemberId>& owners = topo->table.owners(p);
  for (std::size_t i = 1; i < owners.size(); ++i) sendUpdate(owners[i], r, deadline, topo, true);
}

std::pair<std::shared_ptr<Peer>, DataPlane::LinkKey> DataPlane::replicationPath(
    PartitionId p, const MemberInfo& to) {
  if (!replicatesOnShardPorts(host_.runsShardPorts(), to)) return {nullptr, {to.id, kViaNetwork}};
  return {host_.replicaLink(workers_.workerOf(p), to, p),
          LinkKey{to.id, static_cast<std::uint32_t>(p % to.shardPorts.size())}};
}

std::string DataPlane::replicationFailure(const Replication& r) {
  return (r.outcome && r.outcome->barrier ? "confirming a request of a former primary of partition "
                                          : "replicating a request's update on partition ") +
         std::to_string(r.partition) + " failed (" + r.failures + "): ask again";
}

void DataPlane::sendUpdate(MemberId b, std::shared_ptr<Replication> repl,
                           std::chrono::steady_clock::time_point deadline, const TopologyPtr& topo,
                           bool first) {
  // Its captures fit a UniqueFunction's inline buffer (64 bytes): no allocation per backup.
  auto arrive = [this, b, repl, deadline, topo, first](Result<Frame> r) mutable {
    const PartitionId p = repl->partition;
    bool dropped = false;  // by a newer topology: released, but holds nothing we count
    if (!r && judgeFailedAttempt(p, b, *topo, r.error(), deadline)) {
      r = Frame{};
      dropped = true;
    }
    if (!r) {
      if (stillPrimaryOf(p)) noteLagging(p, b, repl->seq);
      host_.memberUnanswered(b);
      if (first && (r.error() == Errc::unavailable || r.error() == Errc::shutting_down ||
                    r.error() == Errc::not_running)) {
        // The backup missed an update and asks for a fresh snapshot (or its link is down, and
        // the snapshot goes once it is back).
        resyncBackup(p, b);
      }
      if (steadyNow() < deadline && !host_.stopped() && !closing_.load()) {
        // Sync replication waits for every live backup: try again until the backup answers,
        // is declared failed (the topology drops it), or the deadline passes.
        retryUpdate(b, repl, deadline, topo);
        return;
      }
      if (!repl->failures.empty()) repl->failures += "; ";
      repl->failures += "backup member " + std::to_string(b) + ": " + r.error().message();
    }
    if (r && !dropped && topo->syncingReplica(p, b) == nullptr) ++repl->copies;
    if (r) noteCaughtUp(p, b, dropped ? ~std::uint64_t{0} : repl->seq);
    if (--repl->pending != 0) return;
    finishReplication(*repl, *topo);
  };
  const MemberInfo* info = topo->member(b);
  if (!info) {
    arrive(Error(Errc::unreachable, "no address known"));
    return;
  }
  if (closing_.load()) {  // no new link is made for it
    arrive(Error(Errc::shutting_down, "member " + std::to_string(memberId()) + " is stopping"));
    return;
  }
  auto [peer, key] = replicationPath(repl->partition, *info);
  Lane& lane = *lanes_[workers_.workerOf(repl->partition)];
  queueUpdate(lane, key, std::move(peer), topo->version, std::move(repl), deadline,
              std::move(arrive));
}

bool DataPlane::judgeFailedAttempt(PartitionId p, MemberId b, const Topology& made, const Error& e,
                                   std::chrono::steady_clock::time_point& deadline) {
  if (e == Errc::not_owner) {
    // The backup names another primary, or a newer epoch: this member may have been deposed.
    // Learn the backup's topology (installed if newer); the next attempt is judged by it.
    if (const MemberInfo* info = made.member(b)) {
      onNetwork([this, b, address = info->address] { host_.catchUp(b, address); });
    }
  }
  const TopologyPtr now = topology();
  // (A member that lost its id, removed and rejoining, leads nothing: not even the empty
  // table's partitions, whose primary is 0 too.)
  const MemberId self = memberId();
  const bool stillPrimary = self != 0 && now->table.primary(p) == self;
  if (stillPrimary && now->version > made.version && !now->table.isOwner(p, b)) {
    // A newer committed topology keeps this member the primary and no longer lists the
    // backup (moved away, or declared failed): no copy anyone relies on waits for it.
    return true;
  }
  if (!stillPrimary) {
    // Deposed meanwhile (a newer committed topology names another primary): the refusal is
    // not an acknowledgement, and waiting longer cannot make it one.
    deadline = steadyNow();
  }
  return false;
}

void DataPlane::resyncBackup(PartitionId p, MemberId b) {
  // One at a time: the other updates of the partition that failed with it find that one under
  // way.
  workers_.dispatch(p, [this, p, b](PartitionStore& store) {
    const TopologyPtr t = topology();
    if (t->table.primary(p) != memberId() || !t->table.isOwner(p, b)) return;
    Replica& rep = replicas_[p];
    if (std::find(rep.primary.snapshotsUnderWay.begin(), rep.primary.snapshotsUnderWay.end(), b) ==
        rep.primary.snapshotsUnderWay.end()) {
      sendSnapshot(p, store, b, t->version);
    } else if (std::find(rep.primary.snapshotsWanted.begin(), rep.primary.snapshotsWanted.end(),
                         b) == rep.primary.snapshotsWanted.end()) {
      // The one under way may be older than what the backup now lacks: another follows.
      rep.primary.snapshotsWanted.push_back(b);
    }
  });
}

void DataPlane::retryUpdate(MemberId b, const std::shared_ptr<Replication>& repl,
                            std::chrono::steady_clock::time_point deadline,
                            const TopologyPtr& topo) {
  auto timer = std::make_shared<Timer>(workers_.io(workers_.workerOf(repl->partition)),
                                       std::chrono::milliseconds(50));
  // With the topology the update was made under: a newer one that drops the backup (or
  // this primary) is judged against it when the attempt fails.
  timer->async_wait([this, timer, b, repl, deadline, topo](std::error_code) mutable {
    // Once the node stops, the attempt fails at once (no new link is made for it).
    if (closing_.load()) deadline = steadyNow();
    sendUpdate(b, std::move(repl), deadline, topo, false);
  });
}

void DataPlane::finishReplication(Replication& repl, const Topology& topo) {
  const PartitionId p = repl.partition;
  if (repl.failures.empty() && repl.copies < options_.minInSyncReplicas) {
    repl.failures = "held by " + std::to_string(repl.copies) + " cop" +
                    (repl.copies == 1 ? "y" : "ies") + ", fewer than minInSyncReplicas " +
                    std::to_string(options_.minInSyncReplicas);
  }
  if (repl.failures.empty() &&
      repl.copies < std::min<std::size_t>(topo.backups + 1, topo.members.size())) {
    degradedWrites_.fetch_add(1, std::memory_order_relaxed);
  }
  if (repl.outcome) {  // answers the copies of the request parked on it, too
    if (repl.failures.empty()) {
      // The answer as it lies (a copy is made only for each copy parked on it).
      repl.outcome->resolve(ReplicationOutcome::kAcknowledged,
                            repl.result.ok() ? std::string_view(*repl.result) : std::string_view(),
                            Error());
    } else {
      // The copies waiting on it did not run: each is asked to come again, and its retry
      // learns the outcome where it is recorded (indeterminate on this primary; the answer,
      // after a barrier, on a new one).
      repl.outcome->resolve(ReplicationOutcome::kFailed, {},
                            Error(Errc::unavailable, replicationFailure(repl)));
    }
  }
  replicas_[p].primary.outstanding.fetch_sub(1, std::memory_order_acq_rel);
  if (!repl.done) return;
  // Released once called (the connection it holds must not outlive its answer).
  RawCompletion done = std::exchange(repl.done, RawCompletion{});
  countRequest(p, repl.processor,
               repl.failures.empty() ? RequestMetrics::outcomeOf(repl.verdict)
                                     : static_cast<std::size_t>(Errc::indeterminate),
               repl.failures.empty() && repl.verdict.nearLimit, repl.started);
  if (repl.failures.empty()) {
    done(std::move(repl.result));
  } else if (repl.outcome && repl.outcome->barrier) {
    // The request ran on a former primary and its answer stands: a failed barrier is no
    // verdict on it. The retry finds the record inherited again and tries another barrier.
    done(Error(Errc::unavailable, replicationFailure(repl)));
  } else {
    done(Error(Errc::indeterminate, "applied on the primary of partition " + std::to_string(p) +
                                        ", but " + repl.failures));
  }
  repl.failures = {};
}

}  // namespace ingrid
