#include "cluster/control/coordinator.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>

#include "cluster/transport/messages.h"

namespace ingrid {

void Coordinator::start() {
  assert(host_.onNetworkThread());
  const TopologyPtr cur = host_.currentTopology();
  std::shared_ptr<Topology> next;
  if (cur->members.empty()) {
    next = host_.firstTopology();  // a new cluster: this member alone
  } else {
    next = std::make_shared<Topology>(*cur);
    next->version = cur->version + 1;
  }
  busy_ = true;
  std::weak_ptr<int> life = life_;
  // Committing its own topology proves this leader has applied everything before it: plans are
  // made from the latest committed view only.
  host_.proposeTopology(next, [this, life](Result<bool> r) {
    if (life.expired()) return;
    if (!r) {
      host_.runAfter(std::chrono::milliseconds(100), [this, life] {
        if (!life.expired()) start();
      });
      return;
    }
    busy_ = false;
    replan_ = false;  // failures reported meanwhile are queued as their own changes
    const TopologyPtr now = host_.currentTopology();
    const PartitionTable ideal =
        Topology::balancedFor(now->table.partitionCount(), now->members, now->backups);
    if (!now->syncing.empty() || !(now->table == ideal)) {
      // The previous leader left a change unfinished: aim for the members committed now.
      queue_.push_front(Change{Kind::kReplan, 0, {}, 0, {}, now->members, {}});
    }
    pump();
  });
}

void Coordinator::requestJoin(std::string address, std::uint64_t incarnation,
                              std::vector<std::uint16_t> shardPorts, std::string zone,
                              UniqueFunction<void(Result<MemberId>)> reply) {
  assert(host_.onNetworkThread());
  // A join sent again (its reply was lost, or came after the joiner gave up on that connection)
  // is answered at once with the id already given: queued, it would wait behind the change that
  // admitted it, which waits for this very member to sync, and a member cannot act (answer a
  // Hello, take a snapshot, hear the log) before it learns its id.
  auto admitted = [&](const std::vector<MemberInfo>& members) {
    for (const auto& m : members) {
      if (m.address == address && m.incarnation == incarnation && failed_.count(m.id) == 0) {
        return m.id;
      }
    }
    return MemberId{0};
  };
  MemberId known = admitted(host_.currentTopology()->members);
  if (known == 0 && busy_ && target_) known = admitted(target_->members);
  if (known != 0) {
    reply(known);
    return;
  }
  // A join naming a member's address with another incarnation is a claim, not a proof: a second
  // process configured with the same address, or a replayed Join, says the same as a restart. The
  // member there is left alone while its lease may still run (it renews it while alive); once
  // its last lease has surely expired (a restarted process's predecessor renews nothing), it is
  // removed now, so that a change stalled on it is re-planned, and the joiner comes in. Until
  // then the joiner is answered unavailable and asks again.
  const auto now = host_.now();
  for (const auto& m : host_.currentTopology()->members) {
    if (m.address != address || m.incarnation == incarnation || failed_.count(m.id) != 0) continue;
    if (m.id == host_.selfId() && !host_.selfRestored()) {
      reply(Error(Errc::join_refused, "address " + address + " is the leader's own (member " +
                                          std::to_string(m.id) + ")"));
      return;
    }
    if (const SteadyTime expires = leases_.expiry(m.id); expires > now) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(expires - now);
      reply(Error(Errc::unavailable,
                  "address " + address + " is member " + std::to_string(m.id) +
                      "'s, whose lease may run " + std::to_string(left.count()) +
                      " ms more; a process that joins at that address with another incarnation "
                      "is admitted only once that member's lease has expired"));
      return;
    }
    leases_.revoke(m.id);
    failMember(m.id);
    reply(Error(Errc::unavailable, "address " + address + " was member " + std::to_string(m.id) +
                                       "'s, which is being removed; ask again"));
    return;
  }
  // The Raft server of a member that was at this address leaves the configuration before the
  // joiner comes in: a process restarted with its data directory votes as that server until its
  // removal commits, and then takes a new Raft id (one process, one Raft server).
  if (const std::optional<MemberId> old = host_.raftServerAt(address)) {
    reply(Error(Errc::unavailable, "address " + address + " is Raft server " +
                                       std::to_string(*old) +
                                       "'s until its removal from the control plane's "
                                       "configuration; ask again"));
    return;
  }
  // ... and until that removal is committed: a leader elected without it would count on the
  // restored server's vote again.
  if (departed_.count(address) != 0 && !host_.raftConfigurationCommitted()) {
    reply(Error(Errc::unavailable, "the removal of the member that was at " + address +
                                       " from the control plane's configuration is not "
                                       "committed yet; ask again"));
    return;
  }
  queue_.push_back(Change{Kind::kJoin,
                          0,
                          std::move(address),
                          incarnation,
                          std::move(reply),
                          {},
                          std::move(shardPorts),
                          std::move(zone)});
  pump();
}

