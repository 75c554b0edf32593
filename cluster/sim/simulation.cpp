#include "cluster/sim/simulation.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include <asio/io_context.hpp>

namespace ingrid::sim {

namespace {

std::function<void(std::string_view)>& fatalSink() {
  static std::function<void(std::string_view)> sink;
  return sink;
}

[[noreturn]] void fail(const std::string& what) { fatal(what); }

thread_local Baton* tlBaton = nullptr;

}  // namespace

void setFatalSink(std::function<void(std::string_view)> sink) { fatalSink() = std::move(sink); }

bool hasFatalSink() noexcept { return static_cast<bool>(fatalSink()); }

void fatal(const std::string& what) {
  // The simulator is a test tool: a broken contract ends the run, naming itself.
  if (fatalSink()) fatalSink()("simulation: " + what);
  std::abort();
}

// A thread that runs only while the simulation waits for it (see simulation.h).
class Baton final : public SimulatedMember::Thread {
 public:
  Baton(Simulation& sim, Member& member, std::function<void()> fn)
      : sim_(sim), member_(member), fn_(std::move(fn)) {
    thread_ = std::thread([this] { body(); });
    sim_.addBaton(this);
  }
  ~Baton() override {
    if (!done_)
      fail("a baton thread was dropped before it finished (member " +
           std::to_string(member_.index()) + ")");
    if (thread_.joinable()) thread_.join();
    sim_.removeBaton(this);
  }

  void join() override {
    if (tlBaton == nullptr) fail("join() of a baton thread on the simulation's thread");
    tlBaton->member_.block(SteadyTime::max(), [this] { return done_; });
  }

  // Simulation side: whether it should run now.
  bool runnable() {
    if (done_) return false;
    if (!started_) return true;
    SimulatedMemberScope scope(&member_);
    return (*ready_)() || member_.now() >= deadline_;
  }
  bool done() const noexcept { return done_; }
  Member& member() noexcept { return member_; }

  // Simulation side: hands control over until the thread blocks or returns.
  void resume() {
    started_ = true;
    std::unique_lock lock(mu_);
    turn_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !turn_; });
  }

  // Baton side (Member::block).
  bool block(SteadyTime deadline, const std::function<bool()>& ready) {
    deadline_ = deadline;
    ready_ = &ready;
    std::uint64_t wake = 0;
    if (deadline != SteadyTime::max()) {
      wake = sim_.scheduleAt(
          member_.globalAt(deadline), &member_, [] {}, "wake");
    }
    {
      std::unique_lock lock(mu_);
      turn_ = false;
      cv_.notify_all();
      cv_.wait(lock, [this] { return turn_; });
    }
    if (wake != 0) sim_.cancel(wake);
    ready_ = nullptr;
    return ready();
  }

 private:
  void body() {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return turn_; });
    }
    tlBaton = this;
    {
      SimulatedMemberScope scope(&member_);
      fn_();
    }
    std::unique_lock lock(mu_);
    done_ = true;
    turn_ = false;
    cv_.notify_all();
  }

  Simulation& sim_;
  Member& member_;
  std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool turn_ = false;     // guarded by mu_: whether the baton thread holds control
  bool started_ = false;  // simulation side
  bool done_ = false;     // written by the baton thread under mu_ before it hands control back
  SteadyTime deadline_{};
  const std::function<bool()>* ready_ = nullptr;
  std::thread thread_;
};

// --- Member ---

Member::Member(Simulation& sim, std::size_t index, std::string host, Drift drift,
               std::uint64_t seed)
    : sim_(sim), index_(index), host_(std::move(host)), drift_(drift), rng_(seed) {}

Member::~Member() = default;

SteadyTime Member::localAt(SteadyTime global) const noexcept {
  // |since * ppm| < 2^63 for runs of up to 10^4 simulated seconds at up to 10^5 ppm.
  const std::int64_t since = (global - sim_.start()).count();
  const std::int64_t skew = since * drift_.ppm / 1'000'000;
  return global + drift_.offset + std::chrono::nanoseconds(skew);
}

SteadyTime Member::globalAt(SteadyTime local) const noexcept {
  if (local == SteadyTime::max()) return local;
  if (local <= localAt(sim_.start())) return sim_.start();  // before the run (a default expiry)
  // An estimate in floating point, then corrected to the exact first nanosecond.
  const double span = static_cast<double>((local - sim_.start() - drift_.offset).count());
  SteadyTime g = sim_.start() + std::chrono::nanoseconds(static_cast<std::int64_t>(
                                    span * 1e6 / (1e6 + static_cast<double>(drift_.ppm))));
  const auto ns = std::chrono::nanoseconds(1);
  for (int i = 0; i < 64 && localAt(g) < local; ++i) g += ns;
  for (int i = 0; i < 64 && localAt(g - ns) >= local; ++i) g -= ns;
  return g;
}

SteadyTime Member::now() const noexcept { return localAt(sim_.now()); }

std::chrono::system_clock::time_point Member::wallNow() const noexcept {
  // A fixed epoch (2027-01-15), so that a run's wall-clock times repeat too.
  constexpr std::chrono::seconds kEpoch{1'800'000'000};
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(kEpoch +
                                                                      (now() - sim_.start())));
}

std::uint64_t Member::schedule(SteadyTime at, UniqueFunction<void()> fire) {
  return sim_.scheduleAt(std::max(globalAt(at), sim_.now()), this, std::move(fire));
}

void Member::cancel(std::uint64_t id) noexcept { sim_.cancel(id); }

SimNetwork& Member::network() noexcept { return sim_.network(); }

