// FakeCoordinatorHost: a CoordinatorHost (cluster/control/coordinator_host.h) that a unit test of
// LeaseTable or Coordinator drives by hand: time moves only when the test advances it (and the
// runAfter callbacks due on the way run then, in order), Raft barriers and topology proposals
// commit or fail only when the test says so, and messages to members are recorded and answered
// when the test says so (or never). Nothing runs on its own: every outcome is deterministic.
//
// Single-threaded: the test's thread plays the node's network thread (onNetworkThread() is
// true). Callbacks still pending when it is destroyed are destroyed uncalled, as an io_context
// does with its handlers; it must outlive the LeaseTable or Coordinator it is given. A misuse
// (committing a barrier none asked for, moving time backwards) throws std::logic_error, which
// fails the test case, rather than an assert that a release build compiles out.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/error.h>
#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/control/coordinator_host.h"
#include "cluster/transport/connection.h"
#include "cluster/transport/frame.h"

namespace ingrid::test {

// Members 1..n at 127.0.0.1:7000+id, each with incarnation == id; the balanced table over
// `partitions` partitions with `backups` backups; version `version`, epochs stamped (as the
// control plane's state machine does when it commits a topology).
inline Topology membersTopology(MemberId n, std::uint32_t partitions = 8, std::uint32_t backups = 1,
                                std::uint64_t version = 10) {
  Topology t;
  t.version = version;
  t.backups = backups;
  t.nextMemberId = n + 1;
  t.term = 1;
  t.leader = 1;
  for (MemberId id = 1; id <= n; ++id) {
    t.members.push_back(MemberInfo{id, "127.0.0.1:" + std::to_string(7000 + id), id, {}, {}});
  }
  t.table = Topology::balancedFor(partitions, t.members, backups);
  t.stampEpochs(nullptr);
  return t;
}

// Records what a completion taking Result<T> receives (a lease request's or a join's reply).
template <class T>
struct Replies {
  int calls = 0;
  std::optional<Result<T>> last;
  // The completion to hand over; `*this` must outlive it or its call.
  UniqueFunction<void(Result<T>)> to() {
    return [this](Result<T> r) {
      ++calls;
      last.emplace(std::move(r));
    };
  }
  // Answered exactly once, with a value (for a lease: granted).
  bool ok() const { return calls == 1 && last->ok(); }
  // Answered exactly once, with an Error.
  bool refused() const { return calls == 1 && !last->ok(); }
  // The Error's message ("<category>: <detail>"), or "" if not refused.
  std::string why() const { return refused() ? last->error().message() : std::string(); }
};

class FakeCoordinatorHost final : public CoordinatorHost {
 public:
  // Where the fake clock starts: an hour past the clock's epoch, so that no rule computed from a
  // default-constructed time_point (zero) can look satisfied by accident.
  static constexpr SteadyTime kStart = SteadyTime{} + std::chrono::hours(1);

  // What the accessors below return; set them before building the table or coordinator (or in
  // between, to change what it sees next).
  struct Config {
    MemberId self = 1;
    // A 1500 ms lease stretched by 10% plus 10 ms, as the node computes it.
    std::chrono::milliseconds leaseWait{1660};
    std::chrono::milliseconds hearingWindow{600};
    std::chrono::milliseconds migrationStallTimeout{10000};
    std::uint64_t controlTerm = 2;
    bool selfRestored = false;
    bool raftConfigurationCommitted = true;
    std::map<std::string, MemberId> raftServers;  // raftServerAt: address -> Raft server id
    std::set<MemberId> unheard;                   // hearsFrom is false for these, true otherwise
  };
  Config config;

  // A message sent with sendToMember; `done` is empty once answered.
  struct Sent {
    MemberInfo member;
    MessageType type = MessageType::kHello;
    std::string body;
    Connection::ResponseHandler done;
  };

  // `installed`: the topology committed and installed when the test starts.
  explicit FakeCoordinatorHost(Topology installed)
      : current_(std::make_shared<const Topology>(std::move(installed))) {}
  FakeCoordinatorHost(const FakeCoordinatorHost&) = delete;
  FakeCoordinatorHost& operator=(const FakeCoordinatorHost&) = delete;
  ~FakeCoordinatorHost() = default;

