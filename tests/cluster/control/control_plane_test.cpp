#include "cluster/control/control_plane.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;

namespace {

// Several control planes in one process, wired by a switchboard that can cut chosen links.
class Switchboard {
 public:
  class Host final : public ControlHost {
   public:
    Host(Switchboard& board, MemberId self) : board_(board), self_(self) {}
    void sendControl(MemberId to, const std::string&, std::string bytes) override {
      board_.send(self_, to, std::move(bytes));
    }
    void topologyCommitted(TopologyPtr t) override {
      std::lock_guard lock(mu_);
      committed_.push_back(std::move(t));
    }
    void leadershipChanged(bool leader, std::uint64_t term) override {
      std::lock_guard lock(mu_);
      if (leader) leaderTerms_.push_back(term);
    }
    void leaderLearnt(MemberId, std::uint64_t) override {}
    TopologyPtr last() const {
      std::lock_guard lock(mu_);
      return committed_.empty() ? nullptr : committed_.back();
    }
    std::vector<std::uint64_t> versions() const {
      std::lock_guard lock(mu_);
      std::vector<std::uint64_t> out;
      for (const auto& t : committed_) out.push_back(t->version);
      return out;
    }

   private:
    Switchboard& board_;
    const MemberId self_;
    mutable std::mutex mu_;
    std::vector<TopologyPtr> committed_;
    std::vector<std::uint64_t> leaderTerms_;
  };

  ~Switchboard() {
    for (auto& [id, plane] : planes_) plane->stop();
  }

  // Starts member `id` (the first one bootstraps).
  ControlPlane& start(MemberId id, bool bootstrap) {
    hosts_[id] = std::make_unique<Host>(*this, id);
    ControlPlaneOptions o;
    o.self = id;
    o.address = "member-" + std::to_string(id);
    o.electionTimeout = 150ms;
    o.heartbeatInterval = 15ms;
    auto plane = std::make_unique<ControlPlane>(*hosts_[id], o);
    REQUIRE(plane->start(bootstrap).ok());
    ControlPlane& ref = *plane;
    std::lock_guard lock(mu_);
    planes_[id] = std::move(plane);
    return ref;
  }
  ControlPlane& plane(MemberId id) { return *planes_.at(id); }
  Host& host(MemberId id) { return *hosts_.at(id); }

  void cut(MemberId a, MemberId b) {
    std::lock_guard lock(mu_);
    cut_.insert({a, b});
    cut_.insert({b, a});
  }
  void isolate(MemberId a) {
    for (auto& [id, p] : planes_) {
      if (id != a) cut(a, id);
    }
  }
  void heal() {
    std::lock_guard lock(mu_);
    cut_.clear();
  }

  // The member every running plane agrees leads, or 0.
  MemberId leader() {
    for (auto& [id, p] : planes_) {
      if (p->isLeader()) return id;
    }
    return 0;
  }

 private:
  void send(MemberId from, MemberId to, std::string bytes) {
    ControlPlane* target = nullptr;
    {
      std::lock_guard lock(mu_);
      if (cut_.count({from, to}) != 0) return;
      auto it = planes_.find(to);
      if (it == planes_.end()) return;
      target = it->second.get();
    }
    target->deliver(std::move(bytes));
  }

  std::mutex mu_;
  std::map<MemberId, std::unique_ptr<Host>> hosts_;
  std::map<MemberId, std::unique_ptr<ControlPlane>> planes_;
  std::set<std::pair<MemberId, MemberId>> cut_;
};

std::shared_ptr<Topology> topologyOf(std::uint64_t version, std::vector<MemberId> ids) {
  auto t = std::make_shared<Topology>();
  t->version = version;
  for (MemberId id : ids)
    t->members.push_back(MemberInfo{id, "member-" + std::to_string(id), 7, {}});
  t->table = PartitionTable::balanced(8, ids, 1);
  t->nextMemberId = ids.back() + 1;
  return t;
}

Result<bool> proposeAndWait(ControlPlane& plane, std::shared_ptr<Topology> t) {
  std::promise<Result<bool>> done;
  auto f = done.get_future();
  plane.propose(std::move(t), [&done](Result<bool> r) { done.set_value(std::move(r)); });
  if (f.wait_for(10s) != std::future_status::ready) {
    return Error(Errc::timeout, "no verdict on the proposal within 10 s");
  }
  return f.get();
}

// Member 1 bootstraps, leads, and commits topology v1 (itself alone).
ControlPlane& bootstrapFirst(Switchboard& board) {
  ControlPlane& first = board.start(1, true);
  REQUIRE(eventually([&] { return first.isLeader(); }, 10s));
  REQUIRE(proposeAndWait(first, topologyOf(1, {1})).ok());
  return first;
}

}  // namespace

