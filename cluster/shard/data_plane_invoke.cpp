// The primary's side of the data plane: execution on the partition's worker, the dedup table,
// synchronous replication to the backups (group commit per backup), and barriers.
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <tuple>
#include <utility>

#include <ingrid/string_pool.h>
#include "cluster/shard/data_plane.h"
#include "grid/block_cache.h"

namespace ingrid {
namespace {

std::string partitionName(PartitionId p) { return "partition " + std::to_string(p); }

// A replication batch leaves once its updates hold about this many bytes (or at kMaxUpdates).
constexpr std::size_t kMaxBatchBytes = 1u << 20;

}  // namespace

void DataPlane::countRequest(PartitionId p, std::size_t processor, std::size_t outcome,
                             bool nearLimit, std::chrono::steady_clock::time_point started) {
  if (processor >= registry_.size()) return;
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - started)
                         .count();
  lanes_[workers_.workerOf(p)]->metrics.count(
      processor, outcome, nearLimit, static_cast<std::uint64_t>(std::max<long long>(nanos, 0)));
}

void DataPlane::addMetrics(RequestMetricsTotal& into) const {
  for (const auto& lane : lanes_) into.add(lane->metrics);
}

void DataPlane::execute(PartitionId p, PartitionStore& store, std::string_view key,
                        ErasedProcessorFn fn, std::size_t processor, std::string_view args,
                        const RequestId& id, std::chrono::steady_clock::time_point deadline,
                        RawCompletion done) {
  const auto steadyNow = std::chrono::steady_clock::now();
  // Counted as it is answered here (a refusal, or a run that needs no replication); a redirect
  // (not_owner) is not: the request is counted where it is served.
  const auto answer = [&](Result<std::string> r, ProcessorVerdict verdict = {}) {
    if (r.ok() || r.error() != Errc::not_owner) {
      countRequest(
          p, processor,
          r.ok() ? RequestMetrics::outcomeOf(verdict) : RequestMetrics::outcomeOf(r.error()),
          r.ok() && verdict.nearLimit, steadyNow);
    }
    done(std::move(r));
  };
  Replica& rep = replicas_[p];
  const TopologyPtr topo = topology();
  const MemberId self = memberId();
  // A member without an id (joining, or rejoining after it was removed) leads nothing, not even
  // the partitions of an empty table (whose primary is 0 too).
  if (self == 0 || topo->table.primary(p) != self) {
    answer(Error(Errc::not_owner, "member " + std::to_string(self) + " is not the primary of " +
                                      partitionName(p) + " at topology " +
                                      std::to_string(topo->version)));
    return;
  }
  if (rep.fenced) {
    answer(Error(Errc::unavailable, partitionName(p) + " is moving to another member"));
    return;
  }
  if (id.valid()) {
    const DedupTable::Lookup seen = store.dedup().find(id, steadyNow);
    if (seen.kind == DedupTable::Lookup::kAnswered) {
      done(StringPool::copy(seen.result));  // ran before: its answer, and it does not run again
      return;
    }
    if (seen.kind == DedupTable::Lookup::kPending && seen.outcome->park(done)) {
      // A copy of a request whose update is still replicating: answered once that resolves.
      parkedCopies_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (seen.kind == DedupTable::Lookup::kInherited) {
      confirmInherited(p, store, topo, id, std::string(seen.result), deadline, std::move(done));
      return;
    }
    if (seen.kind != DedupTable::Lookup::kNew) {
      done(dedupAnswer(p, id, seen));
      return;
    }
  }
  if (steadyNow >= deadline) {
    const auto late =
        std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow - deadline).count();
    answer(Error(Errc::timeout, "the deadline passed " + std::to_string(late) +
                                    " ms before the request started on " + partitionName(p) +
                                    ": not run"));
    return;
  }
  // No request outlives its dedup record: a retry of it can still find its answer.
  deadline = std::min(deadline, steadyNow + options_.dedupWindow / 2);
  const Nanos now = clock_->now();
  MutableEntry entry(key, store.find(key, now));
  ProcessorVerdict verdict;
  Result<std::string> result = fn(args, entry, now, &verdict);
  executed_.fetch_add(1, std::memory_order_relaxed);
  if (!result.ok() || entry.change() == MutableEntry::Change::kNone) {
    answer(std::move(result), verdict);  // a failed processor changes nothing
    return;
  }
  if (std::optional<Error> refused = writeRefusal(p, *topo)) {
    answer(std::move(*refused));
    return;
  }
  const std::optional<EntryView> stored = store.apply(key, entry, now);
  const std::vector<MemberId>& owners = topo->table.owners(p);
  if (owners.size() <= 1) {
    pruneLagging(p, [](MemberId) { return false; });  // no backup left to lag
    advance(p, *topo);  // numbered like every change, with no backup to send it to
    if (topo->members.size() > 1 && topo->backups > 0) {  // a backup is missing
      degradedWrites_.fetch_add(1, std::memory_order_relaxed);
    }
    if (id.valid()) store.dedup().record(id, *result, nullptr, steadyNow);
    answer(std::move(result), verdict);
    return;
  }
  // The update is encoded here, from the stored entry and the answer where they lie.
  ReplicateUpdateView update = nextUpdate(p, *topo);
  update.key = key;
  if (stored) {
    update.kind = ReplicateBody::kPut;
    update.value = stored->value;
    update.expiresAt = stored->expiresAt;
  } else {
    update.kind = ReplicateBody::kRemove;
  }
  if (id.valid()) {
    update.client = id.client;
    update.requestSeq = id.seq;
    update.doneBelow = id.doneBelow;
    update.result = *result;
  }
  std::shared_ptr<Replication> r = makeReplication(update);
  if (options_.replication == ReplicationMode::kAsyncBackups) {
    countRequest(p, processor, RequestMetrics::outcomeOf(verdict), verdict.nearLimit, steadyNow);
  } else {  // counted when the backups have answered
    r->processor = processor;
    r->verdict = verdict;
    r->started = steadyNow;
  }
  // Recorded before it replicates, from the answer where it lies (no copy of it), with the
  // outcome the replication resolves.
  if (id.valid()) store.dedup().record(id, *result, trackOutcome(*r), steadyNow);
  replicate(std::move(r), topo, std::move(result), deadline, std::move(done));
}

