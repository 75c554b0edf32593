// FailureDetector's rules (failure_detector.h); the node's timers and messages that drive them
// are in node_failure.cpp.
#include "cluster/failure_detector.h"

#include <algorithm>
#include <utility>

namespace ingrid {

FailureDetector::Millis FailureDetector::Timing::hearingWindow() const {
  return std::min(3 * heartbeatInterval, failureTimeout);
}

FailureDetector::Millis FailureDetector::Timing::judgeInterval() const {
  return std::min(std::max(failureTimeout / 20, Millis(10)),
                  std::max(heartbeatInterval, Millis(10)));
}

FailureDetector::Millis FailureDetector::Timing::unreachableThreshold() const {
  // Early enough that a partial partition is resolved (a write waiting on a backup its primary
  // cannot reach released) about one failure timeout after the cut: this threshold, up to a
  // heartbeat until the report, and a commit. Late enough that a member that died looks dead to
  // the leader too when the others report it (the leader counts a member as one it hears for
  // hearingWindow() after its last answer): a dead member that looked alive, reported cut from
  // the living, made the leader keep it and remove them. Never past the failure timeout.
  return std::min(failureTimeout, std::max(leaseDuration, hearingWindow() + heartbeatInterval));
}

void FailureDetector::listed(MemberId id, SteadyTime now) {
  lastHeard_.try_emplace(id, Hearing{now});
}

void FailureDetector::heard(MemberId id, SteadyTime now) {
  if (auto it = lastHeard_.find(id); it != lastHeard_.end()) it->second = Hearing{now, true};
}

bool FailureDetector::isWatched(MemberId id) const {
  return std::find(watched_.begin(), watched_.end(), id) != watched_.end();
}

void FailureDetector::suspect(MemberId id, SteadyTime now) {
  suspects_.insert_or_assign(id, now + 2 * timing_.failureTimeout);
  if (!isWatched(id)) {
    watched_.push_back(id);
    watchedSince_.try_emplace(id, now);
  }
}

const std::vector<MemberId>& FailureDetector::beginRound(const Topology& t,
                                                         std::vector<MemberId> ring, MemberId self,
                                                         MemberId leader, SteadyTime now) {
  std::erase_if(lastHeard_, [&](const auto& kv) { return !t.hasMember(kv.first); });
  std::erase_if(probedAt_, [&](const auto& kv) { return !t.hasMember(kv.first); });
  watched_ = std::move(ring);
  // The control plane's leader, by every member: a member the leader cannot send to (its lease
  // grants lost, while its requests arrive) reports it; and a new leader has watched the old
  // one, whose silence it then judges from its last answer.
  if (leader != 0 && leader != self && t.hasMember(leader) && !isWatched(leader)) {
    watched_.push_back(leader);
  }
  std::erase_if(suspects_,
                [&](const auto& kv) { return kv.second < now || !t.hasMember(kv.first); });
  for (const auto& [id, until] : suspects_) {
    if (!isWatched(id)) watched_.push_back(id);
  }
  // A member's silence counts from when this member started watching it, at the earliest.
  std::erase_if(watchedSince_, [&](const auto& kv) { return !isWatched(kv.first); });
  for (const MemberId id : watched_) {
    watchedSince_.try_emplace(id, now);
    listed(id, now);
  }
  return watched_;
}

FailureDetector::SteadyTime FailureDetector::silentSince(MemberId id) const {
  SteadyTime since{};
  if (auto heard = lastHeard_.find(id); heard != lastHeard_.end()) since = heard->second.at;
  if (auto w = watchedSince_.find(id); w != watchedSince_.end()) since = std::max(since, w->second);
  return since;
}

bool FailureDetector::hearsFrom(MemberId id, SteadyTime now) const {
  return answeredWithin(id, timing_.hearingWindow(), now);
}

bool FailureDetector::answeredWithin(MemberId id, Millis window, SteadyTime now) const {
  auto it = lastHeard_.find(id);
  return it != lastHeard_.end() && it->second.answered && now - it->second.at < window;
}

std::vector<MemberId> FailureDetector::unreachable(SteadyTime now) const {
  std::vector<MemberId> out;
  const auto after = timing_.unreachableThreshold();
  for (const MemberId id : watched_) {
    auto heard = lastHeard_.find(id);
    const bool answered = (heard != lastHeard_.end() && heard->second.answered) ||
                          suspects_.count(id) != 0;  // it held a request up: it was a member
    if (now - silentSince(id) > (answered ? after : timing_.failureTimeout)) out.push_back(id);
  }
  return out;
}

std::vector<MemberId> FailureDetector::failed(SteadyTime now) const {
  std::vector<MemberId> out;
  for (const auto& [id, heard] : lastHeard_) {
    if (now - heard.at > timing_.failureTimeout) out.push_back(id);
  }
  return out;  // by id: lastHeard_ is ordered
}

bool FailureDetector::probeDue(MemberId id, SteadyTime now) {
  if (now - silentSince(id) <= timing_.failureTimeout) return false;
  auto [at, first] = probedAt_.try_emplace(id, now);
  if (!first && now - at->second < timing_.failureTimeout) return false;
  at->second = now;
  return true;
}

void FailureDetector::startJudging(SteadyTime now) {
  for (auto& [id, hearing] : lastHeard_) {
    const auto since = watchedSince_.find(id);
    const bool heardWatching =
        hearing.answered && since != watchedSince_.end() && hearing.at >= since->second;
    if (!heardWatching) hearing = Hearing{std::max(hearing.at, now), false};
  }
}

void FailureDetector::discountStall(SteadyTime now, Millis cadence) {
  // A stalled leader (a stalled host: every member at once) would otherwise find every member
  // silent the moment it runs again, before it reads the answers waiting for it, and remove them
  // all one after another; a stalled member would report every other one cut off.
  const auto ranAt = std::exchange(ranAt_, now);
  if (ranAt == SteadyTime{} || now - ranAt <= std::max(timing_.heartbeatInterval, 2 * cadence)) {
    return;
  }
  const auto stalled = now - ranAt - cadence;
  for (auto& [id, heard] : lastHeard_) heard.at = std::min(now, heard.at + stalled);
}

void FailureDetector::clear() {
  lastHeard_.clear();
  watched_.clear();
  suspects_.clear();
  watchedSince_.clear();
}

}  // namespace ingrid
