// Simulation: the event loop of a deterministic simulation. Many members run on the calling
// thread, on simulated time, each seen by its code as a SimulatedMember (runtime.h).
//
// One queue of events ordered by (simulated time, sequence number): a member's timers, network
// deliveries, the scenario's faults. Between events the simulation polls the io_contexts the
// members adopted, member by member in a fixed order, until none runs a handler; then it wakes the
// baton threads (below) whose condition holds, and checks the invariants (afterEach). Then it
// pops the next event, moves time to it and runs it. Nothing else moves time: a run is a function
// of its seed, event for event, and its trace hash (every event's time, member and kind) says so.
//
// Baton threads: code that blocks its caller (Node start and stop, a join) runs on a thread of its
// own, but only while the simulation waits for it: it hands control back when it blocks (block())
// or returns. So at most one thread runs at any moment and the order is fixed.
//
// Each member has its own clock: local = global + offset + (global - start) * ppm / 10^6, so that
// drift between members can be set within the bound the leases assume, or past it.
//
// Thread safety: one thread (the caller's) and the baton threads it hands control to.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "cluster/transport/runtime.h"

namespace ingrid::sim {

class Simulation;
class Baton;

// Where a broken contract of a run is reported (a member blocking the simulator's thread, a
// livelock, a member that never stops) just before the process aborts: ingrid-sim prints it.
// Unset: the run aborts without a word. Set once, before any run.
void setFatalSink(std::function<void(std::string_view)> sink);
// Whether a sink is set.
bool hasFatalSink() noexcept;
[[noreturn]] void fatal(const std::string& what);

// The drift of a member's clock from the simulation's.
struct Drift {
  std::chrono::nanoseconds offset{0};
  std::int64_t ppm = 0;  // parts per million faster (> 0) or slower (< 0)
};

class Member final : public SimulatedMember {
 public:
  Member(Simulation& sim, std::size_t index, std::string host, Drift drift, std::uint64_t seed);
  ~Member() override;

  SteadyTime now() const noexcept override;
  std::chrono::system_clock::time_point wallNow() const noexcept override;
  std::uint64_t schedule(SteadyTime at, UniqueFunction<void()> fire) override;
  void cancel(std::uint64_t id) noexcept override;
  std::uint64_t random() noexcept override { return rng_(); }
  SimNetwork& network() noexcept override;
  const std::string& host() const noexcept override { return host_; }
  void adopt(asio::io_context& io) override;
  void forget(asio::io_context& io) noexcept override;
  std::unique_ptr<Thread> spawn(std::function<void()> fn) override;
  bool block(SteadyTime deadline, const std::function<bool()>& ready) override;
  bool mayBlock() const noexcept override;

  std::size_t index() const noexcept { return index_; }
  // The member's local time at global time `global`, and the first global time whose local time
  // is at least `local`.
  SteadyTime localAt(SteadyTime global) const noexcept;
  SteadyTime globalAt(SteadyTime local) const noexcept;
  // A paused member (SIGSTOP) runs nothing: its events wait, its io_contexts are not polled; its
  // clock goes on.
  bool paused = false;
  const std::vector<asio::io_context*>& contexts() const noexcept { return contexts_; }

 private:
  Simulation& sim_;
  const std::size_t index_;
  const std::string host_;
  const Drift drift_;
  std::mt19937_64 rng_;
  std::vector<asio::io_context*> contexts_;
};

class Simulation {
 public:
  // Simulated time starts at `start` (a steady time far from zero, so that code subtracting
  // durations from it stays positive).
  explicit Simulation(std::uint64_t seed,
                      SteadyTime start = SteadyTime(std::chrono::hours(24 * 365)));
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  SteadyTime now() const noexcept { return now_; }
  SteadyTime start() const noexcept { return start_; }
  // The scenario's own generator (faults, load), apart from the members'.
  std::mt19937_64& rng() noexcept { return rng_; }

  Member& addMember(std::string host, Drift drift = {});
  std::size_t memberCount() const noexcept { return members_.size(); }
  Member& member(std::size_t i) noexcept { return *members_[i]; }
  void setNetwork(SimNetwork& network) noexcept { network_ = &network; }
  SimNetwork& network() noexcept { return *network_; }

  // Runs `fire` at global time `at`, inside `member`'s scope (null: none). Returns an id.
  std::uint64_t scheduleAt(SteadyTime at, Member* member, UniqueFunction<void()> fire,
                           std::string_view kind = "timer");
  void cancel(std::uint64_t id) noexcept;

  // Runs events until global time `until` (time then stands at `until`), or until stop().
  // `afterEach` runs after each event and the work it led to (the checker).
  void runUntil(SteadyTime until, const std::function<void()>& afterEach = {});
  // Runs until `done()` or global time `limit`; returns done().
  bool runUntilTrue(const std::function<bool()>& done, SteadyTime limit,
                    const std::function<void()>& afterEach = {});
  // Runs everything that is ready now (handlers, batons), without moving time.
  void settle();
  // SIGSTOP and SIGCONT of member i: while paused its events wait (in order) and nothing of it
  // runs; its clock goes on.
  void pause(std::size_t i);
  void resume(std::size_t i);

  // Mixes one step into the trace hash (and prints it when tracing).
  void trace(std::string_view kind, std::size_t member, std::uint64_t detail = 0);
  std::uint64_t traceHash() const noexcept { return hash_; }
  std::uint64_t events() const noexcept { return events_; }
  void setTracePrinter(std::function<void(std::string_view)> print) { printer_ = std::move(print); }

  // Baton bookkeeping (Member::spawn / block).
  void addBaton(Baton* baton);
  void removeBaton(Baton* baton) noexcept;

 private:
  struct Event {
    Member* member;
    UniqueFunction<void()> fire;
    std::string_view kind;
  };
  // Polls every member's io_contexts and runs ready batons until nothing ran; returns whether
  // anything ran.
  bool pollAll();
  bool runBatons();

  SteadyTime start_;
  SteadyTime now_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<Member>> members_;
  SimNetwork* network_ = nullptr;
  std::map<std::pair<SteadyTime, std::uint64_t>, Event> queue_;
  absl::flat_hash_map<std::uint64_t, SteadyTime> scheduled_;  // lookups only, never iterated
  std::uint64_t nextSeq_ = 1;
  std::map<std::uint64_t, Event> deferred_;  // events of paused members, by sequence number
  std::vector<Baton*> batons_;               // in creation order
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
  std::uint64_t events_ = 0;
  std::function<void(std::string_view)> printer_;
};

}  // namespace ingrid::sim