  // --- Time.
  SteadyTime now() const override { return now_; }
  // Moves time forward by `d` (>= 0). Each runAfter callback due by then runs at its due time
  // (now() reads it), in (due time, order of runAfter calls) order; one scheduled by a callback
  // runs in the same call if it falls due by the end.
  void advance(std::chrono::nanoseconds d) {
    expect(d.count() >= 0, "advance: a negative duration");
    advanceTo(now_ + d);
  }
  // A callback that re-arms itself with runAfter(0) (a timer due within the millisecond it was
  // rounded down from) would loop here without end, as it would spin on a node: past
  // kMaxCallbacksAtOneInstant callbacks at one instant this throws instead.
  void advanceTo(SteadyTime until) {
    expect(until >= now_, "advanceTo: a time before now()");
    std::size_t atThisInstant = 0;
    while (!timers_.empty() && timers_.begin()->first.first <= until) {
      auto node = timers_.extract(timers_.begin());
      atThisInstant = node.key().first == now_ ? atThisInstant + 1 : 0;
      expect(atThisInstant < kMaxCallbacksAtOneInstant,
             "advanceTo: runAfter callbacks loop at one instant (a timer re-armed with 0 ms)");
      now_ = node.key().first;
      node.mapped()();
    }
    now_ = until;
  }
  static constexpr std::size_t kMaxCallbacksAtOneInstant = 10000;
  void runAfter(std::chrono::milliseconds delay, UniqueFunction<void()> fn) override {
    expect(delay.count() >= 0, "runAfter: a negative delay");
    timers_.emplace(std::make_pair(now_ + delay, nextTimer_++), std::move(fn));
  }
  std::size_t pendingTimers() const { return timers_.size(); }

  // --- Raft barriers: queued until the test commits or fails the oldest.
  void barrier(UniqueFunction<void(Result<bool>)> done) override {
    ++barriersProposed_;
    barrierTimes_.push_back(now_);
    barriers_.push_back(std::move(done));
  }
  std::size_t barriersProposed() const { return barriersProposed_; }  // ever asked for
  std::size_t pendingBarriers() const { return barriers_.size(); }
  // When each barrier was asked for, in order.
  const std::vector<SteadyTime>& barrierTimes() const { return barrierTimes_; }
  void commitBarrier() { finishBarrier(true); }
  void failBarrier(Error why) { finishBarrier(std::move(why)); }

  // --- Topology proposals: recorded until the test commits or fails the oldest.
  void proposeTopology(std::shared_ptr<Topology> next,
                       UniqueFunction<void(Result<bool>)> done) override {
    proposals_.push_back(Proposal{std::move(next), std::move(done)});
  }
  std::size_t pendingProposals() const { return proposals_.size(); }
  // The i-th pending proposal (0: the oldest).
  const Topology& proposal(std::size_t i = 0) const {
    expect(i < proposals_.size(), "proposal: no such proposal pending");
    return *proposals_[i].next;
  }
  // Commits the oldest proposal: its epochs stamped against the current topology, it becomes
  // the current one, then its `done` runs with true.
  void commitProposal() {
    expect(!proposals_.empty(), "commitProposal: no proposal pending");
    Proposal p = std::move(proposals_.front());
    proposals_.pop_front();
    auto committed = std::make_shared<Topology>(*p.next);
    committed->stampEpochs(current_.get());
    current_ = std::move(committed);
    p.done(true);
  }
  void failProposal(Error why) {
    expect(!proposals_.empty(), "failProposal: no proposal pending");
    Proposal p = std::move(proposals_.front());
    proposals_.pop_front();
    p.done(std::move(why));
  }

