// Runtime: where a member's code gets its monotonic time, its timers, its randomness, its network
// and its threads. In a process that runs members for real, nothing is installed: time is
// std::chrono::steady_clock, timers are Asio's, sockets are TCP and each loop has its thread. The
// simulator (cluster/sim) installs a SimulatedMember for the member whose code runs on the calling
// thread, and then all of these come from it: simulated time that it advances, timers in its event
// queue, its in-memory network, a seeded generator, and io_contexts it polls itself on one thread.
//
// The seam is a thread-local pointer, set around each member's work (FoundationDB's
// "current process"), so that code deep in the node reads time and makes timers without a clock
// handed down through every constructor. Code that decides by time reads steadyNow(), makes a
// Timer (timer.h), and runs a loop through adopt() and blocking calls through spawn() (below),
// never steady_clock, asio::steady_timer or std::thread.
//
// Thread safety: the scope is per thread; a SimulatedMember is used only on the simulator's thread
// (and on the baton threads it runs one at a time: cluster/sim/simulation.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ingrid/unique_function.h>

namespace asio {
class io_context;
}

namespace ingrid {

class SimNetwork;

using SteadyTime = std::chrono::steady_clock::time_point;

// One member as the simulator runs it. Every method runs on the simulator's thread, or on a baton
// thread while the simulator waits for it.
class SimulatedMember {
 public:
  virtual ~SimulatedMember() = default;

  // The member's monotonic time: the simulation's time through this member's drift.
  virtual SteadyTime now() const noexcept = 0;
  // The member's wall-clock time: a fixed epoch plus its monotonic time since the start.
  virtual std::chrono::system_clock::time_point wallNow() const noexcept = 0;
  // Runs `fire` once, on the simulator's thread inside this member's scope, when the member's
  // time reaches `at` (at once, in the next event, if it already has). Events due at the same
  // simulated instant run in the order they were scheduled. Returns an id for cancel().
  virtual std::uint64_t schedule(SteadyTime at, UniqueFunction<void()> fire) = 0;
  // Forgets a scheduled event that has not run yet; no effect otherwise.
  virtual void cancel(std::uint64_t id) noexcept = 0;
  // The next draw of the member's own seeded generator.
  virtual std::uint64_t random() noexcept = 0;
  // The in-memory network the member's transports listen and dial on.
  virtual SimNetwork& network() noexcept = 0;
  // The host part of the member's address ("10.0.0.3"): its transports dial from it.
  virtual const std::string& host() const noexcept = 0;

  // Instead of a thread running io.run(): the simulator polls `io` between events until
  // forget(io) (which the owner calls before it destroys io; after it, nothing polls io).
  virtual void adopt(asio::io_context& io) = 0;
  virtual void forget(asio::io_context& io) noexcept = 0;
  // Instead of a thread running `fn`: a baton thread that runs only while the simulator waits
  // for it (block() hands control back). join() returns once fn has returned.
  class Thread {
   public:
    virtual ~Thread() = default;
    virtual void join() = 0;
  };
  virtual std::unique_ptr<Thread> spawn(std::function<void()> fn) = 0;
  // Called on a baton thread instead of waiting on a condition: returns once `ready()` is true
  // (evaluated on the simulator's thread between events, with the baton thread parked) or the
  // member's time reaches `deadline`; whichever comes first. Returns ready().
  virtual bool block(SteadyTime deadline, const std::function<bool()>& ready) = 0;
  // Whether the calling thread may call block() (a baton thread may; the simulator's may not).
  // Public calls that block check it first and refuse instead. Default: true.
  virtual bool mayBlock() const noexcept { return true; }
};

namespace detail {
// Set by SimulatedMemberScope; constinit, so that reading it costs no call.
extern thread_local constinit SimulatedMember* tlSimulatedMember;
}  // namespace detail

// The member installed for the calling thread; null outside a simulation.
inline SimulatedMember* simulatedMember() noexcept { return detail::tlSimulatedMember; }

// Installs `member` for the calling thread until the scope ends (then restores the previous one).
class SimulatedMemberScope {
 public:
  explicit SimulatedMemberScope(SimulatedMember* member) noexcept;
  ~SimulatedMemberScope();
  SimulatedMemberScope(const SimulatedMemberScope&) = delete;
  SimulatedMemberScope& operator=(const SimulatedMemberScope&) = delete;

 private:
  SimulatedMember* previous_;
};

// The calling member's monotonic time: steady_clock, or the simulated member's.
inline SteadyTime steadyNow() noexcept {
  if (SimulatedMember* m = simulatedMember()) return m->now();
  return std::chrono::steady_clock::now();
}

// The calling member's wall clock where the node reads one itself (request deadlines, the timer
// grid; not NodeOptions::clock, the processors'): system_clock, or the simulated member's
// wallNow() (members agree on it as their drift allows).
inline std::chrono::system_clock::time_point systemNow() noexcept {
  if (SimulatedMember* m = simulatedMember()) return m->wallNow();
  return std::chrono::system_clock::now();
}

}  // namespace ingrid
