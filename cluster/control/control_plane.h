// ControlPlane: the cluster's membership and topology, decided by consensus (invariant 12).
//
// Every member runs one. It is a Raft server (Canonical's raft, on RaftIo: our transport and
// Asio timers, the log in memory or in a data directory) whose replicated state machine is the
// committed Topology.
// Topologies are entries of the log: one leader per term, versions totally ordered, and a
// minority can commit nothing. The leader's node plans changes (the Coordinator) and proposes
// each next topology here; every member that receives the log (the voters, and a standby)
// applies committed topologies in log order and hands each to its node
// (ControlHost::topologyCommitted); the leader's node sends each to the other members.
//
// The Raft configuration follows the committed topology: on the leader, members missing from it
// are added, servers no longer members are removed (a dead voter before any promotion), and up to
// `voters` members vote, spread over the zones (votersOf). The others are spares: Raft sends them
// nothing, so an idle cluster's heartbeats go to the voters only, and their nodes hear of each
// committed topology from the leader's node (NodeImpl::announceTopology). A voter no longer
// chosen is a standby (it receives the log) until it holds the configuration that says so, then
// a spare. A follower that does not vote ticks rarely (RaftIo::tickEvery).
// A member's raft id is its member id; ids are never reused, so a restarted process (a new
// member, empty) never votes twice in a term under an old identity. With a data directory
// (ControlPlaneOptions::dataDir) the log, term and vote are kept on disk, and a process restarted
// with it comes back as the same Raft server, voting as it did.
//
// Threads: the control plane runs raft on its own thread (one io_context). Public members are
// safe from any thread; ControlHost callbacks run on the control thread and must only post.
// In a simulation (a SimulatedMember installed for the thread that calls start(), runtime.h) there
// is no thread: the simulator polls the io_context (adopt), on the thread that calls start() and
// stop(), which must be the one it polls on (the node calls them on its network thread); they
// then never wait.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/control/raft_io.h"
#include "cluster/transport/timer.h"

struct raft;
struct raft_fsm;
struct raft_change;

namespace ingrid {

struct ControlPlaneOptions {
  // This member's id (its raft id) and the address others reach it at ("host:port").
  MemberId self = 0;
  std::string address;
  // Raft's election timeout; raft randomizes each one between 1x and 2x. A leader that has not
  // heard from a majority for this long steps down. Default: 1 s.
  std::chrono::milliseconds electionTimeout{1000};
  // How often the leader sends heartbeats (empty AppendEntries). Default: 100 ms.
  std::chrono::milliseconds heartbeatInterval{100};
  // How many members vote at most (the ones with the smallest ids; an even count from 4 up is
  // rounded down to odd, which survives as many losses with a smaller quorum). Default: 3.
  unsigned voters = 3;
  // Where Raft keeps its term, vote, log and snapshots (RaftIo's directory), so that this server
  // restarted with it keeps its vote; empty: in memory only. Default: empty.
  std::string dataDir;
};

// What the control plane needs from its node. Called on the control thread: post, never block.
class ControlHost {
 public:
  // Sends encoded raft bytes to member `to` at `address`. Best effort.
  virtual void sendControl(MemberId to, const std::string& address, std::string bytes) = 0;
  // A topology was committed; called once per committed topology, in version order.
  virtual void topologyCommitted(TopologyPtr topology) = 0;
  // This member became the leader of `term`, or stopped being the leader.
  virtual void leadershipChanged(bool leader, std::uint64_t term) = 0;
  // This member learnt of `leader` (not 0) as the leader of `term`: once per (leader, term).
  virtual void leaderLearnt(MemberId leader, std::uint64_t term) = 0;

 protected:
  ~ControlHost() = default;
};

// What a survivor of a lost quorum restarts its control plane from (kRecover, RecoveryPlan): the
// recovered topology, as if committed at Raft log index `index` in term `term`, with every member
// of it a voter (the new leader then trims the voters to `voters`, as it always does). Every
// survivor is given the same, so they agree on the log and elect a leader among themselves.
struct ControlRecovery {
  TopologyPtr topology;
  std::uint64_t term = 0;
  std::uint64_t index = 0;
};

// A consistent view of the control plane for status and routing.
struct ControlStatus {
  MemberId self = 0;  // this member's Raft id
  std::uint64_t term = 0;
  MemberId leader = 0;  // as this member knows it; 0 if none
  // How long since this member last heard from a leader (or led), in ms; UINT64_MAX if never.
  // A member that does not vote never stands for election, and a spare hears nothing from Raft,
  // so it may name a dead leader: this says how long that leader has been silent.
  std::uint64_t leaderSilentMs = UINT64_MAX;
  bool isLeader = false;
  std::uint64_t committedVersion = 0;
  // The Raft configuration as this member knows it (a spare hears of none after it became one).
  std::vector<MemberId> voters;
  std::vector<MemberId> standbys;  // receive the log, do not vote (a voter being demoted)
  std::vector<MemberId> spares;    // receive nothing (every member that does not vote)
  // Every server of that configuration and its address.
  std::vector<std::pair<MemberId, std::string>> servers;
  // Whether that configuration is committed (no change of it is in flight).
  bool configurationCommitted = true;
};

// The members that vote, of `members`, at most `most`: with fewer members every one, an even
// count from 4 up rounded down to odd; chosen round robin over the zones (taken in the order of
// their smallest id), each zone's by smallest id first. With no zones: the smallest ids.
std::vector<MemberId> votersOf(const std::vector<MemberInfo>& members, unsigned most);

class ControlPlane final : private RaftNetwork {
 public:
  // `log`: where its lines go (default: nowhere); its RaftIo gets a copy.
  ControlPlane(ControlHost& host, ControlPlaneOptions options, Logger log = {});
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;
  ~ControlPlane();