void Coordinator::requestLeave(MemberId id) {
  assert(host_.onNetworkThread());
  queue_.push_back(Change{Kind::kLeave, id, {}, 0, {}, {}, {}});
  pump();
}

void Coordinator::memberFailed(MemberId id, const char* why) {
  assert(host_.onNetworkThread());
  if ((id == host_.selfId() && !host_.selfRestored()) || failed_.count(id) != 0 ||
      !leases_.revoke(id)) {
    return;
  }
  // Rounded up: a timer never fires before the expiry it waits for.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(leases_.expiry(id) - host_.now());
  if (why != nullptr) {
    log_.warn({.member = host_.selfId(), .term = host_.controlTerm(), .peer = id}, "member ",
              host_.selfId(), " (leader): member ", id, " ", why,
              "; removing it once its last lease has surely expired (in ",
              std::max<std::int64_t>(0, wait.count()), " ms)");
  }
  if (wait.count() <= 0) {
    failMember(id);
    return;
  }
  std::weak_ptr<int> life = life_;
  host_.runAfter(wait, [this, life, id] {
    if (!life.expired()) failMember(id);
  });
}

void Coordinator::requestLease(MemberId id, std::uint64_t incarnation, std::uint64_t version,
                               UniqueFunction<void(Result<bool>)> reply) {
  assert(host_.onNetworkThread());
  leases_.request(id, incarnation, version, std::move(reply));
}

void Coordinator::reportUnreachable(MemberId reporter, std::vector<MemberId> unreachable) {
  assert(host_.onNetworkThread());
  const auto now = host_.now();
  if (!partialPartitions_.report(reporter, unreachable, now)) return;
  const TopologyPtr t = host_.currentTopology();
  // Only members this leader hears from: one it does not hear is judged by its own failure
  // detection (and a crashed member that only some have reported yet must not look better
  // connected than the live members that reported it).
  std::vector<MemberId> live;
  for (const MemberInfo& m : t->members) {
    if (failed_.count(m.id) == 0 && !leases_.revoked(m.id) &&
        (m.id == host_.selfId() || host_.hearsFrom(m.id))) {
      live.push_back(m.id);
    }
  }
  // Reports older than a lease renewal round or two are stale (the reporter went quiet: the
  // leader's own failure detection judges it). A cut counts once reported for the leader's
  // hearing window, by when a member that died is no longer one it hears.
  for (const auto& [m, sole] : partialPartitions_.judge(*t, host_.selfId(), live, now,
                                                        host_.leaseWait(), host_.hearingWindow())) {
    if (!sole.empty()) {
      log_.warn({.member = host_.selfId(), .partition = sole.front(), .peer = m}, "member ",
                host_.selfId(), " (leader): member ", m,
                " cannot reach all of the others (a partial partition), but holds the only "
                "complete replica of ",
                sole.size(), " partition(s) (first: ", sole.front(),
                "); kept until the link heals");
      continue;
    }
    log_.warn({.member = host_.selfId(), .peer = m}, "member ", host_.selfId(),
              " (leader): member ", m,
              " cannot reach all of the others (a partial partition); removing it");
    memberFailed(m);
  }
}

