// ManualSim: a test-only simulator of a few members on one thread, for tests of what runs on a
// SimulatedMember (runtime.h): one event queue ordered by (time, sequence), one SimNetwork, one
// asio::io_context per member that the loop polls itself. Time moves only when an event runs:
// run() pops the earliest event, sets the time to it, runs it in its member's scope, then polls
// every io_context (each in its member's scope) until none has work ready. Members have no drift
// (their time is the simulation's); each draws from its own generator, seeded from the sim's seed.
//
// Thread safety: none; the test's thread only. Every loop is bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>

#include "cluster/transport/runtime.h"
#include "cluster/transport/sim_network.h"

namespace ingrid::testing {

class ManualSim {
 public:
  class Member final : public SimulatedMember {
   public:
    Member(ManualSim& sim, std::string host, std::uint64_t seed)
        : sim_(sim), host_(std::move(host)), random_(seed) {}

    SteadyTime now() const noexcept override { return sim_.now_; }
    std::chrono::system_clock::time_point wallNow() const noexcept override {
      return std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              sim_.now_.time_since_epoch()));
    }
    std::uint64_t schedule(SteadyTime at, UniqueFunction<void()> fire) override {
      return sim_.schedule(this, at, std::move(fire));
    }
    void cancel(std::uint64_t id) noexcept override { sim_.cancel(id); }
    std::uint64_t random() noexcept override { return random_(); }
    SimNetwork& network() noexcept override { return sim_.network_; }
    const std::string& host() const noexcept override { return host_; }
    void adopt(asio::io_context&) override {}  // the sim polls io() only
    void forget(asio::io_context&) noexcept override {}
    std::unique_ptr<Thread> spawn(std::function<void()>) override {
      throw std::logic_error("ManualSim does not run threads");
    }
    bool block(SteadyTime, const std::function<bool()>& ready) override { return ready(); }

    asio::io_context& io() noexcept { return *io_; }

    // Runs `fn` in this member's scope (as the member's own code would), then polls to idle.
    template <class Fn>
    decltype(auto) in(Fn&& fn) {
      struct Poll {
        ManualSim& sim;
        ~Poll() { sim.poll(); }
      } poll{sim_};
      SimulatedMemberScope scope(this);
      return std::forward<Fn>(fn)();
    }

   private:
    ManualSim& sim_;
    std::string host_;
    std::mt19937_64 random_;
    friend class ManualSim;
    // Destroyed by ~ManualSim while every member lives (its handlers may close streams).
    std::unique_ptr<asio::io_context> io_ = std::make_unique<asio::io_context>();
  };

  explicit ManualSim(SimNetwork::Options options = {}, std::uint64_t seed = 1)
      : network_(options), seed_(seed) {}
  ManualSim(const ManualSim&) = delete;
  ManualSim& operator=(const ManualSim&) = delete;
  // Drops the events, crashes every member on the network (its handlers are destroyed uncalled),
  // then destroys the io_contexts while every member still lives.
  ~ManualSim() {
    std::map<Key, Event> events = std::move(events_);
    events_.clear();
    ids_.clear();
    events.clear();
    for (auto& m : members_) network_.closeAll(*m);
    for (auto& m : members_) m->io_.reset();
  }

  Member& add(const std::string& host) {
    members_.push_back(std::make_unique<Member>(*this, host, seed_ * 1000003 + members_.size()));
    return *members_.back();
  }
  SimNetwork& network() noexcept { return network_; }
  SteadyTime now() const noexcept { return now_; }
  std::size_t pendingEvents() const noexcept { return events_.size(); }

  // Runs events due up to `until` (then sets the time to it), at most `maxEvents` of them;
  // returns how many ran.
  std::size_t runUntil(SteadyTime until, std::size_t maxEvents = 1000000) {
    poll();
    std::size_t ran = 0;
    while (!events_.empty() && ran < maxEvents) {
      auto it = events_.begin();
      if (it->first.first > until) break;
      now_ = std::max(now_, it->first.first);
      Event event = std::move(it->second);
      ids_.erase(event.id);
      events_.erase(it);
      {
        SimulatedMemberScope scope(event.member);
        event.fire();
      }
      ++ran;
      poll();
    }
    if (until > now_) now_ = until;
    return ran;
  }
  std::size_t runFor(SteadyTime::duration d, std::size_t maxEvents = 1000000) {
    return runUntil(now_ + d, maxEvents);
  }
  // Runs events until `done()` holds or `limit` of simulated time passes; returns done().
  bool runUntil(const std::function<bool()>& done, SteadyTime::duration limit) {
    const SteadyTime end = now_ + limit;
    for (std::size_t i = 0; i < 1000000 && !done(); ++i) {
      if (events_.empty() || events_.begin()->first.first > end) break;
      runUntil(events_.begin()->first.first, 1);
    }
    return done();
  }

  // Runs every member's ready handlers, in its scope, until none is left (bounded).
  void poll() {
    for (int round = 0; round < 100000; ++round) {
      std::size_t ran = 0;
      for (auto& m : members_) {
        SimulatedMemberScope scope(m.get());
        if (!m->io_) continue;
        m->io_->restart();
        ran += m->io_->poll();
      }
      if (ran == 0) return;
    }
    throw std::runtime_error("ManualSim::poll: handlers keep coming");
  }

 private:
  struct Event {
    Member* member = nullptr;
    std::uint64_t id = 0;
    UniqueFunction<void()> fire;
  };
  using Key = std::pair<SteadyTime, std::uint64_t>;  // (time, sequence)

  std::uint64_t schedule(Member* member, SteadyTime at, UniqueFunction<void()> fire) {
    const std::uint64_t id = nextId_++;
    const Key key{std::max(at, now_), id};
    events_.emplace(key, Event{member, id, std::move(fire)});
    ids_.emplace(id, key);
    return id;
  }
  void cancel(std::uint64_t id) noexcept {
    auto it = ids_.find(id);
    if (it == ids_.end()) return;
    events_.erase(it->second);
    ids_.erase(it);
  }

  SimNetwork network_;
  std::uint64_t seed_;
  // Simulated time starts an hour past the clock's epoch (so that now - a while stays positive).
  SteadyTime now_ = SteadyTime{} + std::chrono::hours(1);
  std::uint64_t nextId_ = 1;
  std::map<Key, Event> events_;
  std::map<std::uint64_t, Key> ids_;
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace ingrid::testing
