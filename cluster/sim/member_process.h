// MemberProcess: one member's process in a Simulation (simulation.h): the node it runs, started
// and stopped on baton threads (their waits hand control to the simulator), crashed like kill -9
// (its network dies at once: SimNetwork::kill), and reaped after an event once its start or stop
// has returned. N is NodeImpl (the simulator's scenario, cluster_sim.cpp) or Node (the test kit,
// testing/): any type with start(), stop() and crash() or TEST_crash(), made and destroyed in the
// member's scope.
//
// Sequence: start(make) -> baton runs start() -> up() or startError() -> stop(crash) -> baton
// runs stop() or crash() -> reap(): the node is destroyed (or kept, stopped, with keepStopped) and
// the member's network revived -> start(make) again (a new process on the same address).
//
// Thread safety: the simulator's thread only (the batons run while it waits for them).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ingrid/clock.h>
#include <ingrid/result.h>

#include "cluster/sim/simulation.h"
#include "cluster/transport/sim_network.h"

namespace ingrid::sim {

// A member's wall clock as a Clock (NodeOptions::clock, bucket timestamps): Member::wallNow,
// which drifts with the member.
class MemberClock final : public Clock {
 public:
  explicit MemberClock(const Member& member) : member_(member) {}
  Nanos now() const noexcept override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               member_.wallNow().time_since_epoch())
        .count();
  }

 private:
  const Member& member_;
};

template <class N>
class MemberProcess {
 public:
  // keepStopped: reap() keeps a stopped node (it refuses calls) until the next start() or the
  // destructor, so that a pointer to it stays valid while the member is down.
  MemberProcess(Simulation& sim, Member& member, bool keepStopped = false)
      : sim_(sim), member_(member), keepStopped_(keepStopped) {}
  // Not movable: the batons hold `this`.
  MemberProcess(const MemberProcess&) = delete;
  MemberProcess& operator=(const MemberProcess&) = delete;
  // Destroys the node in the member's scope. REQUIRES: no baton running (idle()).
  ~MemberProcess() { destroyNode(); }

  Member& member() const noexcept { return member_; }
  // The current node (starting, up, stopping, or stopped and kept), or null.
  N* node() const noexcept { return node_.get(); }
  // Started, and no stop or crash since.
  bool up() const noexcept { return up_ && !stopping_; }
  // A stop or crash has begun and the node was not yet reaped.
  bool stopping() const noexcept { return stopping_; }
  // No start or stop runs on a baton now (a finished one may still wait for reap()).
  bool idle() const noexcept { return batonDone_; }
  bool hasBaton() const noexcept { return baton_ != nullptr; }
  // Stops reaped so far: 0 for the first process, then 1, 2, ...
  int generation() const noexcept { return generation_; }
  // Why the last start() failed (empty if it did not).
  const std::string& startError() const noexcept { return startError_; }

  // Makes the node with make() in the member's scope (a stopped node kept from before is
  // destroyed first) and runs its start() on a baton, then `started` with its result (on the
  // baton). False (nothing done) while a start or stop still runs on a baton (!idle()): the
  // node it runs must not be destroyed under it. REQUIRES: !up().
  bool start(const std::function<std::unique_ptr<N>()>& make,
             std::function<void(const Result<bool>&)> started = {}) {
    if (!idle()) return false;
    destroyNode();
    SimulatedMemberScope scope(&member_);
    node_ = make();
    up_ = false;
    startError_.clear();
    batonDone_ = false;
    N* node = node_.get();
    baton_ = member_.spawn([this, node, started = std::move(started)] {
      Result<bool> r = node->start();
      up_ = r.ok();
      if (!r.ok()) startError_ = r.error().message();
      if (started) started(r);
      batonDone_ = true;
    });
    sim_.trace("start", member_.index() + 1, static_cast<std::uint64_t>(generation_));
    return true;
  }

  // Stops the node on a baton: stop() (a graceful leave), or crash(), its network killed first
  // so that what crash() still runs reaches no one. False (nothing done) if there is no node, a
  // start or stop still runs, or a stop already began.
  bool stop(bool crash) {
    if (!node_ || stopping_ || !batonDone_ || stopped_) return false;
    stopping_ = true;
    up_ = false;
    sim_.trace(crash ? "crash" : "stop", member_.index() + 1);
    // In the member's scope: the handlers kill() drops are the member's, and read its clock.
    SimulatedMemberScope scope(&member_);
    if (crash) sim_.network().kill(member_);
    baton_.reset();
    batonDone_ = false;
    N* node = node_.get();
    baton_ = member_.spawn([this, node, crash] {
      if (crash) {
        if constexpr (requires { node->crash(); }) {
          node->crash();
        } else {
          node->TEST_crash();
        }
      } else {
        node->stop();
      }
      batonDone_ = true;
    });
    return true;
  }

  // After an event: joins a baton that finished; after a stop, destroys the node (or keeps it,
  // stopped) and revives the member's network. Returns whether a stop was reaped.
  bool reap() {
    if (!baton_ || !batonDone_) return false;
    SimulatedMemberScope scope(&member_);
    baton_.reset();
    if (!stopping_) return false;
    if (keepStopped_) {
      stopped_ = true;
    } else {
      node_.reset();
    }
    stopping_ = false;
    sim_.network().revive(member_);
    ++generation_;
    return true;
  }

 private:
  void destroyNode() {
    if (!node_) return;
    SimulatedMemberScope scope(&member_);
    node_.reset();
    stopped_ = false;
  }

  Simulation& sim_;
  Member& member_;
  bool keepStopped_ = false;
  std::unique_ptr<N> node_;
  std::unique_ptr<SimulatedMember::Thread> baton_;  // start() or stop() under way, or unreaped
  bool batonDone_ = true;  // written by the baton thread before it hands control back
  bool up_ = false;        // started and not stopped
  bool stopping_ = false;  // a stop or crash is under way
  bool stopped_ = false;   // kept after a stop (keepStopped)
  int generation_ = 0;
  std::string startError_;
};

}  // namespace ingrid::sim
