#include <ingrid/cluster/coordinator.h>

#include <algorithm>
#include <memory>

#include <ingrid/cluster/messages.h>

namespace ingrid {

void Coordinator::requestJoin(std::string address, UniqueFunction<void(Result<MemberId>)> reply) {
  queue_.push_back(Change{true, 0, std::move(address), std::move(reply)});
  pump();
}

void Coordinator::requestLeave(MemberId id) {
  queue_.push_back(Change{false, id, {}, {}});
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
  std::vector<MemberInfo> after = cur->members;
  MemberId nextId = cur->nextMemberId;
  if (change.join) {
    for (const auto& m : cur->members) {
      if (m.address == change.address) {  // a retried join: already admitted
        if (change.reply) change.reply(m.id);
        return;
      }
    }
    change.id = nextId++;
    after.push_back(MemberInfo{change.id, change.address});
    if (change.reply) change.reply(change.id);
  } else {
    auto it = std::find_if(after.begin(), after.end(),
                           [&](const MemberInfo& m) { return m.id == change.id; });
    if (it == after.end()) return;  // not a member (any more)
    after.erase(it);
    if (after.empty()) return;  // the last member leaves: nothing to hand over to
  }

  std::vector<MemberId> ids;
  for (const auto& m : after) ids.push_back(m.id);
  const PartitionTable ideal =
      PartitionTable::balanced(cur->table.partitionCount(), ids, cur->backups);

  // T1: current owners that remain members, plus the new owners as extra backups.
  std::vector<MemberInfo> t1Members = cur->members;
  if (change.join) t1Members.push_back(MemberInfo{change.id, change.address});
  auto isT1Member = [&](MemberId id) {
    return std::any_of(t1Members.begin(), t1Members.end(),
                       [&](const MemberInfo& m) { return m.id == id; });
  };
  std::vector<std::vector<MemberId>> owners(cur->table.partitionCount());
  awaiting_.clear();
  for (PartitionId p = 0; p < cur->table.partitionCount(); ++p) {
    for (MemberId m : cur->table.owners(p)) {
      if (isT1Member(m)) owners[p].push_back(m);
    }
    for (MemberId m : ideal.owners(p)) {
      if (std::find(owners[p].begin(), owners[p].end(), m) == owners[p].end()) {
        owners[p].push_back(m);
        awaiting_.insert({p, m});
      }
    }
  }
  auto t1 = std::make_shared<Topology>();
  t1->version = cur->version + 1;
  t1->members = std::move(t1Members);
  t1->table = PartitionTable(cur->table.partitionCount(), std::move(owners));
  t1->backups = cur->backups;
  t1->nextMemberId = nextId;

  target_ = std::make_shared<Topology>();
  target_->version = t1->version + 1;
  target_->members = std::move(after);
  target_->table = ideal;
  target_->backups = cur->backups;
  target_->nextMemberId = nextId;
  t1Version_ = t1->version;
  busy_ = true;
  syncing_ = false;
  install(std::move(t1), [this] {
    syncing_ = true;
    if (awaiting_.empty()) finishMigration();
  });
}

void Coordinator::onSynced(PartitionId partition, MemberId member, std::uint64_t version) {
  if (!busy_ || version < t1Version_) return;  // a report about an older change
  awaiting_.erase({partition, member});
  if (syncing_ && awaiting_.empty()) finishMigration();
}

void Coordinator::finishMigration() {
  syncing_ = false;
  auto t2 = std::move(target_);
  install(std::move(t2), [this] {
    busy_ = false;
    pump();
  });
}

std::vector<MemberInfo> Coordinator::othersIn(const Topology& next) const {
  const TopologyPtr cur = host_.currentTopology();
  std::vector<MemberInfo> out;
  auto add = [&](const MemberInfo& m) {
    if (m.id == host_.selfId()) return;
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
  auto pending = std::make_shared<std::size_t>(targets.size());
  auto thenPtr = std::make_shared<UniqueFunction<void()>>(std::move(then));
  const bool stillCoordinator = next->coordinator() == host.selfId();
  host.commitRoundStarted();
  for (const MemberInfo& m : targets) {
    host.sendToMember(m, MessageType::kTopologyCommit, body,
                      [&host, pending, thenPtr, stillCoordinator](Result<Frame>) {
                        if (--*pending != 0) return;
                        host.commitRoundFinished();
                        if (stillCoordinator && *thenPtr) (*thenPtr)();
                      });
  }
  host.commitLocally(next);  // may retire this Coordinator (it handed the role on)
  if (targets.empty()) {
    host.commitRoundFinished();
    if (stillCoordinator && *thenPtr) (*thenPtr)();
  }
}

}  // namespace ingrid
