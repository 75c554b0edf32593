#include <ingrid/cluster/coordinator.h>

#include <algorithm>
#include <memory>

#include <ingrid/cluster/messages.h>

namespace ingrid {

void Coordinator::requestJoin(std::string address, std::uint64_t incarnation,
                              UniqueFunction<void(Result<MemberId>)> reply) {
  // A member's address joining with another incarnation proves that member dead: remove it now,
  // so that a change stalled on it (a snapshot it was sending) is re-planned, not waited for.
  for (const auto& m : host_.currentTopology()->members) {
    if (m.address == address && m.incarnation != incarnation) memberFailed(m.id);
  }
  queue_.push_back(Change{Kind::kJoin, 0, std::move(address), incarnation, std::move(reply), {}});
  pump();
}

void Coordinator::requestLeave(MemberId id) {
  queue_.push_back(Change{Kind::kLeave, id, {}, 0, {}, {}});
  pump();
}

void Coordinator::memberFailed(MemberId id) {
  if (id == host_.selfId() || !failed_.insert(id).second) return;
  if (busy_) {
    replan_ = true;
    if (syncing_) migrating();  // waiting for syncs that may never come: re-plan now
    // Otherwise an install round is in flight; migrating() or the end of the change sees it.
  }
  queue_.push_back(Change{Kind::kFail, id, {}, 0, {}, {}});
  pump();
}

void Coordinator::pump() {
  while (!busy_ && !queue_.empty()) {
    Change change = std::move(queue_.front());
    queue_.pop_front();
    run(std::move(change));
  }
}

void Coordinator::run(Change change) {
  const TopologyPtr cur = host_.currentTopology();
  std::vector<MemberInfo> after;
  MemberId nextId = cur->nextMemberId;
  switch (change.kind) {
    case Kind::kJoin: {
      // (A member at this address with another incarnation was declared failed by requestJoin,
      // and is filtered out below.)
      for (const auto& m : cur->members) {
        if (m.address == change.address && m.incarnation == change.incarnation) {
          if (change.reply) change.reply(m.id);  // a retried join: already admitted
          return;
        }
      }
      after = cur->members;
      change.id = nextId++;
      after.push_back(MemberInfo{change.id, change.address, change.incarnation});
      if (change.reply) change.reply(change.id);
      break;
    }
    case Kind::kLeave:
    case Kind::kFail:
      if (!cur->hasMember(change.id)) return;  // not a member (any more)
      after = cur->members;
      std::erase_if(after, [&](const MemberInfo& m) { return m.id == change.id; });
      break;
    case Kind::kReplan:
      after = std::move(change.members);
      break;
  }
  // A member declared failed is never part of a plan.
  std::erase_if(after, [&](const MemberInfo& m) { return failed_.count(m.id) != 0; });
  if (after.empty()) return;  // the last member leaves: nothing to hand over to
  migrate(std::move(after), nextId);
}

void Coordinator::migrate(std::vector<MemberInfo> after, MemberId nextId) {
  const TopologyPtr cur = host_.currentTopology();
  const std::uint32_t partitions = cur->table.partitionCount();
  std::vector<MemberId> ids;
  for (const auto& m : after) ids.push_back(m.id);
  const PartitionTable ideal = PartitionTable::balanced(partitions, ids, cur->backups);
  auto failed = [this](MemberId m) { return failed_.count(m) != 0; };
  auto contains = [](const std::vector<MemberId>& v, MemberId m) {
    return std::find(v.begin(), v.end(), m) != v.end();
  };

  // T1 members: the current ones that have not failed, plus any joining.
  std::vector<MemberInfo> t1Members;
  for (const auto& m : cur->members) {
    if (!failed(m.id)) t1Members.push_back(m);
  }
  for (const auto& m : after) {
    if (!cur->hasMember(m.id)) t1Members.push_back(m);
  }
  std::sort(t1Members.begin(), t1Members.end(),
            [](const MemberInfo& a, const MemberInfo& b) { return a.id < b.id; });

  // Re-planning this coordinator's own change keeps the snapshots already under way.
  const std::uint64_t t1Version = cur->version + 1;
  const bool ownPlan = cur->version == t1Version_;
  // A replica the installed topology lists as syncing is complete if it reported so during
  // this coordinator's own change (the topology's list only shrinks with T2).
  auto complete = [&](PartitionId p, MemberId m) {
    if (!cur->table.isOwner(p, m)) return false;
    const SyncingReplica* r = cur->syncingReplica(p, m);
    return r == nullptr || (ownPlan && synced_.count({p, m}) != 0);
  };
  std::vector<std::vector<MemberId>> owners(partitions);
  std::vector<SyncingReplica> syncing;
  awaiting_.clear();
  for (PartitionId p = 0; p < partitions; ++p) {
    const std::vector<MemberId>& was = cur->table.owners(p);
    std::vector<MemberId>& o = owners[p];
    // Complete surviving replicas first (the first is the primary), then incomplete ones that
    // remain owners.
    for (MemberId m : was) {
      if (!failed(m) && complete(p, m)) o.push_back(m);
    }
    for (MemberId m : was) {
      if (!failed(m) && !complete(p, m) && ideal.isOwner(p, m)) o.push_back(m);
    }
    if (o.empty()) {  // every replica failed: the partition starts again, empty
      o = ideal.owners(p);
      for (std::size_t i = 1; i < o.size(); ++i) {  // backups take the (empty) snapshot
        syncing.push_back(SyncingReplica{p, o[i], t1Version});
        awaiting_[{p, o[i]}] = t1Version;
      }
      continue;
    }
    // The primary failed: a backup took over, and every other owner resyncs from it (it may
    // hold updates the old primary replicated to some backups only).
    const bool promoted = was.empty() || o.front() != was.front();
    for (MemberId m : ideal.owners(p)) {
      if (!contains(o, m)) o.push_back(m);
    }
    for (std::size_t i = 1; i < o.size(); ++i) {
      const MemberId m = o[i];
      const SyncingReplica* before = cur->syncingReplica(p, m);
      if (complete(p, m) && !promoted) continue;
      const std::uint64_t since = before && ownPlan && !promoted ? before->since : t1Version;
      syncing.push_back(SyncingReplica{p, m, since});
      if (ideal.isOwner(p, m)) awaiting_[{p, m}] = since;
    }
  }
  synced_.clear();
  auto t1 = std::make_shared<Topology>();
  t1->version = t1Version;
  t1->members = std::move(t1Members);
  t1->table = PartitionTable(partitions, std::move(owners));
  t1->backups = cur->backups;
  t1->nextMemberId = nextId;
  t1->syncing = std::move(syncing);

  target_ = std::make_shared<Topology>();
  target_->version = t1->version + 1;
  target_->members = std::move(after);
  target_->table = ideal;
  target_->backups = cur->backups;
  target_->nextMemberId = nextId;
  t1Version_ = t1->version;
  busy_ = true;
  syncing_ = false;
  install(std::move(t1), [this] { migrating(); });
}

void Coordinator::migrating() {
  if (replan_) {  // a member failed since this change was planned: plan again from here
    replan_ = false;
    syncing_ = false;
    busy_ = false;
    std::vector<MemberInfo> aim = std::move(target_->members);
    target_.reset();
    queue_.push_front(Change{Kind::kReplan, 0, {}, 0, {}, std::move(aim)});
    pump();
    return;
  }
  syncing_ = true;
  if (awaiting_.empty()) finishMigration();
}

void Coordinator::onSynced(PartitionId partition, MemberId member, std::uint64_t version) {
  if (!busy_) return;
  auto it = awaiting_.find({partition, member});
  if (it == awaiting_.end()) {
    // Not awaited (a resyncing owner that is not an ideal one), yet complete: a re-plan that
    // makes it an ideal owner must count it as complete, for nothing will report it again.
    const TopologyPtr cur = host_.currentTopology();
    const SyncingReplica* r = cur->syncingReplica(partition, member);
    if (r != nullptr && version >= r->since) synced_.insert({partition, member});
    return;
  }
  if (version < it->second) return;  // about an older snapshot
  awaiting_.erase(it);
  synced_.insert({partition, member});
  if (syncing_ && awaiting_.empty()) finishMigration();
}

void Coordinator::finishMigration() {
  syncing_ = false;
  auto t2 = std::move(target_);
  install(std::move(t2), [this] {
    busy_ = false;
    replan_ = false;  // a failure during T2's install is queued as its own change
    pump();
  });
}

std::vector<MemberInfo> Coordinator::othersIn(const Topology& next) const {
  const TopologyPtr cur = host_.currentTopology();
  std::vector<MemberInfo> out;
  auto add = [&](const MemberInfo& m) {
    if (m.id == host_.selfId() || failed_.count(m.id) != 0) return;
    for (const auto& o : out) {
      if (o.id == m.id) return;
    }
    out.push_back(m);
  };
  for (const auto& m : next.members) add(m);
  for (const auto& m : cur->members) add(m);
  return out;
}

void Coordinator::install(TopologyPtr next, UniqueFunction<void()> then) {
  const std::vector<MemberInfo> targets = othersIn(*next);

  // Phase 1: every member fences what it is about to lose and drains it. A member that does
  // not answer (gone) does not block the change; its request fails at the peer's deadline.
  auto pending = std::make_shared<std::size_t>(targets.size() + 1);
  auto thenPtr = std::make_shared<UniqueFunction<void()>>(std::move(then));
  auto arrive = [this, pending, next, thenPtr]() {
    if (--*pending == 0) commit(next, std::move(*thenPtr));
  };
  const std::string body = encode(TopologyBody{*next});
  for (const MemberInfo& m : targets) {
    host_.sendToMember(m, MessageType::kTopologyPrepare, body,
                       [arrive](Result<Frame>) mutable { arrive(); });
  }
  host_.prepareLocally(*next, [arrive]() mutable { arrive(); });
}

void Coordinator::commit(TopologyPtr next, UniqueFunction<void()> then) {
  const std::vector<MemberInfo> targets = othersIn(*next);
  // This node may stop being the coordinator with this commit; everything below must not touch
  // `this` after commitLocally() unless it still is. So take what is needed first.
  CoordinatorHost& host = host_;
  const std::string body = encode(TopologyBody{*next});
  // One count per member, plus one for the local commit: `then` never runs before it, even if
  // every send fails at once.
  auto pending = std::make_shared<std::size_t>(targets.size() + 1);
  auto thenPtr = std::make_shared<UniqueFunction<void()>>(std::move(then));
  const bool stillCoordinator = next->coordinator() == host.selfId();
  auto arrive = [&host, pending, thenPtr, stillCoordinator] {
    if (--*pending != 0) return;
    host.commitRoundFinished();
    if (stillCoordinator && *thenPtr) (*thenPtr)();
  };
  host.commitRoundStarted();
  for (const MemberInfo& m : targets) {
    host.sendToMember(m, MessageType::kTopologyCommit, body, [arrive](Result<Frame>) { arrive(); });
  }
  host.commitLocally(next);  // may retire this Coordinator (it handed the role on)
  arrive();
}

}  // namespace ingrid