std::optional<Error> DataPlane::writeRefusal(PartitionId p, const Topology& topo) const {
  const MemberId self = memberId();
  if (!host_.holdsLease()) {  // invariant 13: no write without a valid primary lease
    return Error(Errc::unavailable, "member " + std::to_string(self) +
                                        " holds no valid primary lease (no renewal from "
                                        "the control plane's leader within " +
                                        std::to_string(host_.leaseDuration().count()) +
                                        " ms): the write to " + partitionName(p) +
                                        " is refused, nothing changed");
  }
  if (options_.minInSyncReplicas > 1) {
    std::size_t complete = 0;
    for (MemberId m : topo.table.owners(p)) complete += topo.syncingReplica(p, m) ? 0 : 1;
    if (complete < options_.minInSyncReplicas) {
      return Error(Errc::unavailable,
                   partitionName(p) + " has " + std::to_string(complete) + " complete cop" +
                       (complete == 1 ? "y" : "ies") +
                       " (its primary and complete backups), fewer than minInSyncReplicas " +
                       std::to_string(options_.minInSyncReplicas) +
                       ": the write is refused, nothing changed (taken again once a backup has "
                       "its snapshot)");
    }
  }
  if (topo.members.size() < options_.minMembers) {  // split-brain protection: no write
    return Error(Errc::no_quorum,
                 "member " + std::to_string(self) + " sees " + std::to_string(topo.members.size()) +
                     " member(s), fewer than minMembers " + std::to_string(options_.minMembers) +
                     ": the write to " + partitionName(p) + " is refused");
  }
  return std::nullopt;
}

bool DataPlane::stillPrimaryOf(PartitionId p) const {
  const MemberId self = memberId();
  return self != 0 && topology()->table.primary(p) == self;
}

void DataPlane::noteLagging(PartitionId p, MemberId b, std::uint64_t seq) {
  Replica& rep = replicas_[p];
  auto it = std::find_if(rep.lagging.begin(), rep.lagging.end(),
                         [b](const auto& l) { return l.first == b; });
  if (it == rep.lagging.end()) {
    rep.lagging.emplace_back(b, seq);
  } else {
    it->second = std::max(it->second, seq);
  }
  rep.laggingCount.store(static_cast<std::uint32_t>(rep.lagging.size()), std::memory_order_relaxed);
}

void DataPlane::noteCaughtUp(PartitionId p, MemberId b, std::uint64_t seq) {
  Replica& rep = replicas_[p];
  if (rep.lagging.empty()) return;  // the common case, on every acknowledgement: no store
  std::erase_if(rep.lagging, [&](const auto& l) { return l.first == b && l.second <= seq; });
  rep.laggingCount.store(static_cast<std::uint32_t>(rep.lagging.size()), std::memory_order_relaxed);
}