std::vector<MemberId> Coordinator::suspects() const {
  assert(host_.onNetworkThread());
  const std::set<MemberId> reported = partialPartitions_.named(host_.now(), host_.leaseWait());
  std::vector<MemberId> out;
  for (const MemberInfo& m : host_.currentTopology()->members) {
    if (failed_.count(m.id) != 0 || leases_.revoked(m.id) || reported.count(m.id) != 0 ||
        (m.id != host_.selfId() && !host_.hearsFrom(m.id))) {
      out.push_back(m.id);
    }
  }
  return out;
}

void Coordinator::failMember(MemberId id) {
  if ((id == host_.selfId() && !host_.selfRestored()) || !failed_.insert(id).second) return;
  if (const MemberInfo* m = host_.currentTopology()->member(id)) departed_.insert(m->address);
  if (busy_ && leaseWait_ && leaseWait_->members.count(id) != 0) {
    // A topology waits for this member's lease, and lists it: it is failed now (dead, for a
    // restart at its address; or its lease ran out), so plan the change again without it.
    *leaseWait_->cancelled = true;
    leaseWait_.reset();
    std::vector<MemberInfo> aim =
        target_ ? std::move(target_->members) : host_.currentTopology()->members;
    target_.reset();
    busy_ = false;
    syncing_ = false;
    replan_ = false;
    queue_.push_front(Change{Kind::kReplan, 0, {}, 0, {}, std::move(aim), {}});
  }
  if (busy_) {
    replan_ = true;
    if (syncing_) migrating();  // waiting for syncs that may never come: re-plan now
    // Otherwise an install round is in flight; migrating() or the end of the change sees it.
  }
  queue_.push_back(Change{Kind::kFail, id, {}, 0, {}, {}, {}});
  // T2 may wait for this member's first lease (finishMigration): not any more.
  leases_.giveUpOn(id);
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
      // (A member at this address with another incarnation was declared failed by requestJoin
      // once its lease had expired, and is filtered out below.)
      for (const auto& m : cur->members) {
        if (m.address == change.address && m.incarnation == change.incarnation &&
            failed_.count(m.id) == 0) {
          if (change.reply) change.reply(m.id);  // a retried join: already admitted
          return;
        }
      }
      after = cur->members;
      change.id = nextId++;
      after.push_back(MemberInfo{change.id, change.address, change.incarnation,
                                 std::move(change.shardPorts), std::move(change.zone)});
      if (change.reply) change.reply(change.id);
      // The joins queued behind it come in with it: one change, one migration, for a fleet that
      // starts at once (one change each took longer than a joiner waits).
      for (std::size_t batched = 1;
           batched < kMaxJoinsPerChange && !queue_.empty() && queue_.front().kind == Kind::kJoin;
           ++batched) {
        Change next = std::move(queue_.front());
        queue_.pop_front();
        const auto same = [&](const MemberInfo& m) {
          return m.address == next.address && m.incarnation == next.incarnation &&
                 failed_.count(m.id) == 0;
        };
        if (const auto it = std::find_if(after.begin(), after.end(), same); it != after.end()) {
          if (next.reply) next.reply(it->id);  // sent twice: the id it already has
          continue;
        }
        const auto sameAddress = [&](const MemberInfo& m) {
          return m.address == next.address && failed_.count(m.id) == 0;
        };
        if (const auto it = std::find_if(after.begin(), after.end(), sameAddress);
            it != after.end()) {
          // Another process claims the address of a member this change admits: it asks again,
          // and is judged then against that member's lease (requestJoin).
          if (next.reply) {
            next.reply(Error(Errc::unavailable, "address " + next.address + " is member " +
                                                    std::to_string(it->id) + "'s, admitted now"));
          }
          continue;
        }
        next.id = nextId++;
        after.push_back(MemberInfo{next.id, next.address, next.incarnation,
                                   std::move(next.shardPorts), std::move(next.zone)});
        if (next.reply) next.reply(next.id);
      }
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
  // Ids are never given twice: a re-plan may aim at a member admitted by a change whose first
  // step never committed (its proposal failed, or it was held for a lease), whose id the
  // committed nextMemberId does not cover yet.
  for (const auto& m : after) nextId = std::max(nextId, m.id + 1);
  if (after.empty()) return;  // the last member leaves: nothing to hand over to
  migrate(std::move(after), nextId);
}

