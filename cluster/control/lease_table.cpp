#include "cluster/control/lease_table.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace ingrid {

void LeaseTable::raiseFloor(MemberId id, std::uint64_t version) {
  assert(host_.onNetworkThread());
  std::uint64_t& floor = leaseFloor_[id];
  floor = std::max(floor, version);
}

LeaseTable::SteadyTime LeaseTable::expiry(MemberId id) const {
  SteadyTime from = leaderSince_;
  if (auto it = lastGrant_.find(id); it != lastGrant_.end()) from = std::max(from, it->second);
  return from + host_.leaseWait();
}

void LeaseTable::whenGranted(const std::vector<MemberId>& ids, std::chrono::milliseconds atMost,
                             UniqueFunction<void()> then) {
  assert(host_.onNetworkThread());
  Waiter w{{}, std::make_shared<UniqueFunction<void()>>(std::move(then))};
  for (MemberId id : ids) {
    if (lastGrant_.count(id) == 0) w.ids.insert(id);
  }
  if (w.ids.empty()) {
    (*w.then)();
    return;
  }
  std::weak_ptr<int> life = life_;
  host_.runAfter(atMost, [life, then = w.then] {
    if (life.expired() || !*then) return;
    auto run = std::move(*then);
    *then = UniqueFunction<void()>();
    run();
  });
  waiters_.push_back(std::move(w));
}

std::vector<std::shared_ptr<UniqueFunction<void()>>> LeaseTable::takeDue() {
  std::vector<std::shared_ptr<UniqueFunction<void()>>> due;
  std::erase_if(waiters_, [&](Waiter& w) {
    if (!*w.then) return true;  // its wait ran out: it ran then
    if (!w.ids.empty()) return false;
    due.push_back(std::move(w.then));
    return true;
  });
  return due;
}

void LeaseTable::giveUpOn(MemberId id) {
  assert(host_.onNetworkThread());
  for (Waiter& w : waiters_) w.ids.erase(id);
  std::weak_ptr<int> life = life_;
  for (auto& then : takeDue()) {
    auto run = std::move(*then);
    *then = UniqueFunction<void()>();
    run();
    if (life.expired()) return;
  }
}

void LeaseTable::remember(const TopologyPtr& t) {
  seen_.emplace(t->version, t);
  while (seen_.size() > kSeenTopologies) seen_.erase(seen_.begin());
}

std::string LeaseTable::refusal(const Ask& ask, const Topology& t) const {
  const MemberInfo* m = t.member(ask.id);
  if (m == nullptr || m->incarnation != ask.incarnation || revoked_.count(ask.id) != 0 ||
      removed_(ask.id)) {
    return "no lease for member " + std::to_string(ask.id) +
           ": it is not a live member at topology v" + std::to_string(t.version) +
           " (revoked, removed, or another incarnation)";
  }
  const std::string stale = "no lease for member " + std::to_string(ask.id) +
                            ": it has installed topology v" + std::to_string(ask.version) + ", ";
  if (auto it = leaseFloor_.find(ask.id); it != leaseFloor_.end() && ask.version < it->second) {
    return stale + "and is about to lose a primary at v" + std::to_string(it->second);
  }
  if (ask.version < t.primariesChangedAt()) {
    // Primaries moved since its version: it may still believe itself the primary of one it lost.
    // Judged precisely when this leader saw that version (a member a few ms behind is not
    // refused), and refused when it did not.
    auto it = seen_.find(ask.version);
    if (it == seen_.end() || it->second->table.partitionCount() != t.table.partitionCount()) {
      return stale + "older than v" + std::to_string(t.primariesChangedAt()) +
             ", which moves primaries";
    }
    const Topology& old = *it->second;
    for (PartitionId p = 0; p < t.table.partitionCount(); ++p) {
      if (old.table.primary(p) == ask.id &&
          (t.table.primary(p) != ask.id || t.epoch(p) != old.epoch(p))) {
        return stale + "where it is the primary of partition " + std::to_string(p) +
               ", which it is not (or not in the same epoch) at v" + std::to_string(t.version);
      }
    }
  }
  return {};
}

void LeaseTable::request(MemberId id, std::uint64_t incarnation, std::uint64_t version,
                         UniqueFunction<void(Result<bool>)> reply) {
  assert(host_.onNetworkThread());
  Ask ask{id, incarnation, version, std::move(reply)};
  const TopologyPtr t = host_.currentTopology();
  remember(t);
  if (std::string why = refusal(ask, *t); !why.empty()) {
    ask.reply(Error(Errc::unavailable, std::move(why)));
    return;
  }
  if (queue_.empty()) firstQueued_ = host_.now();
  queue_.push_back(std::move(ask));
  runBarrier();
}

std::chrono::milliseconds LeaseTable::barrierSpacing() const {
  return std::min(kMaxBarrierSpacing, host_.leaseWait() / 32);
}

void LeaseTable::runBarrier() {
  if (barrierInFlight_ || barrierDue_ || queue_.empty()) return;
  // Spaced: every member renews at least three times per lease, and each barrier is a log entry
  // every member's log receives, so one barrier per request would cost every member O(members)
  // messages. And gathered: kGather after the batch's first request.
  const auto now = host_.now();
  const auto spacing = barrierSpacing();
  if (const auto due = std::max(lastBarrier_ + spacing, firstQueued_ + std::min(kGather, spacing));
      now < due) {
    barrierDue_ = true;
    std::weak_ptr<int> life = life_;
    host_.runAfter(std::chrono::ceil<std::chrono::milliseconds>(due - now), [this, life] {
      if (life.expired()) return;
      barrierDue_ = false;
      runBarrier();
    });
    return;
  }
  lastBarrier_ = now;
  barrierInFlight_ = true;
  // Every request in this batch arrived before the barrier was proposed: its commit proves this
  // member led after each request was sent.
  auto batch = std::make_shared<std::vector<Ask>>(std::move(queue_));
  queue_.clear();
  std::weak_ptr<int> life = life_;
  host_.barrier([this, life, batch](Result<bool> r) {
    if (life.expired()) return;  // leadership lost: the askers time out and ask the next leader
    barrierInFlight_ = false;
    const auto committed = host_.now();
    const TopologyPtr t = host_.currentTopology();
    remember(t);
    for (Ask& ask : *batch) {
      // Judged again: a revocation, a floor or a topology may have come while the barrier ran.
      if (!r) {
        ask.reply(r.error());
      } else if (std::string why = refusal(ask, *t); !why.empty()) {
        ask.reply(Error(Errc::unavailable, std::move(why)));
      } else {
        lastGrant_[ask.id] = committed;
        ask.reply(true);
        for (Waiter& w : waiters_) w.ids.erase(ask.id);
      }
    }
    auto due = takeDue();
    runBarrier();
    for (auto& then : due) {
      auto run = std::move(*then);
      *then = UniqueFunction<void()>();
      run();
      if (life.expired()) return;  // (it may end this leadership's coordinator)
    }
  });
}

}  // namespace ingrid