std::uint64_t DataPlane::advance(PartitionId p, const Topology& topo) {
  Replica& rep = replicas_[p];
  const std::uint64_t prevEpoch = rep.lastEpoch;
  ++rep.seq;
  rep.lastEpoch = topo.epoch(p);
  return prevEpoch;
}

ReplicateUpdateView DataPlane::nextUpdate(PartitionId p, const Topology& topo) {
  ReplicateUpdateView update;
  update.prevEpoch = advance(p, topo);
  update.epoch = replicas_[p].lastEpoch;
  update.partition = p;
  update.seq = replicas_[p].seq;
  return update;
}

std::shared_ptr<DataPlane::Replication> DataPlane::makeReplication(
    const ReplicateUpdateView& update) {
  auto r = std::allocate_shared<Replication>(CachedAllocator<Replication>());  // block_cache.h
  r->partition = update.partition;
  r->seq = update.seq;
  r->barrier = update.kind == ReplicateBody::kBarrier;
  // A pooled string (given back when the record goes) with room for all of it.
  r->encoded = StringPool::take(ReplicateUpdateView::kFixedBytes + update.key.size() +
                                update.value.size() + update.result.size());
  encodeInto(r->encoded, update);
  return r;
}

void DataPlane::confirmInherited(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                                 const RequestId& id, std::string answer,
                                 std::chrono::steady_clock::time_point deadline,
                                 RawCompletion done) {
  const auto steadyNow = std::chrono::steady_clock::now();
  if (topo->table.owners(p).size() <= 1 || options_.replication == ReplicationMode::kAsyncBackups) {
    // No other owner to wait for (or a mode that never waits for one).
    store.dedup().record(id, answer, nullptr, steadyNow);
    done(std::move(answer));
    return;
  }
  const std::string request = "request " + std::to_string(id.seq) + " of client " +
                              std::to_string(id.client) + " ran on a former primary of " +
                              partitionName(p);
  if (steadyNow >= deadline) {
    done(Error(Errc::unavailable, request + "; the deadline passed before its answer could be "
                                            "confirmed by every owner: ask again"));
    return;
  }
  if (std::optional<Error> refused = writeRefusal(p, *topo)) {
    // Not `no_quorum` (a write refused): this request ran, and a caller must not send it anew.
    done(Error(Errc::unavailable, request + "; confirming it: " + refused->detail()));
    return;
  }
  // A barrier through every backup: once each acknowledges it, each holds every update before it,
  // the request's among them. Copies that arrive meanwhile find the record pending.
  ReplicateUpdateView barrier = nextUpdate(p, *topo);
  barrier.kind = ReplicateBody::kBarrier;
  barrier.client = id.client;
  barrier.requestSeq = id.seq;
  barrier.doneBelow = id.doneBelow;
  barrier.result = answer;
  deadline = std::min(deadline, steadyNow + options_.dedupWindow / 2);
  barriers_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<Replication> r = makeReplication(barrier);
  store.dedup().record(id, answer, trackOutcome(*r), steadyNow);
  replicate(std::move(r), topo, Result<std::string>(std::move(answer)), deadline, std::move(done));
}

Error DataPlane::dedupAnswer(PartitionId p, const RequestId& id, const DedupTable::Lookup& seen) {
  const std::string request = "request " + std::to_string(id.seq) + " of client " +
                              std::to_string(id.client) + " on " + partitionName(p);
  switch (seen.kind) {
    case DedupTable::Lookup::kPending:
      return Error(Errc::unavailable,
                   request + " ran, and its update is still being replicated: ask again");
    case DedupTable::Lookup::kFailed:
      return Error(Errc::indeterminate,
                   request + " ran on the primary, but a backup never confirmed its update");
    case DedupTable::Lookup::kFull:
      return Error(Errc::overloaded,
                   request + ": the client already has " +
                       std::to_string(DedupTable::kMaxRecordsPerClient) +
                       " answered requests recorded here that it has not acknowledged "
                       "(doneBelow " +
                       std::to_string(id.doneBelow) + "): not run; retry once earlier calls end");
    case DedupTable::Lookup::kForgotten:
      return Error(Errc::invalid_argument, request + " is below the client's doneBelow (" +
                                               std::to_string(id.doneBelow) +
                                               "): a stale copy of an answered request, not run");
    default:
      return Error(Errc::processor_failed, request + ": no recorded answer");
  }
}

