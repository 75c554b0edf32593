#include "cluster/sim/simulation.h"

#include <chrono>
#include <string>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <catch2/catch.hpp>

#include "cluster/transport/timer.h"

namespace ingrid::sim {
namespace {

using namespace std::chrono_literals;

// One member with an adopted io_context (held open by a work guard, as a node's is).
struct OneMember {
  explicit OneMember(Simulation& sim, Drift drift = {})
      : member(sim.addMember("10.0.0." + std::to_string(sim.memberCount() + 1), drift)) {
    member.adopt(io);
  }
  ~OneMember() { member.forget(io); }
  Member& member;
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
};

TEST_CASE("Timers fire in simulated time, in deadline order, ties in arming order", "[sim]") {
  Simulation sim(7);
  OneMember a(sim);
  std::vector<std::string> fired;
  std::vector<SteadyTime> at;
  std::optional<Timer> t1, t2, t3;
  {
    SimulatedMemberScope scope(&a.member);
    t1.emplace(a.io, 30ms);
    t2.emplace(a.io, 10ms);
    t3.emplace(a.io, 10ms);
  }
  auto record = [&](std::string name) {
    return [&, name](const std::error_code& ec) {
      if (!ec) {
        fired.push_back(name);
        at.push_back(steadyNow());
      }
    };
  };
  t1->async_wait(record("t1"));
  t2->async_wait(record("t2"));
  t3->async_wait(record("t3"));
  sim.runUntil(sim.start() + 1s);
  REQUIRE(fired == std::vector<std::string>{"t2", "t3", "t1"});
  CHECK(at[0] == sim.start() + 10ms);
  CHECK(at[2] == sim.start() + 30ms);
  CHECK(sim.now() == sim.start() + 1s);
}

TEST_CASE("A cancelled or re-armed timer's wait completes with operation_aborted", "[sim]") {
  Simulation sim(1);
  OneMember a(sim);
  std::optional<Timer> t;
  {
    SimulatedMemberScope scope(&a.member);
    t.emplace(a.io, 10ms);
  }
  std::vector<std::error_code> results;
  t->async_wait([&](const std::error_code& ec) { results.push_back(ec); });
  {
    SimulatedMemberScope scope(&a.member);
    CHECK(t->expires_after(20ms) == 1);
  }
  t->async_wait([&](const std::error_code& ec) { results.push_back(ec); });
  sim.runUntil(sim.start() + 15ms);
  REQUIRE(results.size() == 1);
  CHECK(results[0] == asio::error::operation_aborted);
  sim.runUntil(sim.start() + 25ms);
  REQUIRE(results.size() == 2);
  CHECK(!results[1]);
  t.reset();  // nothing pending: nothing to post
  sim.runUntil(sim.start() + 30ms);
  CHECK(results.size() == 2);
}

TEST_CASE("A member's clock drifts by its ppm and offset, and its timers fire on its own time",
          "[sim]") {
  Simulation sim(3);
  OneMember fast(sim, Drift{.offset = 5ms, .ppm = 1000});  // 0.1% fast
  Member& m = fast.member;
  CHECK(m.localAt(sim.start()) == sim.start() + 5ms);
  CHECK(m.localAt(sim.start() + 10s) == sim.start() + 10s + 5ms + 10ms);
  for (auto local : {sim.start() + 7ms, sim.start() + 1s + 3ns, sim.start() + 100s}) {
    const SteadyTime g = m.globalAt(local);
    CHECK(m.localAt(g) >= local);
    CHECK(m.localAt(g - 1ns) < local);
  }
  std::optional<Timer> t;
  {
    SimulatedMemberScope scope(&m);
    t.emplace(fast.io, 10s);  // local deadline: start + 5 ms + 10 s
  }
  SteadyTime firedLocal{};
  t->async_wait([&](const std::error_code&) { firedLocal = steadyNow(); });
  sim.runUntil(sim.start() + 20s);
  CHECK(firedLocal >= sim.start() + 5ms + 10s);
  CHECK(firedLocal < sim.start() + 5ms + 10s + 1us);
}

TEST_CASE(
    "A baton thread runs only while the simulation waits: block() wakes on its condition "
    "or its deadline",
    "[sim]") {
  Simulation sim(5);
  OneMember a(sim);
  bool flag = false;
  std::vector<std::string> steps;
  std::unique_ptr<SimulatedMember::Thread> baton;
  {
    SimulatedMemberScope scope(&a.member);
    baton = a.member.spawn([&] {
      steps.push_back("start");
      const bool byCondition = a.member.block(steadyNow() + 1s, [&] { return flag; });
      steps.push_back(byCondition ? "flag" : "timeout");
      const bool second = a.member.block(steadyNow() + 50ms, [] { return false; });
      steps.push_back(second ? "?" : "timeout");
    });
  }
  // The flag goes up at 200 ms through a timer on the member's context.
  std::optional<Timer> t;
  {
    SimulatedMemberScope scope(&a.member);
    t.emplace(a.io, 200ms);
  }
  t->async_wait([&](const std::error_code&) { flag = true; });
  sim.runUntil(sim.start() + 100ms);
  CHECK(steps == std::vector<std::string>{"start"});
  sim.runUntil(sim.start() + 220ms);
  CHECK(steps == std::vector<std::string>{"start", "flag"});
  sim.runUntil(sim.start() + 300ms);
  CHECK(steps == std::vector<std::string>{"start", "flag", "timeout"});
  baton.reset();
}

TEST_CASE("A paused member's events wait for it to resume, in their order", "[sim]") {
  Simulation sim(9);
  OneMember a(sim);
  std::vector<int> order;
  std::optional<Timer> t1, t2;
  {
    SimulatedMemberScope scope(&a.member);
    t1.emplace(a.io, 10ms);
    t2.emplace(a.io, 20ms);
  }
  t1->async_wait([&](const std::error_code&) { order.push_back(1); });
  t2->async_wait([&](const std::error_code&) { order.push_back(2); });
  sim.pause(0);
  sim.runUntil(sim.start() + 50ms);
  CHECK(order.empty());
  sim.resume(0);
  sim.runUntil(sim.start() + 60ms);
  CHECK(order == std::vector<int>{1, 2});
}

// A small system of members that re-arm random timers: its trace depends on the seed only.
std::uint64_t randomRun(std::uint64_t seed) {
  Simulation sim(seed);
  std::vector<std::unique_ptr<OneMember>> members;
  std::vector<std::unique_ptr<Timer>> timers;
  for (int i = 0; i < 3; ++i) members.push_back(std::make_unique<OneMember>(sim));
  std::function<void(std::size_t)> arm = [&](std::size_t i) {
    OneMember& m = *members[i];
    SimulatedMemberScope scope(&m.member);
    timers[i]->expires_after(std::chrono::microseconds(m.member.random() % 5000));
    timers[i]->async_wait([&, i](const std::error_code& ec) {
      if (!ec) arm(i);
    });
  };
  for (std::size_t i = 0; i < members.size(); ++i) {
    SimulatedMemberScope scope(&members[i]->member);
    timers.push_back(std::make_unique<Timer>(members[i]->io));
  }
  for (std::size_t i = 0; i < members.size(); ++i) arm(i);
  sim.runUntil(sim.start() + 2s);
  timers.clear();
  return sim.traceHash() ^ sim.events();
}

TEST_CASE("The same seed gives the same trace, and another seed another", "[sim]") {
  CHECK(randomRun(42) == randomRun(42));
  CHECK(randomRun(42) != randomRun(43));
}

}  // namespace
}  // namespace ingrid::sim
