// The backup side of replication, and migration: snapshots of a partition for its new owners.
#include <algorithm>
#include <cassert>
#include <tuple>

#include "cluster/shard/data_plane.h"
#include "cluster/shard/replica_log.h"

namespace ingrid {
namespace {

// A snapshot chunk holds at most this many entries or (about) this many bytes.
constexpr std::size_t kSnapshotChunkEntries = 4096;
constexpr std::size_t kSnapshotChunkBytes = 4u << 20;

}  // namespace

bool DataPlane::fromPrimary(const Connection& conn, const Topology& t, PartitionId p) const {
  const MemberId primary = t.table.primary(p);
  return primary != 0 && primary != memberId() && conn.peerId == primary;
}

Error DataPlane::notPrimaryError(const Connection& conn, const Topology& t, PartitionId p) const {
  return Error(Errc::not_owner, "member " + std::to_string(memberId()) + " takes partition " +
                                    std::to_string(p) + " from its primary, member " +
                                    std::to_string(t.table.primary(p)) + " at topology " +
                                    std::to_string(t.version) + ", not from member " +
                                    std::to_string(conn.peerId));
}

void DataPlane::handleReplicate(const std::shared_ptr<Connection>& conn, Frame frame) {
  // The body moves into the job first: the batch is read in place from it (no copy of a key, a
  // value or an answer), and the job keeps it while any worker applies the batch. A batch applied
  // in place leaves its job for the next one on that worker (its array's capacity reused).
  Lane* lane = laneHere();
  std::shared_ptr<ApplyBatch> job =
      lane && lane->spareApply ? std::move(lane->spareApply) : std::make_shared<ApplyBatch>();
  job->body = std::move(frame.body);
  ReplicateBatchIn& batch = job->batch;
  try {
    decodeInto(job->body, batch);
    for (std::size_t i = 0; i < batch.updates.size(); ++i) {
      const ReplicateUpdateView& u = batch.updates[i];
      // Named only in an error: no string is built on the way every update takes.
      const auto which = [i] { return "update " + std::to_string(i) + " of the batch"; };
      if (u.partition >= options_.partitions) {
        throw std::out_of_range(which() + " is for partition " + std::to_string(u.partition) +
                                "; this member has " + std::to_string(options_.partitions));
      }
      if (u.kind == ReplicateBody::kBarrier) {
        if (!u.key.empty() || !u.value.empty()) {
          throw std::invalid_argument(which() + " is a barrier with a key or a value");
        }
        continue;
      }
      if (u.kind != ReplicateBody::kPut && u.kind != ReplicateBody::kRemove) {
        throw std::invalid_argument(which() + " has unknown kind " + std::to_string(u.kind));
      }
      if (auto bad = keyError(u.key)) throw std::invalid_argument(which() + ": " + bad->detail());
    }
  } catch (const std::exception& e) {
    conn->replyError(frame.header,
                     Error(Errc::malformed_message, std::string("Replicate body: ") + e.what()));
    return;
  }
  const auto onItsWorker = [this](const ReplicateUpdateView& u) {
    return workers_.onWorkerOf(u.partition);
  };
  if (std::all_of(batch.updates.begin(), batch.updates.end(), onItsWorker)) {
    // Every update's partition is owned by this thread (a primary's worker sends its updates to
    // the backup's worker that owns them; or partitions on the network thread): applied where
    // the batch was read, and acknowledged in the same pass.
    replicateInPlace_.fetch_add(1, std::memory_order_relaxed);
    const TopologyPtr topo = topology();
    ReplicateAck ack;
    for (std::uint32_t i = 0; i < batch.updates.size(); ++i) {
      const ReplicateUpdateView& u = batch.updates[i];
      Error refused = applyUpdate(*conn, workers_.store(u.partition), *topo, u);
      if (refused.code()) ack.refused.push_back(UpdateRefusal{i, errorBodyFor(refused)});
    }
    conn->reply(frame.header, MessageType::kReplicate, topo->version, encode(ack));
    StringPool::give(std::move(job->body));  // nothing views it any more
    if (lane) lane->spareApply = std::move(job);
    return;
  }
  replicateDispatched_.fetch_add(1, std::memory_order_relaxed);
  job->conn = conn;
  job->header = frame.header;
  // The updates go to their partitions' workers, one task per worker holding its updates in
  // batch order (so each partition's stay in sequence order); the last task to finish answers.
  const unsigned workers = workers_.threadCount();
  std::vector<std::vector<std::uint32_t>> byWorker(workers);
  for (std::uint32_t i = 0; i < job->batch.updates.size(); ++i) {
    byWorker[workers_.workerOf(job->batch.updates[i].partition)].push_back(i);
  }
  unsigned tasks = 0;
  for (const auto& indices : byWorker) tasks += indices.empty() ? 0 : 1;
  if (tasks == 0) {
    conn->reply(frame.header, MessageType::kReplicate, topology()->version, encode(ReplicateAck{}));
    return;
  }
  job->refusedBy.resize(workers);
  job->tasksLeft.store(tasks, std::memory_order_relaxed);
  for (unsigned w = 0; w < workers; ++w) {
    if (byWorker[w].empty()) continue;
    workers_.postToWorker(
        w, [this, job, w, indices = std::move(byWorker[w])](PartitionWorkers& pool) {
          const TopologyPtr topo = topology();
          for (const std::uint32_t i : indices) {
            const ReplicateUpdateView& u = job->batch.updates[i];
            Error refused = applyUpdate(*job->conn, pool.store(u.partition), *topo, u);
            if (refused.code())
              job->refusedBy[w].push_back(UpdateRefusal{i, errorBodyFor(refused)});
          }
          if (job->tasksLeft.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
          ReplicateAck ack;
          for (auto& refused : job->refusedBy) {
            for (auto& r : refused) ack.refused.push_back(std::move(r));
          }
          job->conn->reply(job->header, MessageType::kReplicate, topo->version, encode(ack));
        });
  }
}

Error DataPlane::applyUpdate(const Connection& conn, PartitionStore& store, const Topology& topo,
                             const ReplicateUpdateView& u) {
  Replica& rep = replicas_[u.partition];
  // Only the primary by this member's own topology may change its replica: a member declared
  // failed while still alive (or a primary whose fencing was missed) must not be acknowledged.
  if (!fromPrimary(conn, topo, u.partition)) return notPrimaryError(conn, topo, u.partition);
  switch (rep.mode.load()) {
    case ReplicaMode::kEmpty:
      // A new owner before its snapshot: acknowledged, for the snapshot to hold. Remembered, so
      // that a snapshot older than it (it came another way, or late) is refused (stageSnapshot).
      if (std::tie(u.epoch, u.seq) > std::tie(rep.backup.ignoredEpoch, rep.backup.ignoredSeq)) {
        rep.backup.ignoredEpoch = u.epoch;
        rep.backup.ignoredSeq = u.seq;
      }
      return {};
    case ReplicaMode::kResync:
      return Error(Errc::unavailable, "replica of partition " + std::to_string(u.partition) +
                                          " on member " + std::to_string(memberId()) +
                                          " is waiting for a snapshot");
    case ReplicaMode::kReady:
      break;
  }
  const std::uint64_t partitionEpoch = topo.epoch(u.partition);
  switch (judgeUpdate(rep.seq, rep.lastEpoch, partitionEpoch, u.seq, u.epoch, u.prevEpoch)) {
    case UpdateVerdict::kApply:
      break;
    case UpdateVerdict::kDuplicate:
      return {};
    case UpdateVerdict::kStale:
      return Error(Errc::not_owner, "update " + std::to_string(u.seq) + " of partition " +
                                        std::to_string(u.partition) + " was made in epoch " +
                                        std::to_string(u.epoch) + "; member " +
                                        std::to_string(memberId()) + " is at epoch " +
                                        std::to_string(std::max(rep.lastEpoch, partitionEpoch)));
    case UpdateVerdict::kResync: {
      const std::string held =
          std::to_string(rep.seq) + " of epoch " + std::to_string(rep.lastEpoch);
      rep.mode = ReplicaMode::kResync;
      resyncs_.fetch_add(1, std::memory_order_relaxed);
      return Error(Errc::unavailable,
                   "replica of partition " + std::to_string(u.partition) + " on member " +
                       std::to_string(memberId()) + " holds update " + held + ", got update " +
                       std::to_string(u.seq) + " of epoch " + std::to_string(u.epoch) +
                       " after one of epoch " + std::to_string(u.prevEpoch) + "; resyncing");
    }
  }
  if (u.kind == ReplicateBody::kPut) {
    store.put(u.key, u.value, u.expiresAt);
  } else if (u.kind == ReplicateBody::kRemove) {
    store.erase(u.key);
  }  // a barrier changes no entry
  const RequestId id{u.client, u.requestSeq, u.doneBelow};
  if (id.valid()) {
    // Held here; whether the other owners hold it is for a future primary to establish.
    store.dedup().record(id, u.result, ReplicationOutcome::inherited(), steadyNow());
  }
  rep.seq = u.seq;
  rep.lastEpoch = u.epoch;
  return {};
}

void DataPlane::handleSnapshot(const std::shared_ptr<Connection>& conn, Frame frame) {
  SnapshotBody snap;
  try {
    decodeInto(frame.body, snap);
    if (snap.partition >= options_.partitions) throw std::out_of_range("partition out of range");
    for (const SnapshotEntry& e : snap.entries) {
      if (auto bad = keyError(e.key)) throw std::invalid_argument(bad->detail());
    }
    for (const SnapshotCompletion& c : snap.completions) {
      if (c.client == 0 || c.seq == 0) {
        throw std::invalid_argument("a dedup record without a client id or request number");
      }
    }
  } catch (const std::exception& e) {
    conn->replyError(frame.header,
                     Error(Errc::malformed_message, std::string("Snapshot body: ") + e.what()));
    return;
  }
  const PartitionId p = snap.partition;
  if (workers_.onWorkerOf(p)) {
    // Read by the thread that owns p (its worker's shard port, or partitions on the network
    // thread): staged where it was read, so that it keeps its place
    // before the updates that follow it on this connection (which are applied in place too).
    stageSnapshot(workers_.store(p), conn, frame.header, snap);
    return;
  }
  workers_.post(p, [this, conn, header = frame.header, s = std::move(snap)](
                       PartitionStore& store) mutable { stageSnapshot(store, conn, header, s); });
}

void DataPlane::stageSnapshot(PartitionStore& store, const std::shared_ptr<Connection>& conn,
                              const FrameHeader& header, SnapshotBody& s) {
  Replica& rep = replicas_[s.partition];
  const TopologyPtr topo = topology();
  if (!fromPrimary(*conn, *topo, s.partition)) {
    conn->replyError(header, notPrimaryError(*conn, *topo, s.partition));
    return;
  }
  if (s.epoch < topo->epoch(s.partition)) {
    conn->replyError(header,
                     Error(Errc::not_owner, "snapshot of partition " + std::to_string(s.partition) +
                                                " from epoch " + std::to_string(s.epoch) +
                                                ", older than epoch " +
                                                std::to_string(topo->epoch(s.partition))));
    return;
  }
  if (s.first && rep.mode.load() != ReplicaMode::kEmpty &&
      std::max(rep.lastEpoch, rep.backup.syncedEpoch) >= s.epoch &&
      std::tie(rep.lastEpoch, rep.seq) > std::tie(s.lastEpoch, s.seq)) {
    // Older than what this replica holds of the same primary's era (complete, or resyncing with
    // its complete copy kept): a snapshot delayed past a newer one of that primary, or one that
    // an update of that primary overtook on the other link. Installing it would drop
    // acknowledged updates; the sender sends a fresh one. (What it holds of an earlier primary's
    // era beyond a newer primary's snapshot was never acknowledged: that primary, a complete
    // replica then, would hold it.)
    conn->replyError(header, Error(Errc::unavailable,
                                   "snapshot of partition " + std::to_string(s.partition) +
                                       " as of update " + std::to_string(s.seq) +
                                       " is older than the replica's " + std::to_string(rep.seq)));
    return;
  }
  if (s.first) {
    rep.backup.stagingId = s.id;
    rep.backup.stagingNext = 0;
    rep.backup.staging.clear();
    rep.backup.stagingCompletions.clear();
    // Until the last chunk is in: a new owner acknowledges (and ignores) updates, which
    // the snapshot will cover; a replica that was complete and is resyncing refuses them
    // (the primary retries), and keeps what it holds until the whole snapshot is in.
    rep.mode = rep.mode.load() == ReplicaMode::kEmpty ? ReplicaMode::kEmpty : ReplicaMode::kResync;
  }
  if (s.id != rep.backup.stagingId || rep.backup.stagingId == 0 ||
      s.index != rep.backup.stagingNext) {
    // A chunk of a snapshot this replica is not staging (a newer one started over it), or
    // one after a lost chunk: refused, so that the sender does not count that snapshot as
    // delivered (it sends a new one).
    conn->replyError(
        header,
        Error(Errc::unavailable, "chunk " + std::to_string(s.index) + " of snapshot " +
                                     std::to_string(s.id) + " of partition " +
                                     std::to_string(s.partition) + " does not follow what member " +
                                     std::to_string(memberId()) + " has staged"));
    return;
  }
  ++rep.backup.stagingNext;
  for (auto& e : s.entries) rep.backup.staging.push_back(std::move(e));
  for (auto& c : s.completions) rep.backup.stagingCompletions.push_back(std::move(c));
  if (s.last && rep.backup.ignoredEpoch >= s.epoch &&
      std::tie(rep.backup.ignoredEpoch, rep.backup.ignoredSeq) > std::tie(s.lastEpoch, s.seq)) {
    // This replica acknowledged an update of this primary (ignored, for the snapshot to hold) that
    // the snapshot does not hold: the update reached it first, by another link (a primary's
    // worker's shard link and its member link are not ordered with each other; the in-process
    // fault injector delays frames past later ones). Installing it would lose that update; the
    // sender sends a fresh snapshot. (An update of an earlier primary that this one does not hold
    // was never acknowledged to its caller: not waited for.)
    snapshotsRefused_.fetch_add(1, std::memory_order_relaxed);
    const std::string ignored = std::to_string(rep.backup.ignoredSeq) + " of epoch " +
                                std::to_string(rep.backup.ignoredEpoch);
    rep.backup.staging = {};
    rep.backup.stagingCompletions = {};
    rep.backup.stagingId = 0;
    conn->replyError(
        header, Error(Errc::unavailable,
                      "snapshot of partition " + std::to_string(s.partition) + " as of update " +
                          std::to_string(s.seq) + " of epoch " + std::to_string(s.lastEpoch) +
                          " does not hold update " + ignored + ", which member " +
                          std::to_string(memberId()) + " acknowledged meanwhile"));
    return;
  }
  if (s.last) {
    store.clear();
    for (const auto& e : rep.backup.staging) store.put(e.key, e.value, e.expiresAt);
    const auto now = steadyNow();
    for (auto& c : rep.backup.stagingCompletions) {
      store.dedup().record(RequestId{c.client, c.seq, c.doneBelow}, std::move(c.result),
                           ReplicationOutcome::inherited(), now);
    }
    rep.backup.staging = {};
    rep.backup.stagingCompletions = {};
    rep.backup.stagingId = 0;
    rep.seq = s.seq;
    rep.lastEpoch = s.lastEpoch;
    rep.backup.syncedEpoch = s.epoch;
    rep.backup.ignoredSeq = 0;
    rep.backup.ignoredEpoch = 0;
    // What this member knew as a primary is no guide to the replicas of its next tenure.
    pruneLagging(s.partition, [](MemberId) { return false; });
    rep.mode = ReplicaMode::kReady;
  }
  conn->reply(header, MessageType::kSnapshot, topology()->version, {});
}

void DataPlane::sendSnapshot(PartitionId p, PartitionStore& store, MemberId to,
                             std::uint64_t version) {
  if (closing_.load()) return;  // stopping: no new link is made for it
  std::vector<SnapshotBody> chunks(1);
  std::size_t bytes = 0;
  store.forEach(clock_->now(), [&](std::string_view key, EntryView e) {
    if (chunks.back().entries.size() >= kSnapshotChunkEntries || bytes >= kSnapshotChunkBytes) {
      chunks.emplace_back();
      bytes = 0;
    }
    chunks.back().entries.push_back(
        SnapshotEntry{std::string(key), std::string(e.value), e.expiresAt});
    bytes += key.size() + e.value.size() + 16;
  });
  // The dedup records follow the entries, in chunks bounded like theirs (count and bytes).
  store.dedup().forEach([&](std::uint64_t client, std::uint64_t doneBelow, std::uint64_t seq,
                            std::string_view result) {
    if (chunks.back().completions.size() >= kSnapshotChunkEntries || bytes >= kSnapshotChunkBytes) {
      chunks.emplace_back();
      bytes = 0;
    }
    chunks.back().completions.push_back(
        SnapshotCompletion{client, doneBelow, seq, std::string(result)});
    bytes += result.size() + 32;
  });
  Replica& rep = replicas_[p];
  // Tells this snapshot's chunks from those of another one (an earlier attempt, another sender).
  std::uint64_t id = host_.incarnation() * 0x9E3779B97F4A7C15ull + ++rep.primary.snapshotsSent;
  if (id == 0) id = 1;  // 0 means "none under way" on the receiver
  const std::uint64_t epoch = topology()->epoch(p);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].partition = p;
    chunks[i].id = id;
    chunks[i].seq = rep.seq;
    chunks[i].epoch = epoch;
    chunks[i].lastEpoch = rep.lastEpoch;
    chunks[i].index = static_cast<std::uint32_t>(i);
    chunks[i].first = i == 0;
    chunks[i].last = i + 1 == chunks.size();
  }
  // Sent now, from p's worker, on the path that carries p's updates to `to` (replicationPath):
  // ahead of every later update of p, which waits for the end of this round at least, so the new
  // owner sees the snapshot before every update that it does not contain.
  const TopologyPtr topo = topology();
  const MemberInfo* info = topo->member(to);
  if (!info) return;  // no longer a member
  const auto [peer, key] = replicationPath(p, *info);
  struct Progress {
    std::size_t pending;
    bool failed = false;
  };
  auto progress = std::make_shared<Progress>(Progress{chunks.size()});
  const unsigned w = workers_.workerOf(p);
  rep.primary.snapshotsUnderWay.push_back(to);
  for (const auto& chunk : chunks) {
    requestFrom(
        w, key, peer, MessageType::kSnapshot, version, encode(chunk), options_.requestTimeout,
        [this, p, to, version, progress, w, seq = rep.seq](Result<Frame> r) {
          if (!r) progress->failed = true;
          if (--progress->pending != 0) return;
          Replica& sender = replicas_[p];
          std::vector<MemberId>& underWay = sender.primary.snapshotsUnderWay;
          if (auto it = std::find(underWay.begin(), underWay.end(), to); it != underWay.end()) {
            underWay.erase(it);
          }
          std::vector<MemberId>& wanted = sender.primary.snapshotsWanted;
          if (auto it = std::find(wanted.begin(), wanted.end(), to); it != wanted.end()) {
            // Asked for while this one was under way: a fresh one now, whatever this one's fate
            // (it may hold less than the backup lacks).
            wanted.erase(it);
            const TopologyPtr t = topology();
            if (!closing_.load() && t->table.primary(p) == memberId() && t->table.isOwner(p, to)) {
              sendSnapshot(p, workers_.store(p), to, t->version);
            }
            return;
          }
          if (!progress->failed) {
            noteCaughtUp(p, to, seq);  // it now holds every update up to the snapshot's
            onNetwork([this, p, to, version] { host_.reportSynced(p, to, version); });
            return;
          }
          // Try again (later) while this node is still the primary and `to` an owner.
          auto timer = std::make_shared<Timer>(workers_.io(w), std::chrono::milliseconds(100));
          timer->async_wait([this, timer, p, to](std::error_code ec) {
            if (ec || host_.stopped() || closing_.load()) return;
            workers_.dispatch(p, [this, p, to](PartitionStore& s) {
              const TopologyPtr t = topology();
              if (t->table.primary(p) == memberId() && t->table.isOwner(p, to)) {
                sendSnapshot(p, s, to, t->version);
              }
            });
          });
        });
  }
}

}  // namespace ingrid