std::shared_ptr<const ReplicationOutcome> DataPlane::trackOutcome(Replication& r) const {
  // kAsyncBackups: no outcome, a copy of the request gets the same answer at once.
  if (options_.replication == ReplicationMode::kAsyncBackups) return nullptr;
  r.outcome = std::allocate_shared<ReplicationOutcome>(CachedAllocator<ReplicationOutcome>());
  r.outcome->barrier = r.barrier;
  return r.outcome;
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
  replicas_[p].outstanding.fetch_add(1, std::memory_order_acq_rel);
  // From p's worker, where it stays: batched there per backup link, sent on the worker's own
  // links, and answered there when the acknowledgements come back.
  const std::vector<MemberId>& owners = topo->table.owners(p);
  for (std::size_t i = 1; i < owners.size(); ++i) sendUpdate(owners[i], r, deadline, topo, true);
}

std::pair<std::shared_ptr<Peer>, DataPlane::LinkKey> DataPlane::replicaLink(PartitionId p,
                                                                            const MemberInfo& to) {
  if (!replicatesOnShardPorts(host_.runsShardPorts(), to)) return {nullptr, {to.id, kViaNetwork}};
  return {host_.replicaLink(workers_.workerOf(p), to, p),
          LinkKey{to.id, static_cast<std::uint32_t>(p % to.shardPorts.size())}};
}

