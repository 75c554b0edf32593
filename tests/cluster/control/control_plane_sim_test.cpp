// ControlPlane in a simulation (runtime.h): no thread of its own. A minimal simulator here (one
// event queue in simulated time; each member's adopted io_contexts polled between events, in its
// scope) drives three control planes on the test's thread, twice with the same seeds.
#include "cluster/control/control_plane.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cluster/transport/runtime.h"

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

class MiniSim {
 public:
  class Member final : public SimulatedMember {
   public:
    Member(MiniSim& sim, std::uint64_t seed) : sim_(sim), rng_(seed) {}
    SteadyTime now() const noexcept override { return sim_.now_; }
    std::chrono::system_clock::time_point wallNow() const noexcept override {
      return std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              sim_.now_.time_since_epoch()));
    }
    std::uint64_t schedule(SteadyTime at, UniqueFunction<void()> fire) override {
      const std::uint64_t id = ++sim_.lastEvent_;
      sim_.events_.emplace(id, Event{std::max(at, sim_.now_), this, std::move(fire)});
      return id;
    }
    void cancel(std::uint64_t id) noexcept override { sim_.events_.erase(id); }
    std::uint64_t random() noexcept override { return rng_(); }
    SimNetwork& network() noexcept override { std::abort(); }  // no transport here
    const std::string& host() const noexcept override { return host_; }
    void adopt(asio::io_context& io) override { ios_.push_back(&io); }
    void forget(asio::io_context& io) noexcept override { std::erase(ios_, &io); }
    std::unique_ptr<Thread> spawn(std::function<void()>) override { std::abort(); }
    bool block(SteadyTime, const std::function<bool()>&) override { std::abort(); }

    std::vector<asio::io_context*> ios_;

   private:
    MiniSim& sim_;
    std::mt19937_64 rng_;
    std::string host_ = "10.0.0.1";
  };

  Member& add(std::uint64_t seed) {
    members_.push_back(std::make_unique<Member>(*this, seed));
    return *members_.back();
  }
  SteadyTime now() const { return now_; }

  // Runs events in time order, polling the io_contexts between them, until done() holds (true)
  // or simulated time would pass `limit` from now (false).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const SteadyTime until = now_ + limit;
    for (;;) {
      settle();
      if (done()) return true;
      auto next = events_.end();
      for (auto it = events_.begin(); it != events_.end(); ++it) {
        if (next == events_.end() || it->second.at < next->second.at) next = it;  // ties: by id
      }
      if (next == events_.end() || next->second.at > until) return false;
      now_ = next->second.at;
      Event e = std::move(next->second);
      events_.erase(next);
      SimulatedMemberScope scope(e.member);
      e.fire();
    }
  }

 private:
  struct Event {
    SteadyTime at;
    Member* member;
    UniqueFunction<void()> fire;
  };
  // Polls every adopted io_context until none has a handler ready.
  void settle() {
    for (bool ran = true; ran;) {
      ran = false;
      for (auto& m : members_) {
        SimulatedMemberScope scope(m.get());
        for (asio::io_context* io : std::vector<asio::io_context*>(m->ios_)) {
          if (std::find(m->ios_.begin(), m->ios_.end(), io) == m->ios_.end()) continue;
          if (io->poll() != 0) ran = true;
        }
      }
    }
  }

  SteadyTime now_ = SteadyTime{} + 1000h;
  std::uint64_t lastEvent_ = 0;
  std::map<std::uint64_t, Event> events_;  // by id: the order of scheduling
  std::vector<std::unique_ptr<Member>> members_;
};

// Delivers each plane's raft bytes to the addressee at once (posted to its io_context), and
// records what its plane commits and on which thread.
struct Board {
  struct Host final : ControlHost {
    Board* board = nullptr;
    std::vector<std::uint64_t> versions;
    bool offThread = false;  // a callback ran on a thread other than the test's
    void sendControl(MemberId to, const std::string&, std::string bytes) override {
      check();
      if (auto it = board->planes.find(to); it != board->planes.end()) {
        it->second->deliver(std::move(bytes));
      }
    }
    void topologyCommitted(TopologyPtr t) override {
      check();
      versions.push_back(t->version);
    }
    void leadershipChanged(bool, std::uint64_t) override { check(); }
    void leaderLearnt(MemberId, std::uint64_t) override { check(); }
    void check() { offThread = offThread || std::this_thread::get_id() != board->thread; }
  };
  std::thread::id thread = std::this_thread::get_id();
  std::map<MemberId, Host> hosts;
  std::map<MemberId, std::unique_ptr<ControlPlane>> planes;
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

// Three members: the first bootstraps and commits v1, the others start, v2 lists all three. What
// the run decided, and when.
std::tuple<std::uint64_t, std::uint64_t, SteadyTime::duration> runCluster(std::uint64_t seed) {
  MiniSim sim;
  Board board;
  std::map<MemberId, MiniSim::Member*> members;
  auto start = [&](MemberId id, bool bootstrap) {
    members[id] = &sim.add(seed * 10 + id);
    SimulatedMemberScope scope(members[id]);
    board.hosts[id].board = &board;
    ControlPlaneOptions o;
    o.self = id;
    o.address = "member-" + std::to_string(id);
    o.electionTimeout = 150ms;
    o.heartbeatInterval = 15ms;
    board.planes[id] = std::make_unique<ControlPlane>(board.hosts[id], o);
    REQUIRE(board.planes[id]->start(bootstrap).ok());
  };
  auto propose = [&](MemberId id, std::shared_ptr<Topology> t) {
    SimulatedMemberScope scope(members[id]);
    auto verdict = std::make_shared<std::optional<Result<bool>>>();
    board.planes[id]->propose(std::move(t), [verdict](Result<bool> r) { *verdict = std::move(r); });
    REQUIRE(sim.runUntil([&] { return verdict->has_value(); }, 10s));
    REQUIRE((*verdict)->ok());
  };
  const SteadyTime began = sim.now();
  start(1, true);
  REQUIRE(sim.runUntil([&] { return board.planes[1]->isLeader(); }, 10s));
  propose(1, topologyOf(1, {1}));
  start(2, false);
  start(3, false);
  propose(1, topologyOf(2, {1, 2, 3}));
  REQUIRE(sim.runUntil(
      [&] {
        return board.planes[1]->status().voters == std::vector<MemberId>{1, 2, 3} &&
               board.hosts[2].versions.size() == 2 && board.hosts[3].versions.size() == 2;
      },
      30s));
  const auto decided =
      std::make_tuple(board.planes[1]->term(), board.hosts[3].versions.back(), sim.now() - began);
  for (auto& [id, plane] : board.planes) {
    SimulatedMemberScope scope(members[id]);
    plane->stop();
    CHECK(members[id]->ios_.empty());  // forgotten
  }
  for (auto& [id, host] : board.hosts) CHECK_FALSE(host.offThread);
  board.planes.clear();
  return decided;
}

}  // namespace

TEST_CASE("In a simulation, control planes run on the simulator's thread, the same in every run",
          "[control][raft][sim]") {
  const auto first = runCluster(7);
  const auto [term, version, took] = first;
  CAPTURE(term, std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  CHECK(term >= 1);
  CHECK(version == 2);
  CHECK(took > 0s);  // elections and ticks took simulated time, not the test's
  CHECK(runCluster(7) == first);
}