void Member::adopt(asio::io_context& io) {
  if (std::find(contexts_.begin(), contexts_.end(), &io) == contexts_.end()) {
    contexts_.push_back(&io);
  }
}

void Member::forget(asio::io_context& io) noexcept { std::erase(contexts_, &io); }

std::unique_ptr<SimulatedMember::Thread> Member::spawn(std::function<void()> fn) {
  return std::make_unique<Baton>(sim_, *this, std::move(fn));
}

bool Member::block(SteadyTime deadline, const std::function<bool()>& ready) {
  if (ready()) return true;
  if (tlBaton == nullptr) {
    fail("member " + std::to_string(index_) +
         " blocked on the simulation's thread (only baton threads may block)");
  }
  return tlBaton->block(deadline, ready);
}

bool Member::mayBlock() const noexcept { return tlBaton != nullptr; }

// --- Simulation ---

Simulation::Simulation(std::uint64_t seed, SteadyTime start)
    : start_(start), now_(start), rng_(seed) {}

Simulation::~Simulation() = default;

Member& Simulation::addMember(std::string host, Drift drift) {
  const std::uint64_t seed = rng_();
  members_.push_back(
      std::make_unique<Member>(*this, members_.size(), std::move(host), drift, seed));
  return *members_.back();
}

std::uint64_t Simulation::scheduleAt(SteadyTime at, Member* member, UniqueFunction<void()> fire,
                                     std::string_view kind) {
  const std::uint64_t seq = nextSeq_++;
  at = std::max(at, now_);
  queue_.emplace(std::make_pair(at, seq), Event{member, std::move(fire), kind});
  scheduled_.emplace(seq, at);
  return seq;
}

void Simulation::cancel(std::uint64_t id) noexcept {
  auto it = scheduled_.find(id);
  if (it == scheduled_.end()) {
    deferred_.erase(id);  // an event of a paused member, perhaps
    return;
  }
  queue_.erase(std::make_pair(it->second, id));
  scheduled_.erase(it);
}

void Simulation::trace(std::string_view kind, std::size_t member, std::uint64_t detail) {
  auto mix = [this](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (v >> (8 * i)) & 0xff;
      hash_ *= 0x100000001b3ULL;
    }
  };
  mix(static_cast<std::uint64_t>((now_ - start_).count()));
  mix(member);
  for (char c : kind) mix(static_cast<unsigned char>(c));
  mix(detail);
  if (printer_) {
    char line[160];
    std::snprintf(line, sizeof line, "%12.6f m%zu %.*s %llu",
                  std::chrono::duration<double>(now_ - start_).count(), member,
                  static_cast<int>(kind.size()), kind.data(),
                  static_cast<unsigned long long>(detail));
    printer_(line);
  }
}

void Simulation::addBaton(Baton* baton) { batons_.push_back(baton); }

void Simulation::removeBaton(Baton* baton) noexcept { std::erase(batons_, baton); }

bool Simulation::runBatons() {
  bool ran = false;
  // By index: a baton may spawn another (appended) while it runs.
  for (std::size_t i = 0; i < batons_.size(); ++i) {
    Baton* b = batons_[i];
    if (b->member().paused || !b->runnable()) continue;
    trace("baton", b->member().index(), i);
    b->resume();
    ran = true;
  }
  return ran;
}

bool Simulation::pollAll() {
  bool any = false;
  for (int round = 0; round < 1'000'000; ++round) {
    bool ran = false;
    for (auto& m : members_) {
      if (m->paused) continue;
      SimulatedMemberScope scope(m.get());
      // By index: a handler may adopt or forget a context while this runs.
      for (std::size_t i = 0; i < m->contexts().size(); ++i) {
        if (m->contexts()[i]->poll() > 0) ran = true;
      }
    }
    if (runBatons()) ran = true;
    if (!ran) return any;
    any = true;
  }
  fail("livelock: handlers kept running for a million rounds at one simulated instant");
}

void Simulation::settle() { pollAll(); }

void Simulation::runUntil(SteadyTime until, const std::function<void()>& afterEach) {
  runUntilTrue([] { return false; }, until, afterEach);
}

bool Simulation::runUntilTrue(const std::function<bool()>& done, SteadyTime limit,
                              const std::function<void()>& afterEach) {
  pollAll();
  if (afterEach) afterEach();
  while (!done()) {
    auto it = queue_.begin();
    if (it == queue_.end() || it->first.first > limit) {
      now_ = std::max(now_, limit);
      return done();
    }
    Event event = std::move(it->second);
    const std::uint64_t seq = it->first.second;
    now_ = it->first.first;
    scheduled_.erase(seq);
    queue_.erase(it);
    ++events_;
    if (event.member != nullptr && event.member->paused) {
      // Paused: the event waits for the member to resume (resume() queues it again, under the
      // same id, so that cancel() still finds it).
      deferred_.emplace(seq, std::move(event));
      continue;
    }
    trace(event.kind, event.member != nullptr ? event.member->index() + 1 : 0);
    {
      SimulatedMemberScope scope(event.member);
      event.fire();
    }
    pollAll();
    if (afterEach) afterEach();
  }
  return true;
}

void Simulation::pause(std::size_t i) {
  members_[i]->paused = true;
  trace("pause", i + 1);
}

void Simulation::resume(std::size_t i) {
  members_[i]->paused = false;
  trace("resume", i + 1);
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->second.member == members_[i].get()) {
      queue_.emplace(std::make_pair(now_, it->first), std::move(it->second));
      scheduled_.emplace(it->first, now_);
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ingrid::sim