void DataPlane::requestFrom(unsigned w, LinkKey key, const std::shared_ptr<Peer>& peer,
                            MessageType type, std::uint64_t version, std::string body,
                            std::chrono::milliseconds timeout,
                            Connection::ResponseHandler handler) {
  assert(lanes_[w]->round.here());
  const MemberId to = key.first;
  if (peer) {
    peer->request(type, version, std::move(body), timeout, std::move(handler));
    return;
  }
  if (key.second != kViaNetwork) {
    // The shard path has no link now (this member is stopping, or has no id): never the member
    // link instead, which is not ordered with it.
    handler(Error(Errc::unreachable, "no link from member " + std::to_string(memberId()) +
                                         " to the shard port of member " + std::to_string(to)));
    return;
  }
  // The network thread's link to `to`. When this worker is that thread (partitions on it), at
  // once; otherwise the request goes there and its answer comes back here.
  const bool here = onNetworkThread();
  onNetwork([this, w, to, type, version, body = std::move(body), timeout,
             handler = std::move(handler), here]() mutable {
    const TopologyPtr topo = topology();
    const MemberInfo* info = topo->member(to);
    std::shared_ptr<Peer> link = info ? host_.peerFor(to, info->address) : nullptr;
    if (!here) {
      handler = [this, w, back = std::move(handler)](Result<Frame> r) mutable {
        asio::post(workers_.io(w),
                   [back = std::move(back), r = std::move(r)]() mutable { back(std::move(r)); });
      };
    }
    if (!link) {
      handler(Error(Errc::unreachable, "member " + std::to_string(to) + " has no address known"));
      return;
    }
    link->request(type, version, std::move(body), timeout, std::move(handler));
  });
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
    if (!r && r.error() == Errc::not_owner) {
      // The backup names another primary, or a newer epoch: this member may have been deposed.
      // Learn the backup's topology (installed if newer); the next attempt is judged by it.
      if (const MemberInfo* info = topo->member(b)) {
        onNetwork([this, b, address = info->address] { host_.catchUp(b, address); });
      }
    }
    bool dropped = false;  // by a newer topology: released, but holds nothing we count
    if (!r) {
      const TopologyPtr now = topology();
      // (A member that lost its id, removed and rejoining, leads nothing: not even the empty
      // table's partitions, whose primary is 0 too.)
      const MemberId self = memberId();
      const bool stillPrimary = self != 0 && now->table.primary(p) == self;
      if (stillPrimary && now->version > topo->version && !now->table.isOwner(p, b)) {
        // A newer committed topology keeps this member the primary and no longer lists the
        // backup (moved away, or declared failed): no copy anyone relies on waits for it.
        r = Frame{};
        dropped = true;
      } else if (!stillPrimary) {
        // Deposed meanwhile (a newer committed topology names another primary): the refusal is
        // not an acknowledgement, and waiting longer cannot make it one.
        deadline = std::chrono::steady_clock::now();
      }
    }
    if (!r) {
      if (stillPrimaryOf(p)) noteLagging(p, b, repl->seq);
      host_.memberUnanswered(b);
      if (first && (r.error() == Errc::unavailable || r.error() == Errc::shutting_down ||
                    r.error() == Errc::not_running)) {
        // The backup missed an update and asks for a fresh snapshot (or its link is down, and
        // the snapshot goes once it is back). One at a time: the other updates of the partition
        // that failed with it find that one under way.
        workers_.dispatch(p, [this, p, b](PartitionStore& store) {
          const TopologyPtr t = topology();
          if (t->table.primary(p) != memberId() || !t->table.isOwner(p, b)) return;
          Replica& rep = replicas_[p];
          if (std::find(rep.snapshotsUnderWay.begin(), rep.snapshotsUnderWay.end(), b) ==
              rep.snapshotsUnderWay.end()) {
            sendSnapshot(p, store, b, t->version);
          } else if (std::find(rep.snapshotsWanted.begin(), rep.snapshotsWanted.end(), b) ==
                     rep.snapshotsWanted.end()) {
            // The one under way may be older than what the backup now lacks: another follows.
            rep.snapshotsWanted.push_back(b);
          }
        });
      }
      if (std::chrono::steady_clock::now() < deadline && !host_.stopped() && !closing_.load()) {
        // Sync replication waits for every live backup: try again until the backup answers,
        // is declared failed (the topology drops it), or the deadline passes.
        auto timer = std::make_shared<asio::steady_timer>(workers_.io(workers_.workerOf(p)),
                                                          std::chrono::milliseconds(50));
        // With the topology the update was made under: a newer one that drops the backup (or
        // this primary) is judged against it when the attempt fails.
        timer->async_wait([this, timer, b, repl, deadline, topo](std::error_code) mutable {
          // Once the node stops, the attempt fails at once (no new link is made for it).
          if (closing_.load()) deadline = std::chrono::steady_clock::now();
          sendUpdate(b, std::move(repl), deadline, topo, false);
        });
        return;
      }
      if (!repl->failures.empty()) repl->failures += "; ";
      repl->failures += "backup member " + std::to_string(b) + ": " + r.error().message();
    }
    if (r && !dropped && topo->syncingReplica(p, b) == nullptr) ++repl->copies;
    if (r) noteCaughtUp(p, b, dropped ? ~std::uint64_t{0} : repl->seq);
    if (--repl->pending != 0) return;
    if (repl->failures.empty() && repl->copies < options_.minInSyncReplicas) {
      repl->failures = "held by " + std::to_string(repl->copies) + " cop" +
                       (repl->copies == 1 ? "y" : "ies") + ", fewer than minInSyncReplicas " +
                       std::to_string(options_.minInSyncReplicas);
    }
    if (repl->failures.empty() &&
        repl->copies < std::min<std::size_t>(topo->backups + 1, topo->members.size())) {
      degradedWrites_.fetch_add(1, std::memory_order_relaxed);
    }
    if (repl->outcome) {  // answers the copies of the request parked on it, too
      if (repl->failures.empty()) {
        // The answer as it lies (a copy is made only for each copy parked on it).
        repl->outcome->resolve(
            ReplicationOutcome::kAcknowledged,
            repl->result.ok() ? std::string_view(*repl->result) : std::string_view(), Error());
      } else {
        // The copies waiting on it did not run: each is asked to come again, and its retry
        // learns the outcome where it is recorded (indeterminate on this primary; the answer,
        // after a barrier, on a new one).
        repl->outcome->resolve(ReplicationOutcome::kFailed, {},
                               Error(Errc::unavailable, replicationFailure(*repl)));
      }
    }
    replicas_[p].outstanding.fetch_sub(1, std::memory_order_acq_rel);
    if (!repl->done) return;
    // Released once called (the connection it holds must not outlive its answer).
    RawCompletion done = std::exchange(repl->done, RawCompletion{});
    countRequest(p, repl->processor,
                 repl->failures.empty() ? RequestMetrics::outcomeOf(repl->verdict)
                                        : static_cast<std::size_t>(Errc::indeterminate),
                 repl->failures.empty() && repl->verdict.nearLimit, repl->started);
    if (repl->failures.empty()) {
      done(std::move(repl->result));
    } else if (repl->outcome && repl->outcome->barrier) {
      // The request ran on a former primary and its answer stands: a failed barrier is no
      // verdict on it. The retry finds the record inherited again and tries another barrier.
      done(Error(Errc::unavailable, replicationFailure(*repl)));
    } else {
      done(Error(Errc::indeterminate, "applied on the primary of partition " + std::to_string(p) +
                                          ", but " + repl->failures));
    }
    repl->failures = {};
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
  auto [peer, key] = replicaLink(repl->partition, *info);
  Lane& lane = *lanes_[workers_.workerOf(repl->partition)];
  queueUpdate(lane, key, std::move(peer), topo->version, std::move(repl), deadline,
              std::move(arrive));
}