void Coordinator::migrate(std::vector<MemberInfo> after, MemberId nextId) {
  const TopologyPtr cur = host_.currentTopology();
  MigrationInputs in;
  in.failed = &failed_;
  in.ownPlan = cur->version == t1Version_;
  in.synced = &synced_;
  in.restartSnapshots = std::exchange(restartSnapshots_, false);
  in.leader = host_.selfId();
  in.log = log_;
  MigrationPlan plan = planMigration(*cur, std::move(after), nextId, in);
  awaiting_ = std::move(plan.awaiting);
  synced_.clear();
  target_ = std::move(plan.t2);
  t1Version_ = plan.t1->version;
  busy_ = true;
  syncing_ = false;
  install(std::move(plan.t1), [this] { migrating(); });
}

void Coordinator::migrating() {
  if (replan_) {  // a member failed since this change was planned: plan again from here
    replan_ = false;
    syncing_ = false;
    busy_ = false;
    std::vector<MemberInfo> aim = std::move(target_->members);
    target_.reset();
    queue_.push_front(Change{Kind::kReplan, 0, {}, 0, {}, std::move(aim), {}});
    pump();
    return;
  }
  syncing_ = true;
  if (awaiting_.empty()) {
    finishMigration();
    return;
  }
  watchStall(t1Version_, syncsDone_);
}

void Coordinator::watchStall(std::uint64_t version, std::uint64_t progress) {
  std::weak_ptr<int> life = life_;
  const std::chrono::milliseconds stall = host_.migrationStallTimeout();
  host_.runAfter(stall, [this, life, version, progress, stall] {
    if (life.expired() || !busy_ || !syncing_ || t1Version_ != version) return;  // moved on
    if (syncsDone_ != progress) {  // progress: watch the next stretch
      watchStall(version, syncsDone_);
      return;
    }
    log_.warn({.member = host_.selfId()}, "member ", host_.selfId(),
              " (leader): the migration planned at v", version, " finished no sync in ",
              stall.count(), " ms (", awaiting_.size(),
              " awaited); planning it again, restarting its snapshots");
    restartSnapshots_ = true;
    replan_ = true;
    migrating();
  });
}

void Coordinator::onSynced(PartitionId partition, MemberId member, std::uint64_t version) {
  assert(host_.onNetworkThread());
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
  ++syncsDone_;
  synced_.insert({partition, member});
  if (syncing_ && awaiting_.empty()) finishMigration();
}

