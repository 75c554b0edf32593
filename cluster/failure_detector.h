// FailureDetector: whom one member hears, and since when each has been silent. It holds the
// member's hearings (a heartbeat answer, a lease request or grant), whom it watches (its ring
// successors, the control plane's leader, and its suspects: members that left a request of its
// unanswered) and the rules that turn silence into verdicts: a member to report unreachable, one
// to probe, one the leader declares failed, and time during which detection itself did not run
// (a stalled process) that is nobody's silence.
//
// It owns no timer and no socket: the node calls it with its monotonic `now` at each heartbeat,
// renewal, judge tick and answer (node_failure.cpp), so a unit test or the simulator drives it.
// Thread: the node's network thread only (not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include <ingrid/topology.h>

namespace ingrid {

class FailureDetector {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using Millis = std::chrono::milliseconds;

  // The intervals the rules derive from (NodeOptions), and the windows derived from them.
  struct Timing {
    Millis failureTimeout{3000};
    Millis heartbeatInterval{500};
    Millis leaseDuration{1500};
    // How long after its last answer a member is one this member hears: three heartbeats, at
    // most the failure timeout.
    Millis hearingWindow() const;
    // How often the leader judges: a twentieth of the failure timeout, at least 10 ms and at most
    // a heartbeat interval.
    Millis judgeInterval() const;
    // Silence after which a member reports a watched peer unreachable (with its lease requests):
    // the lease, at least hearingWindow() and a heartbeat, at most the failure timeout.
    Millis unreachableThreshold() const;
  };

  explicit FailureDetector(Timing timing) : timing_(timing) {}
  const Timing& timing() const noexcept { return timing_; }

  // Member `id` is listed (first seen in a topology at `now`): its silence counts from `now`
  // until it answers. A member listed already keeps its hearing.
  void listed(MemberId id, SteadyTime now);
  // An answer from `id` at `now` (a heartbeat answer, a lease request or grant). Ignored for a
  // member not listed.
  void heard(MemberId id, SteadyTime now);
  // A request of this member's went unanswered by `id` at `now`: `id` is a suspect until two
  // failure timeouts after `now`, watched (from `now` if it was not watched before).
  void suspect(MemberId id, SteadyTime now);
  // A heartbeat round at `now` for topology `t`: forgets members `t` does not list and suspects
  // whose watch ran out, and watches `ring` (this member's ring successors), `leader` (if another
  // member listed in `t`; 0 for none) and the suspects. Returns whom to watch, in that order;
  // each is listed (listed()) and watched from `now` if it was not before.
  const std::vector<MemberId>& beginRound(const Topology& t, std::vector<MemberId> ring,
                                          MemberId self, MemberId leader, SteadyTime now);
  const std::vector<MemberId>& watched() const noexcept { return watched_; }

  // Since when `id` has been silent to this member: its last answer, or when this member started
  // watching it, whichever is later (the epoch if neither).
  SteadyTime silentSince(MemberId id) const;
  // Whether `id` answered within hearingWindow() before `now` (a listed member that never
  // answered is not heard).
  bool hearsFrom(MemberId id, SteadyTime now) const;
  // Whether `id` answered within `window` before `now` (the leader's grants answer for it, so it
  // gets no heartbeat).
  bool answeredWithin(MemberId id, Millis window, SteadyTime now) const;
  // The watched members to report unreachable at `now`: silent for unreachableThreshold() (a
  // member that never answered and was never a suspect: for the failure timeout, since it may be
  // a joiner that does not know yet that it was admitted).
  std::vector<MemberId> unreachable(SteadyTime now) const;
  // The listed members silent for more than the failure timeout at `now`, by id (the leader's
  // verdict: they fail).
  std::vector<MemberId> failed(SteadyTime now) const;
  // Whether to probe `id` (ask it for its topology as a client) at `now`: watched and silent for
  // more than the failure timeout, and not probed within one. Records the probe.
  bool probeDue(MemberId id, SteadyTime now);

  // This member became the control plane's leader at `now`: a member it has not heard while
  // watching it gets a failure timeout from `now` to ask for a lease, and until it does is not
  // one this member hears.
  void startJudging(SteadyTime now);
  // Called first by each detection step at `now`, with the cadence of the caller (the leader's
  // judge interval, or else the heartbeat interval). A gap since the previous step longer than a
  // heartbeat interval and two cadences (this process was paused or starved) moves every last
  // hearing forward by the gap less one cadence, never past `now`: answers that came meanwhile
  // wait unread, and the silence is this member's own.
  void discountStall(SteadyTime now, Millis cadence);
  // Forgets everything (the identity ended).
  void clear();

 private:
  struct Hearing {
    SteadyTime at;
    bool answered = false;  // an answer since it was listed
  };
  bool isWatched(MemberId id) const;

  const Timing timing_;
  // Ordered maps: iteration order is by id, the same on every run (the simulator's replays).
  std::map<MemberId, Hearing> lastHeard_;
  std::vector<MemberId> watched_;
  std::map<MemberId, SteadyTime> suspects_;      // each until when it is watched
  std::map<MemberId, SteadyTime> watchedSince_;  // since when each watched member is
  std::map<MemberId, SteadyTime> probedAt_;
  SteadyTime ranAt_{};  // the last discountStall; the epoch before the first
};

}  // namespace ingrid