void DataPlane::queueUpdate(Lane& lane, LinkKey key, std::shared_ptr<Peer> peer,
                            std::uint64_t version, std::shared_ptr<const Replication> update,
                            std::chrono::steady_clock::time_point deadline,
                            Connection::ResponseHandler arrive) {
  assert(lane.round.here());
  if (auto it = lane.outgoing.find(key);
      it != lane.outgoing.end() && it->second.peer != peer && !it->second.updates.empty()) {
    flushUpdates(lane, key);  // the link was made anew: the old batch leaves on the old one
  }
  const std::size_t bytes = update->encoded.size() + 16;
  if (auto it = lane.outgoing.find(key); it != lane.outgoing.end() && !it->second.updates.empty() &&
                                         it->second.bytes + bytes > kMaxBatchBytes) {
    flushUpdates(lane, key);  // this one would take the batch past its size: it starts the next
  }
  OutgoingUpdates& out = lane.outgoing[key];
  if (out.updates.capacity() == 0 && !lane.spareBatches.empty()) {
    out.updates = std::move(lane.spareBatches.back());  // an answered batch's array, emptied
    lane.spareBatches.pop_back();
  }
  out.member = key.first;
  out.peer = std::move(peer);
  out.version = std::max(out.version, version);
  out.latest = std::max(out.latest, deadline);
  out.bytes += bytes;
  const auto order = static_cast<std::uint32_t>(out.updates.size());
  out.updates.push_back(QueuedUpdate{std::move(update), std::move(arrive), order});
  if (out.updates.size() >= ReplicateBatch::kMaxUpdates || out.bytes >= kMaxBatchBytes) {
    flushUpdates(lane, key);
  } else if (!out.flushPosted) {
    // At the end of this round (write_round.h): the updates the rest of the round makes join, and
    // the batch leaves in the same write as the round's other frames on that link (its
    // acknowledgements).
    out.flushPosted = true;
    lane.round.atEnd([this, &lane, key] {
      auto it = lane.outgoing.find(key);
      if (it == lane.outgoing.end()) return;
      it->second.flushPosted = false;
      flushUpdates(lane, key);
    });
  }
}

void DataPlane::flushUpdates(Lane& lane, LinkKey key) {
  assert(lane.round.here());
  auto it = lane.outgoing.find(key);
  if (it == lane.outgoing.end()) return;
  OutgoingUpdates& out = it->second;
  if (out.updates.empty()) return;
  const MemberId b = out.member;
  std::shared_ptr<Peer> peer = std::move(out.peer);
  std::vector<QueuedUpdate> updates;
  updates.swap(out.updates);
  const auto latest = std::exchange(out.latest, std::chrono::steady_clock::time_point::min());
  const std::uint64_t version = std::exchange(out.version, 0);
  out.bytes = 0;
  // Nothing waits for this link now: forget it (a departed member leaves no entry behind).
  if (!out.flushPosted) lane.outgoing.erase(it);
  // Each partition's updates in sequence order: a retried update may have been queued after later
  // ones of its partition, which the backup would take for a gap (and resync). Sorted in place,
  // by partition, then sequence, then queue order (so the sort is stable without a buffer).
  const auto updateOrder = [](const QueuedUpdate& x, const QueuedUpdate& y) {
    return std::tie(x.update->partition, x.update->seq, x.order) <
           std::tie(y.update->partition, y.update->seq, y.order);
  };
  if (!std::is_sorted(updates.begin(), updates.end(), updateOrder)) {
    std::sort(updates.begin(), updates.end(), updateOrder);
  }
  std::string body = joinReplicateBatch(updates.begin(), updates.end(), [](const QueuedUpdate& q) {
    return std::string_view(q.update->encoded);
  });
  // Each attempt waits at most a heartbeat interval, so that a backup that stopped answering (a
  // paused process) is re-judged against the latest topology that often: once a committed topology
  // drops it, the update is released at once instead of at the caller's deadline. An update whose
  // own deadline comes sooner is judged by its own (in sendUpdate) when the answer arrives.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      latest - std::chrono::steady_clock::now());
  // The batch's array goes with it: the answer is judged over it, then it is kept for a next batch.
  lane.metrics.updatesPerBatch.observe(updates.size());
  requestFrom(lane.index, key, peer, MessageType::kReplicate, version, std::move(body),
              std::clamp(left, std::chrono::milliseconds(1), options_.heartbeatInterval),
              [this, &lane, updates = std::move(updates), b,
               sent = std::chrono::steady_clock::now()](Result<Frame> r) mutable {
                if (r) {
                  lane.metrics.replicationAck.observe(static_cast<std::uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - sent)
                          .count()));
                }
                settleBatch(b, updates, std::move(r));
                updates.clear();
                if (lane.spareBatches.size() < lane.spareBatches.capacity()) {
                  lane.spareBatches.push_back(std::move(updates));
                }
              });
}