  // --- Messages to members: recorded, answered on demand.
  void sendToMember(const MemberInfo& member, MessageType type, std::string body,
                    Connection::ResponseHandler done) override {
    sent_.push_back(Sent{member, type, std::move(body), std::move(done)});
  }
  const std::deque<Sent>& sent() const { return sent_; }
  // The members sent a message of `type`, in order.
  std::vector<MemberId> sentTo(MessageType type) const {
    std::vector<MemberId> out;
    for (const Sent& s : sent_) {
      if (s.type == type) out.push_back(s.member.id);
    }
    return out;
  }
  // Answers message i (an index into sent()) with `r`.
  void answer(std::size_t i, Result<Frame> r) {
    expect(i < sent_.size() && sent_[i].done, "answer: no such message, or answered already");
    auto done = std::move(sent_[i].done);
    sent_[i].done = Connection::ResponseHandler();
    done(std::move(r));
  }
  // Answers every unanswered message of `type` with an empty response, and every pending local
  // Prepare when `type` is kTopologyPrepare; returns how many.
  std::size_t answerAll(MessageType type) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < sent_.size(); ++i) {
      if (sent_[i].type != type || !sent_[i].done) continue;
      Frame reply;
      reply.header.type = type;
      reply.header.flags = kFlagResponse;
      answer(i, std::move(reply));
      ++n;
    }
    if (type == MessageType::kTopologyPrepare) {
      while (!localPrepares_.empty()) {
        auto done = std::move(localPrepares_.front());
        localPrepares_.pop_front();
        done();
        ++n;
      }
    }
    return n;
  }

  // --- The local Prepare: recorded, answered with answerAll(kTopologyPrepare).
  void prepareLocally(const Topology& next, UniqueFunction<void()> done) override {
    preparedLocally_.push_back(next.version);
    localPrepares_.push_back(std::move(done));
  }
  // The versions prepared locally, in order.
  const std::vector<std::uint64_t>& preparedLocally() const { return preparedLocally_; }

  // --- The rest of CoordinatorHost, from `config` and the current topology.
  MemberId selfId() const override { return config.self; }
  TopologyPtr currentTopology() const override { return current_; }
  // Installs `t` as committed (a topology another leader committed, say).
  void install(Topology t) { current_ = std::make_shared<const Topology>(std::move(t)); }
  bool onNetworkThread() const override { return true; }
  std::uint64_t controlTerm() const override { return config.controlTerm; }
  std::shared_ptr<Topology> firstTopology() const override {
    auto t = std::make_shared<Topology>(membersTopology(1, 8, 1, 1));
    t->nextMemberId = 2;
    return t;
  }
  std::chrono::milliseconds leaseWait() const override { return config.leaseWait; }
  bool hearsFrom(MemberId id) const override { return config.unheard.count(id) == 0; }
  std::chrono::milliseconds hearingWindow() const override { return config.hearingWindow; }
  std::chrono::milliseconds migrationStallTimeout() const override {
    return config.migrationStallTimeout;
  }
  std::optional<MemberId> raftServerAt(const std::string& address) const override {
    if (auto it = config.raftServers.find(address); it != config.raftServers.end()) {
      return it->second;
    }
    return std::nullopt;
  }
  bool raftConfigurationCommitted() const override { return config.raftConfigurationCommitted; }
  bool selfRestored() const override { return config.selfRestored; }

 private:
  static void expect(bool ok, const char* misuse) {
    if (!ok) throw std::logic_error(std::string("FakeCoordinatorHost: ") + misuse);
  }
  struct Proposal {
    std::shared_ptr<Topology> next;
    UniqueFunction<void(Result<bool>)> done;
  };
  void finishBarrier(Result<bool> r) {
    expect(!barriers_.empty(), "commitBarrier/failBarrier: no barrier pending");
    auto done = std::move(barriers_.front());
    barriers_.pop_front();
    done(std::move(r));
  }

  SteadyTime now_ = kStart;
  TopologyPtr current_;
  // runAfter callbacks by (due time, sequence number).
  std::map<std::pair<SteadyTime, std::uint64_t>, UniqueFunction<void()>> timers_;
  std::uint64_t nextTimer_ = 0;
  std::deque<UniqueFunction<void(Result<bool>)>> barriers_;
  std::size_t barriersProposed_ = 0;
  std::vector<SteadyTime> barrierTimes_;
  std::deque<Proposal> proposals_;
  std::deque<Sent> sent_;
  std::vector<std::uint64_t> preparedLocally_;
  std::deque<UniqueFunction<void()>> localPrepares_;
};

}  // namespace ingrid::test