void Coordinator::finishMigration() {
  syncing_ = false;
  // A member that becomes a primary at T2 holds a lease first (it asked as soon as it was
  // admitted), so that its partitions do not refuse writes in between; a member that never asks
  // holds T2 up for a lease wait at most.
  const TopologyPtr cur = host_.currentTopology();
  std::vector<MemberId> gaining;
  for (PartitionId p = 0; p < target_->table.partitionCount(); ++p) {
    const MemberId m = target_->table.primary(p);
    if (m != 0 && (p >= cur->table.partitionCount() || cur->table.primary(p) != m) &&
        std::find(gaining.begin(), gaining.end(), m) == gaining.end()) {
      gaining.push_back(m);
    }
  }
  std::weak_ptr<int> life = life_;
  leases_.whenGranted(gaining, host_.leaseWait(), [this, life] {
    if (life.expired() || !target_) return;  // (re-planned meanwhile)
    if (replan_) {  // a member failed meanwhile: plan again, without it, rather than install T2
      migrating();
      return;
    }
    auto t2 = std::move(target_);
    install(std::move(t2), [this] {
      busy_ = false;
      replan_ = false;  // a failure during T2's install is queued as its own change
      pump();
    });
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

void Coordinator::install(std::shared_ptr<Topology> next, UniqueFunction<void()> then) {
  const TopologyPtr cur = host_.currentTopology();
  const std::vector<MemberInfo> targets = othersIn(*next);
  next->term = host_.controlTerm();
  next->leader = host_.selfId();
  // Members that stop being the primary of some partition: no lease renewal for them until they
  // have installed `next` (else one whose fence ran out before it learned of `next` could write).
  std::set<MemberId> losing;
  if (cur->table.partitionCount() == next->table.partitionCount()) {
    for (PartitionId p = 0; p < next->table.partitionCount(); ++p) {
      const MemberId was = cur->table.primary(p);
      if (was != 0 && was != next->table.primary(p)) losing.insert(was);
    }
  }
  for (MemberId m : losing) leases_.raiseFloor(m, next->version);
  // Phase 1: every member fences what it is about to lose and drains it. A member that does
  // not answer (gone, paused) does not block the change past the Prepare's deadline; but if it
  // loses a primary, `next` waits until its last lease has surely expired.
  struct Round {
    std::size_t pending;
    std::set<MemberId> unfenced;
  };
  auto round = std::make_shared<Round>(Round{targets.size() + 1, {}});
  auto thenPtr = std::make_shared<UniqueFunction<void()>>(std::move(then));
  std::weak_ptr<int> life = life_;
  auto arrive = [this, life, round, next, thenPtr](MemberId unfenced) {
    if (life.expired()) return;
    if (unfenced != 0) round->unfenced.insert(unfenced);
    if (--round->pending != 0) return;
    // A member declared failed meanwhile needs no wait: failMember runs only once its lease has
    // run out.
    std::erase_if(round->unfenced, [this](MemberId m) { return failed_.count(m) != 0; });
    SteadyTime proposeAt{};
    for (MemberId m : round->unfenced) proposeAt = std::max(proposeAt, leases_.expiry(m));
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(proposeAt - host_.now());
    if (wait.count() <= 0) {
      propose(next, std::move(*thenPtr));
      return;
    }
    log_.warn({.member = host_.selfId()}, "member ", host_.selfId(), " (leader): topology v",
              next->version, " waits ", wait.count(),
              " ms for the lease of a primary that did not fence");
    auto cancelled = std::make_shared<bool>(false);
    leaseWait_ = LeaseWait{round->unfenced, cancelled};
    host_.runAfter(wait, [this, life, next, thenPtr, cancelled] {
      if (life.expired() || *cancelled) return;
      leaseWait_.reset();
      propose(next, std::move(*thenPtr));
    });
  };
  const std::string body = encode(TopologyBody{*next});
  for (const MemberInfo& m : targets) {
    const MemberId id = losing.count(m.id) != 0 ? m.id : 0;
    host_.sendToMember(m, MessageType::kTopologyPrepare, body,
                       [arrive, id](Result<Frame> r) mutable { arrive(r.ok() ? 0 : id); });
  }
  host_.prepareLocally(*next, [arrive]() mutable { arrive(0); });
}

void Coordinator::propose(std::shared_ptr<Topology> next, UniqueFunction<void()> then) {
  std::weak_ptr<int> life = life_;
  auto thenPtr = std::make_shared<UniqueFunction<void()>>(std::move(then));
  host_.proposeTopology(std::move(next), [this, life, thenPtr](Result<bool> r) {
    if (life.expired()) return;
    if (!r) {
      proposalFailed(r.error());
      return;
    }
    (*thenPtr)();
  });
}

void Coordinator::proposalFailed(const Error& why) {
  log_.warn({.member = host_.selfId(), .term = host_.controlTerm()}, "member ", host_.selfId(),
            " (leader): ", why.message(), "; planning again");
  // Plan again from what is committed, aiming where the failed change aimed.
  std::vector<MemberInfo> aim =
      target_ ? std::move(target_->members) : host_.currentTopology()->members;
  target_.reset();
  busy_ = false;
  syncing_ = false;
  replan_ = false;
  std::weak_ptr<int> life = life_;
  host_.runAfter(std::chrono::milliseconds(100), [this, life, aim = std::move(aim)]() mutable {
    if (life.expired()) return;
    queue_.push_front(Change{Kind::kReplan, 0, {}, 0, {}, std::move(aim), {}});
    pump();
  });
}

}  // namespace ingrid