void DataPlane::settleBatch(MemberId b, std::vector<QueuedUpdate>& updates, Result<Frame> r) {
  const auto all = [&](const Result<Frame>& verdict) {
    for (QueuedUpdate& q : updates) q.arrive(verdict);
  };
  if (!r) {
    all(r.error());
    return;
  }
  ReplicateAck ack;
  try {
    decodeInto(r->body, ack);
    StringPool::give(std::move(r->body));  // read (the refusals are copies)
  } catch (const std::exception& e) {
    all(Error(Errc::malformed_message,
              "acknowledgement of a batch of " + std::to_string(updates.size()) +
                  " updates from member " + std::to_string(b) + ": " + e.what()));
    return;
  }
  // Each refusal names a distinct update of the batch; anything else makes the whole
  // acknowledgement untrustworthy, and no update of it counts as acknowledged.
  std::vector<bool> seen(ack.refused.empty() ? 0 : updates.size(), false);
  for (const UpdateRefusal& refused : ack.refused) {
    if (refused.index >= updates.size() || seen[refused.index]) {
      all(Error(Errc::malformed_message,
                "acknowledgement of a batch of " + std::to_string(updates.size()) +
                    " updates from member " + std::to_string(b) + " refuses update " +
                    std::to_string(refused.index) +
                    (refused.index >= updates.size() ? ", which it does not hold" : " twice")));
      return;
    }
    seen[refused.index] = true;
  }
  for (UpdateRefusal& refused : ack.refused) {
    auto arrive = std::exchange(updates[refused.index].arrive, Connection::ResponseHandler{});
    arrive(errorFromBody(std::move(refused.error), "member " + std::to_string(b)));
  }
  for (QueuedUpdate& q : updates) {
    if (q.arrive) q.arrive(Frame{});
  }
}

std::optional<DataPlane::AdmittedInvoke> DataPlane::admitInvoke(
    const std::shared_ptr<Connection>& conn, const Frame& frame) {
  // The fields are read in place (no copy): found here, used on the worker over the same body.
  AdmittedInvoke call;
  try {
    call.spans = InvokeRequestSpans::of(frame.body);
  } catch (const std::exception& e) {
    conn->replyError(frame.header, Error(Errc::malformed_message,
                                         std::string("Invoke body does not decode: ") + e.what()));
    return std::nullopt;
  }
  const std::string_view key = call.spans.key.in(frame.body);
  const std::string_view processor = call.spans.processor.in(frame.body);
  const bool running = host_.beginInvocation();
  std::tie(call.fn, call.processor) = registry_.lookup(processor);
  Error refused;
  if (!running) {
    refused = Error(Errc::shutting_down, "member " + std::to_string(memberId()) + " is stopping");
  } else if (auto bad = keyError(key)) {
    refused = std::move(*bad);
  } else if (call.fn == nullptr) {
    refused = Error(Errc::unknown_processor, "no processor named '" + std::string(processor) +
                                                 "' is registered on member " +
                                                 std::to_string(memberId()));
  }
  if (refused.code()) {
    conn->replyError(frame.header, refused);
    host_.endInvocation();
    return std::nullopt;
  }
  call.partition = partitionOf(key, options_.partitions);
  std::chrono::milliseconds left = call.spans.timeoutMs != 0
                                       ? std::chrono::milliseconds(call.spans.timeoutMs)
                                       : options_.requestTimeout;
  if (call.spans.deadlineUnixMs != 0) {
    // The sender's wall-clock deadline, allowing clock skew of up to 0.4 of the dedup window: a
    // copy that arrives past it was delayed in transit, perhaps beyond the window that would find
    // its first run's record, and must not run. (A deadline is at most half the window after the
    // send, and a record lives at least the window after the first run: a copy that arrives
    // within the allowance still finds it.)
    const auto skew = static_cast<std::uint64_t>((options_.dedupWindow * 2 / 5).count());
    const auto wallNow =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    const std::uint64_t deadline = call.spans.deadlineUnixMs;
    const std::uint64_t latest = deadline > UINT64_MAX - skew ? UINT64_MAX : deadline + skew;
    if (wallNow >= latest) {
      lateRequests_.fetch_add(1, std::memory_order_relaxed);
      conn->replyError(frame.header,
                       Error(Errc::timeout,
                             "the request arrived " + std::to_string(wallNow - deadline) +
                                 " ms after its deadline (by member " + std::to_string(memberId()) +
                                 "'s wall clock, allowing " + std::to_string(skew) +
                                 " ms of clock skew; a sender whose clock is behind by more "
                                 "has every request refused): not run"));
      host_.endInvocation();
      return std::nullopt;
    }
    left = std::min<std::chrono::milliseconds>(
        left, std::chrono::milliseconds(std::min<std::uint64_t>(latest - wallNow, UINT32_MAX)));
  }
  call.deadline = std::chrono::steady_clock::now() + left;
  return call;
}

