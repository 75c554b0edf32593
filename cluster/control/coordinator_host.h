// CoordinatorHost: what the control plane leader's coordinator (Coordinator, LeaseTable) needs
// from its node: the topology, links to members, the control plane's log, timers. The node
// implements it; every call is made on, and every callback runs on, the node's network thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/transport/connection.h"
#include "cluster/transport/frame.h"

namespace ingrid {

class CoordinatorHost {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // The node's monotonic time: every decision of the coordinator and its lease table reads it
  // here, never a clock of its own, so that a test or the simulator drives them.
  virtual SteadyTime now() const = 0;
  virtual MemberId selfId() const = 0;
  virtual TopologyPtr currentTopology() const = 0;
  // Whether the caller runs on the node's network thread (the coordinator's own; for asserts).
  virtual bool onNetworkThread() const = 0;
  // Sends a request to a member (which may not be in the current topology yet, or any more);
  // `done` runs once on the network thread.
  virtual void sendToMember(const MemberInfo& member, MessageType type, std::string body,
                            Connection::ResponseHandler done) = 0;
  // The coordinator's own node takes part in Prepare like any member.
  virtual void prepareLocally(const Topology& next, UniqueFunction<void()> done) = 0;
  // Commits `next` through the control plane's log; `done` runs on the network thread once it is
  // committed and installed here, or with the Error that kept it out.
  virtual void proposeTopology(std::shared_ptr<Topology> next,
                               UniqueFunction<void(Result<bool>)> done) = 0;
  // The control plane's current term (stamped on Prepare).
  virtual std::uint64_t controlTerm() const = 0;
  // The topology a new cluster starts with: this member alone (when nothing was committed yet).
  virtual std::shared_ptr<Topology> firstTopology() const = 0;
  // Runs `fn` on the network thread after `delay`.
  virtual void runAfter(std::chrono::milliseconds delay, UniqueFunction<void()> fn) = 0;
  // Commits a Raft barrier in this leader's term; `done` on the network thread.
  virtual void barrier(UniqueFunction<void(Result<bool>)> done) = 0;
  // How long after a lease grant the member's lease has surely expired here (its duration
  // stretched by the clock-drift bound, plus a margin).
  virtual std::chrono::milliseconds leaseWait() const = 0;
  // Whether this member heard from member `id` within the last few heartbeats.
  virtual bool hearsFrom(MemberId id) const = 0;
  // hearsFrom's window: how long after its last answer a member is one this member hears.
  virtual std::chrono::milliseconds hearingWindow() const = 0;
  // A migration with no finished sync for this long is planned again (NodeOptions).
  virtual std::chrono::milliseconds migrationStallTimeout() const = 0;
  // The Raft server at `address` in the control plane's configuration as this leader knows it
  // (the latest appended), if any.
  virtual std::optional<MemberId> raftServerAt(const std::string& address) const = 0;
  // Whether that configuration is committed (no change of it in flight).
  virtual bool raftConfigurationCommitted() const = 0;
  // This process restored its Raft state from a data directory and is not the member that
  // state names (its topology entry is an earlier incarnation's): it leads, but is removed like
  // any member whose process restarted, and joins again as a new member.
  virtual bool selfRestored() const = 0;

 protected:
  ~CoordinatorHost() = default;
};

}  // namespace ingrid
