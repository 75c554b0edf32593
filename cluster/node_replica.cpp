// The backup side of replication, and migration: snapshots of a partition for its new owners.
#include <ingrid/cluster/node_impl.h>

namespace ingrid {
namespace {

// A snapshot chunk holds at most this many entries or (about) this many bytes.
constexpr std::size_t kSnapshotChunkEntries = 4096;
constexpr std::size_t kSnapshotChunkBytes = 4u << 20;

}  // namespace

bool NodeImpl::fromPrimary(const Connection& conn, const Topology& t, PartitionId p) const {
  const MemberId primary = t.table.primary(p);
  return primary != 0 && primary != memberId() && conn.peerId == primary;
}

Error NodeImpl::notPrimaryError(const Connection& conn, const Topology& t, PartitionId p) const {
  return Error(Errc::not_owner, "member " + std::to_string(memberId()) + " takes partition " +
                                    std::to_string(p) + " from its primary, member " +
                                    std::to_string(t.table.primary(p)) + " at topology " +
                                    std::to_string(t.version) + ", not from member " +
                                    std::to_string(conn.peerId));
}

void NodeImpl::handleReplicate(const std::shared_ptr<Connection>& conn, Frame frame) {
  ReplicateBody update;
  try {
    decodeInto(frame.body, update);
    if (update.partition >= options_.partitions) throw std::out_of_range("partition out of range");
    if (update.kind != ReplicateBody::kPut && update.kind != ReplicateBody::kRemove) {
      throw std::invalid_argument("unknown update kind " + std::to_string(update.kind));
    }
  } catch (const std::exception& e) {
    conn->replyError(frame.header,
                     Error(Errc::malformed_message, std::string("Replicate body: ") + e.what()));
    return;
  }
  const PartitionId p = update.partition;
  workers_->post(p, [this, conn, header = frame.header,
                     u = std::move(update)](PartitionStore& store) mutable {
    Replica& rep = replicas_[u.partition];
    const TopologyPtr topo = topology();
    const std::uint64_t version = topo->version;
    // Only the primary by this member's own topology may change its replica: a member declared
    // failed while still alive (or a primary whose fencing was missed) must not be acknowledged.
    if (!fromPrimary(*conn, *topo, u.partition)) {
      conn->replyError(header, notPrimaryError(*conn, *topo, u.partition));
      return;
    }
    switch (rep.mode) {
      case ReplicaMode::kEmpty:  // a new owner before its snapshot: the snapshot covers this
        conn->reply(header, MessageType::kReplicate, version, {});
        return;
      case ReplicaMode::kResync:
        conn->replyError(
            header, Error(Errc::unavailable, "replica of partition " + std::to_string(u.partition) +
                                                 " on member " + std::to_string(memberId()) +
                                                 " is waiting for a snapshot"));
        return;
      case ReplicaMode::kReady:
        break;
    }
    if (u.seq <= rep.seq) {  // already applied (or covered by the snapshot)
      conn->reply(header, MessageType::kReplicate, version, {});
      return;
    }
    if (u.seq != rep.seq + 1) {
      const std::uint64_t expected = rep.seq + 1;
      rep.mode = ReplicaMode::kResync;
      conn->replyError(
          header, Error(Errc::unavailable, "replica of partition " + std::to_string(u.partition) +
                                               " expected update " + std::to_string(expected) +
                                               ", got " + std::to_string(u.seq)));
      return;
    }
    if (u.kind == ReplicateBody::kPut) {
      store.put(u.key, Entry{std::move(u.value), u.expiresAt});
    } else {
      store.erase(u.key);
    }
    rep.seq = u.seq;
    conn->reply(header, MessageType::kReplicate, version, {});
  });
}

void NodeImpl::handleSnapshot(const std::shared_ptr<Connection>& conn, Frame frame) {
  SnapshotBody snap;
  try {
    decodeInto(frame.body, snap);
    if (snap.partition >= options_.partitions) throw std::out_of_range("partition out of range");
  } catch (const std::exception& e) {
    conn->replyError(frame.header,
                     Error(Errc::malformed_message, std::string("Snapshot body: ") + e.what()));
    return;
  }
  const PartitionId p = snap.partition;
  workers_->post(
      p, [this, conn, header = frame.header, s = std::move(snap)](PartitionStore& store) mutable {
        Replica& rep = replicas_[s.partition];
        const TopologyPtr topo = topology();
        if (!fromPrimary(*conn, *topo, s.partition)) {
          conn->replyError(header, notPrimaryError(*conn, *topo, s.partition));
          return;
        }
        if (s.first) {
          store.clear();
          // Until the last chunk is in: a new owner acknowledges (and ignores) updates, which
          // the snapshot will cover; a replica that was complete and is resyncing refuses them,
          // so that it is never counted as holding what it dropped (the primary retries).
          rep.mode = rep.mode == ReplicaMode::kEmpty ? ReplicaMode::kEmpty : ReplicaMode::kResync;
        }
        for (auto& e : s.entries) store.put(e.key, Entry{std::move(e.value), e.expiresAt});
        if (s.last) {
          rep.seq = s.seq;
          rep.mode = ReplicaMode::kReady;
        }
        conn->reply(header, MessageType::kSnapshot, topology()->version, {});
      });
}

void NodeImpl::sendSnapshot(PartitionId p, PartitionStore& store, MemberId to,
                            std::uint64_t version) {
  std::vector<SnapshotBody> chunks(1);
  std::size_t bytes = 0;
  store.forEach(clock_->now(), [&](std::string_view key, const Entry& e) {
    if (chunks.back().entries.size() >= kSnapshotChunkEntries || bytes >= kSnapshotChunkBytes) {
      chunks.emplace_back();
      bytes = 0;
    }
    chunks.back().entries.push_back(SnapshotEntry{std::string(key), e.value, e.expiresAt});
    bytes += key.size() + e.value.size() + 16;
  });
  const std::uint64_t seq = replicas_[p].seq;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].partition = p;
    chunks[i].seq = seq;
    chunks[i].first = i == 0;
    chunks[i].last = i + 1 == chunks.size();
  }
  // Posted from the worker before any later update of p, so the new owner sees the snapshot
  // before every update that it does not contain.
  asio::post(netIo_, [this, p, to, version, chunks = std::move(chunks)]() {
    const TopologyPtr topo = topology();
    const MemberInfo* info = topo->member(to);
    std::shared_ptr<Peer> peer = info ? peerFor(to, info->address) : nullptr;
    if (!peer) return;  // no longer a member
    struct Progress {
      std::size_t pending;
      bool failed = false;
    };
    auto progress = std::make_shared<Progress>(Progress{chunks.size()});
    for (const auto& chunk : chunks) {
      peer->request(MessageType::kSnapshot, version, encode(chunk), options_.requestTimeout,
                    [this, p, to, version, progress](Result<Frame> r) {
                      if (!r) progress->failed = true;
                      if (--progress->pending != 0) return;
                      if (!progress->failed) {
                        reportSynced(p, to, version);
                        return;
                      }
                      // Try again (later) while this node is still the primary and `to` an owner.
                      auto timer = std::make_shared<asio::steady_timer>(
                          netIo_, std::chrono::milliseconds(100));
                      timer->async_wait([this, timer, p, to](std::error_code ec) {
                        if (ec || state_.load() == kStopped) return;
                        workers_->post(p, [this, p, to](PartitionStore& s) {
                          const TopologyPtr t = topology();
                          if (t->table.primary(p) == memberId() && t->table.isOwner(p, to)) {
                            sendSnapshot(p, s, to, t->version);
                          }
                        });
                      });
                    });
    }
  });
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

}  // namespace ingrid