void DataPlane::runInvoke(PartitionStore& store, const std::shared_ptr<Connection>& conn,
                          const FrameHeader& header, std::string body, const AdmittedInvoke& call) {
  const InvokeRequestSpans& spans = call.spans;
  execute(
      call.partition, store, spans.key.in(body), call.fn, call.processor, spans.args.in(body),
      RequestId{spans.client, spans.seq, spans.doneBelow}, call.deadline,
      [this, conn, header](Result<std::string> r) {
        const std::uint64_t version = topology()->version;
        if (r.ok()) {
          // Encoded into a pooled string; the answer's own string (encode()'s, pooled) goes back.
          InvokeReply reply{std::move(*r)};
          std::string encoded = StringPool::take(InvokeReply::kFixedBytes + reply.result.size());
          encodeInto(encoded, reply);
          StringPool::give(std::move(reply.result));
          conn->reply(header, MessageType::kInvoke, version, std::move(encoded));
        } else if (r.error() == Errc::not_owner) {
          conn->reply(header, MessageType::kRedirect, version, encode(TopologyBody{*topology()}));
        } else {
          conn->replyError(header, r.error());
        }
        host_.endInvocation();
      });
  StringPool::give(std::move(body));  // nothing views it any more: the next frame's body
}

void DataPlane::handleInvoke(const std::shared_ptr<Connection>& conn, Frame frame) {
  std::optional<AdmittedInvoke> call = admitInvoke(conn, frame);
  if (!call) return;
  if (workers_.onWorkerOf(call->partition)) {
    // Partitions on the network thread (one thread per node): run where it was read, no re-post.
    runInvoke(workers_.store(call->partition), conn, frame.header, std::move(frame.body), *call);
    return;
  }
  postInvoke(conn, std::move(frame), *call);
}

void DataPlane::postInvoke(const std::shared_ptr<Connection>& conn, Frame frame,
                           const AdmittedInvoke& call) {
  workers_.post(call.partition, [this, conn, header = frame.header, body = std::move(frame.body),
                                 call](PartitionStore& store) mutable {
    runInvoke(store, conn, header, std::move(body), call);
  });
}

void DataPlane::handleShardInvoke(unsigned w, const std::shared_ptr<Connection>& conn,
                                  Frame frame) {
  std::optional<AdmittedInvoke> call = admitInvoke(conn, frame);
  if (!call) return;
  if (workers_.workerOf(call->partition) == w) {  // read by the thread that owns it: run now
    shardInPlace_.fetch_add(1, std::memory_order_relaxed);
    runInvoke(workers_.store(call->partition), conn, frame.header, std::move(frame.body), *call);
    return;
  }
  // Another worker's partition (a client that routed by an older layout, or one not shard-aware):
  // forwarded inside the node; its answer goes back through the connection's own thread.
  shardForwarded_.fetch_add(1, std::memory_order_relaxed);
  postInvoke(conn, std::move(frame), *call);
}

}  // namespace ingrid