TEST_CASE("A bootstrapped control plane leads and commits topologies in order", "[control][raft]") {
  Switchboard board;
  ControlPlane& first = bootstrapFirst(board);
  const TopologyPtr t = board.host(1).last();
  REQUIRE(t);
  CHECK(t->version == 1);
  CHECK(t->leader == 1);
  CHECK(t->term == first.term());
  // A version that is not next is refused, naming both.
  auto stale = proposeAndWait(first, topologyOf(1, {1}));
  REQUIRE_FALSE(stale.ok());
  CHECK_THAT(stale.error().message(), Catch::Contains("not next"));
}

TEST_CASE("Members added by the committed topology vote, and the others are spares",
          "[control][raft]") {
  Switchboard board;
  ControlPlane& first = bootstrapFirst(board);
  board.start(2, false);
  board.start(3, false);
  board.start(4, false);
  // The leader adds the members the topology lists; the three smallest ids vote.
  REQUIRE(proposeAndWait(first, topologyOf(2, {1, 2, 3, 4})).ok());
  REQUIRE(eventually(
      [&] {
        const ControlStatus s = first.status();
        return s.voters.size() == 3 && s.spares.size() == 1;
      },
      10s));
  const ControlStatus s = first.status();
  CHECK(s.voters == std::vector<MemberId>{1, 2, 3});
  CHECK(s.spares == std::vector<MemberId>{4});
  CHECK(s.standbys.empty());
  for (MemberId id : {2, 3}) {
    REQUIRE(eventually([&] { return board.host(id).last() && board.host(id).last()->version == 2; },
                       10s));
  }
  // A spare receives nothing from Raft: its node hears of topologies from the leader's node.
  REQUIRE(proposeAndWait(first, topologyOf(3, {1, 2, 3, 4})).ok());
  REQUIRE(
      eventually([&] { return board.host(3).last() && board.host(3).last()->version == 3; }, 10s));
  CHECK(board.host(4).last() == nullptr);
  CHECK(board.plane(4).status().voters.empty());
  // Member 1 leaves: the spare becomes a voter, catching up first (it holds the log after).
  REQUIRE(proposeAndWait(first, topologyOf(4, {2, 3, 4})).ok());
  REQUIRE(
      eventually([&] { return board.host(4).last() && board.host(4).last()->version >= 3; }, 10s));
  REQUIRE(eventually(
      [&] {
        const ControlStatus l = board.plane(2).isLeader()   ? board.plane(2).status()
                                : board.plane(3).isLeader() ? board.plane(3).status()
                                                            : first.status();
        return l.voters == std::vector<MemberId>{2, 3, 4};
      },
      10s));
}

TEST_CASE("A voter demoted becomes a spare only once it knows it does not vote",
          "[control][raft]") {
  Switchboard board;
  ControlPlane& first = bootstrapFirst(board);
  for (MemberId id : {2, 3, 4}) board.start(id, false);
  REQUIRE(proposeAndWait(first, topologyOf(2, {1, 2, 3})).ok());
  REQUIRE(eventually([&] { return first.status().voters == std::vector<MemberId>{1, 2, 3}; }, 10s));
  // Member 4 comes in another zone: the voters are spread over both (1 and 2 of zone a, 4 of b),
  // so member 3 no longer votes.
  auto zoned = topologyOf(3, {1, 2, 3, 4});
  for (MemberInfo& m : zoned->members) m.zone = m.id == 4 ? "b" : "a";
  REQUIRE(proposeAndWait(first, zoned).ok());
  REQUIRE(eventually(
      [&] {
        const ControlStatus s = first.status();
        return s.voters == std::vector<MemberId>{1, 2, 4} && s.spares == std::vector<MemberId>{3} &&
               s.configurationCommitted;
      },
      10s));
  // It was a standby first, long enough to hold that configuration: it does not stand for
  // election, though it hears no more from Raft.
  const ControlStatus three = board.plane(3).status();
  CHECK(std::find(three.voters.begin(), three.voters.end(), 3) == three.voters.end());
  CHECK(std::find(three.standbys.begin(), three.standbys.end(), 3) != three.standbys.end());
}