  // Starts raft on the control thread. `bootstrap`: this member is the whole first configuration
  // (one voter) and becomes the leader; otherwise it waits to be added by the leader. With
  // `recovery` (and not bootstrap), raft starts from it instead of from nothing.
  Result<bool> start(bool bootstrap, std::optional<ControlRecovery> recovery = std::nullopt);
  // Closes raft and joins the control thread. Idempotent. Host callbacks stop before it returns.
  void stop();

  // Raft bytes from the network (any thread).
  void deliver(std::string bytes);

  using Done = UniqueFunction<void(Result<bool>)>;
  // Proposes `next` as the next topology: its version must be the committed one plus 1, and it
  // is stamped with this leader's term and id. `done` runs on the control thread once it is
  // committed and applied here, or with an Error (not the leader, leadership lost, or a version
  // that is no longer next). Any thread.
  void propose(std::shared_ptr<Topology> next, Done done);
  // Commits an empty entry (a Raft barrier) in this leader's term: `done` (control thread) says
  // true once a majority has stored it, which proves this member led at some instant after the
  // call. Primary leases are granted on that proof. Any thread.
  void barrier(Done done);

  ControlStatus status() const;
  bool isLeader() const noexcept { return isLeader_.load(std::memory_order_acquire); }
  std::uint64_t term() const noexcept { return term_.load(std::memory_order_acquire); }

 private:
  struct Fsm;
  struct Apply;
  struct Barrier;

  // RaftNetwork (control thread).
  void sendRaftMessage(std::uint64_t to, const std::string& address, std::string bytes) override;

  // Control thread.
  void startOnThread(bool bootstrap, const std::optional<ControlRecovery>& recovery,
                     std::promise<Result<bool>>& started);
  int applyCommand(const void* data, std::size_t len, bool& accepted);
  void poll();       // leadership changes, and the Raft configuration's reconciliation
  void raftEvent();  // raft handled an event: poll soon, at most once per kPollSpacing
  void reconcile();  // leader: make the Raft configuration follow the committed topology
  static void onChange(raft_change* req, int status);
  void assertOnControlThread() const;

  ControlHost& host_;
  const ControlPlaneOptions options_;
  const Logger log_;
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::thread thread_;
  SimulatedMember* sim_ = nullptr;  // in a simulation, as start() found it (no thread_ then)
  std::thread::id threadId_;
  std::unique_ptr<RaftIo> raftIo_;
  std::unique_ptr<raft> raft_;
  std::unique_ptr<raft_fsm> fsm_;
  std::unique_ptr<raft_change> changeReq_;  // the one configuration change in flight
  // Polls follow raft's events (RaftIo::onEvent), not a clock: an idle member polls at raft's
  // tick (its heartbeat interval), not 50 times a second, so what the status shows and a
  // configuration change refused in reconcile() wait at most two ticks. At most one per
  // kPollSpacing; a later event waits on the timer, or on the next tick (below).
  // An event within kPollSpacing of the last poll that left raft's state, term, leader and
  // configuration as that poll saw them (a heartbeat, a barrier's entry), with nothing applied or
  // changed since (pollWanted_), waits for the next tick's poll instead of a timer of its own: on
  // a voter that timer was a wake-up per heartbeat.
  static constexpr std::chrono::milliseconds kPollSpacing{20};
  // How often a follower that does not vote ticks (poll()): its ticks time nothing.
  static constexpr std::chrono::milliseconds kNonVoterTick{10000};
  Timer pollTimer_{io_};
  bool pollDue_ = false;                            // a poll is posted or its timer armed
  std::chrono::steady_clock::time_point polledAt_;  // the last poll's start
  struct PollMark {
    int state = 0;
    std::uint64_t term = 0;
    std::uint64_t leader = 0;
    std::uint64_t configurationIndex = 0;
    std::uint64_t configurationUncommitted = 0;
    unsigned servers = 0;
    bool operator==(const PollMark&) const = default;
  };
  PollMark pollMark();         // raft's now (control thread)
  PollMark polledMark_{};      // what the last poll saw
  bool pollWanted_ = false;    // an entry applied, a change or transfer ended since the last poll
  bool started_ = false;       // control thread
  bool closing_ = false;       // control thread
  bool changing_ = false;      // a Raft configuration change is in flight (control thread)
  bool transferring_ = false;  // a leadership transfer is in flight (control thread)
  bool wasLeader_ = false;     // control thread
  std::uint64_t leaderTerm_ = 0;  // the term wasLeader_ is about (control thread)
  MemberId learntLeader_ = 0;     // the last leader reported by leaderLearnt (control thread)
  std::uint64_t learntTerm_ = 0;  // and its term
  std::uint64_t lastLeaderContact_ = 0;  // raft time (ms); 0: never (control thread)
  std::uint64_t statusContactMs_ = 0;    // lastLeaderContact_ at the last poll (statusMu_)
  TopologyPtr committed_;                // control thread
  std::atomic<bool> isLeader_{false};
  std::atomic<std::uint64_t> term_{0};
  std::atomic<bool> stopped_{false};
  mutable std::mutex statusMu_;
  ControlStatus status_;  // guarded by statusMu_
};

}  // namespace ingrid