TEST_CASE("An isolated leader commits nothing: the majority elects another and goes on",
          "[control][raft][failure]") {
  Switchboard board;
  ControlPlane& first = bootstrapFirst(board);
  board.start(2, false);
  board.start(3, false);
  REQUIRE(proposeAndWait(first, topologyOf(2, {1, 2, 3})).ok());
  REQUIRE(eventually([&] { return first.status().voters.size() == 3; }, 10s));
  REQUIRE(
      eventually([&] { return board.host(3).last() && board.host(3).last()->version == 2; }, 10s));

  const std::uint64_t oldTerm = first.term();
  board.isolate(1);
  // The cut-off leader cannot commit: its proposal fails (it steps down) rather than succeed.
  auto lonely = proposeAndWait(first, topologyOf(3, {1, 2, 3}));
  CHECK_FALSE(lonely.ok());
  // The other two elect a leader of a newer term, which commits.
  REQUIRE(eventually([&] { return board.plane(2).isLeader() || board.plane(3).isLeader(); }, 10s));
  ControlPlane& next = board.plane(2).isLeader() ? board.plane(2) : board.plane(3);
  CHECK(next.term() > oldTerm);
  REQUIRE(proposeAndWait(next, topologyOf(3, {1, 2, 3})).ok());
  CHECK(board.host(1).last()->version == 2);  // the minority installed nothing

  board.heal();
  // The old leader learns the newer term, steps down, and receives the committed v3.
  REQUIRE(eventually([&] { return !first.isLeader(); }, 10s));
  REQUIRE(eventually([&] { return board.host(1).last()->version == 3; }, 10s));
  // Every member installed the same sequence: v1, v2, v3, each once.
  for (MemberId id : {1, 2, 3}) {
    REQUIRE(eventually([&] { return board.host(id).last()->version == 3; }, 10s));
    std::vector<std::uint64_t> v = board.host(id).versions();
    INFO("member " << id);
    CHECK(v.back() == 3);
    for (std::size_t i = 1; i < v.size(); ++i) CHECK(v[i] == v[i - 1] + 1);
  }
}

TEST_CASE("A member added after the log was compacted catches up from a snapshot",
          "[control][raft]") {
  Switchboard board;
  ControlPlane& first = bootstrapFirst(board);
  // Enough entries (barriers) that the leader takes a snapshot and drops the log before them.
  for (int i = 0; i < 600; ++i) {
    std::promise<Result<bool>> done;
    auto f = done.get_future();
    first.barrier([&done](Result<bool> r) { done.set_value(std::move(r)); });
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    REQUIRE(f.get().ok());
  }
  board.start(2, false);
  board.start(3, false);
  REQUIRE(proposeAndWait(first, topologyOf(2, {1, 2, 3})).ok());
  for (MemberId id : {2, 3}) {
    INFO("member " << id);
    REQUIRE(eventually([&] { return board.host(id).last() && board.host(id).last()->version == 2; },
                       10s));
  }
  REQUIRE(eventually([&] { return first.status().voters.size() == 3; }, 10s));
}

TEST_CASE("Voters: up to the count asked, odd, spread round robin over the zones", "[control]") {
  auto members = [](std::vector<std::string> zones) {
    std::vector<MemberInfo> out;
    for (std::size_t i = 0; i < zones.size(); ++i) {
      MemberInfo m;
      m.id = i + 1;
      m.zone = zones[i];
      out.push_back(m);
    }
    return out;
  };
  // No zones: the smallest ids; an even count from 4 up rounded down to odd.
  CHECK(votersOf(members({"", "", ""}), 5) == std::vector<MemberId>{1, 2, 3});
  CHECK(votersOf(members({"", "", "", ""}), 5) == std::vector<MemberId>{1, 2, 3});
  CHECK(votersOf(members({"", ""}), 5) == std::vector<MemberId>{1, 2});
  CHECK(votersOf(members({"", "", "", "", "", ""}), 5) == std::vector<MemberId>{1, 2, 3, 4, 5});
  CHECK(votersOf(members({"", "", "", "", "", "", "", ""}), 7).size() == 7);
  // Three zones of three, the smallest ids all in zone a: two voters at most in any zone, so a
  // zone lost whole leaves three of five.
  const std::vector<MemberId> spread =
      votersOf(members({"a", "a", "a", "b", "b", "b", "c", "c", "c"}), 5);
  CHECK(spread == std::vector<MemberId>{1, 2, 4, 5, 7});
  // Two zones: 3 + 2 (a majority can only survive in the larger one).
  CHECK(votersOf(members({"a", "b", "a", "b", "a", "b"}), 5) ==
        std::vector<MemberId>{1, 2, 3, 4, 5});
}
