#include "cluster/sim/cluster_sim.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include <ingrid/clock.h>
#include <ingrid/invoke_async.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/registry.h>
#include <ingrid/processors/token_bucket.h>

#include "cluster/node_impl.h"
#include "cluster/sim/member_process.h"
#include "cluster/sim/simulation.h"
#include "cluster/transport/frame_faults.h"
#include "cluster/transport/sim_network.h"

namespace ingrid::sim {

namespace {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

BucketParams neverRefills(std::int64_t capacity) {
  return BucketParams{capacity, 1, std::numeric_limits<Nanos>::max(), std::nullopt};
}

// One member: its process (its node, none while down, and the baton running its start or stop).
struct Slot {
  Member* member = nullptr;
  std::string address;
  std::string dataDir;
  std::unique_ptr<MemberProcess<NodeImpl>> process;
  NodeImpl* node() const { return process->node(); }
  std::uint64_t pauses = 0;        // SIGSTOPs so far
  std::uint64_t restartEvent = 0;  // a crash's restart, not yet run; 0: none
};

struct Call {
  std::uint32_t key = 0;
  SteadyTime start{};
  std::size_t member = 0;
  bool answered = false;
  bool callerGone = false;   // its process crashed: nobody waits for the answer
  std::uint64_t pauses = 0;  // its process's SIGSTOPs when it was made
};

class ClusterRun {
 public:
  explicit ClusterRun(const ClusterSimOptions& o)
      : o_(o), sim_(o.seed), faults_(std::make_shared<FrameFaults>(o.seed ^ 0x5eedULL)) {
    SimNetwork::Options netOptions;
    network_ = std::make_unique<SimNetwork>(netOptions);
    sim_.setNetwork(*network_);
    if (o_.print) sim_.setTracePrinter(o_.print);
    for (std::size_t i = 0; i < o_.members; ++i) {
      const std::int64_t span = 2 * o_.maxDriftPpm + 1;
      const std::int64_t ppm =
          static_cast<std::int64_t>(sim_.rng()() % static_cast<std::uint64_t>(span)) -
          o_.maxDriftPpm;
      const auto offset = std::chrono::milliseconds(sim_.rng()() % 1000);
      Slot slot;
      slot.member = &sim_.addMember("10.0.0." + std::to_string(i + 1), Drift{offset, ppm});
      slot.address = slot.member->host() + ":7000";
      slot.process = std::make_unique<MemberProcess<NodeImpl>>(sim_, *slot.member);
      if (!o_.dataRoot.empty()) slot.dataDir = o_.dataRoot + "/m" + std::to_string(i + 1);
      slots_.push_back(std::move(slot));
    }
    registry_ = ProcessorRegistry::withBuiltins();
  }

  ClusterSimReport run();

 private:
  NodeOptions nodeOptions(std::size_t i) {
    NodeOptions n;
    n.listenAddress = slots_[i].address;
    if (i != 0 || slots_[i].process->generation() > 0) n.seeds = seedsFor(i);
    n.partitions = o_.partitions;
    n.backups = o_.backups;
    n.partitionsOnNetworkThread = true;
    n.shardPorts = false;
    n.workerThreads = 1;
    n.clock = std::make_shared<MemberClock>(*slots_[i].member);
    n.frameFaults = faults_;
    n.dataDir = slots_[i].dataDir;
    n.drainPeriod = 50ms;
    n.logLevel = LogLevel::kInfo;
    const std::size_t index = i;
    n.logSink = [this, index](const LogLine& line) {
      std::string text = "m" + std::to_string(index + 1) + " " + std::string(line.message);
      if (o_.print) o_.print(text);
      logTail_.push_back(std::move(text));
      if (logTail_.size() > 40) logTail_.pop_front();
    };
    return n;
  }
  std::vector<std::string> seedsFor(std::size_t i) const {
    std::vector<std::string> seeds;
    for (std::size_t j = 0; j < slots_.size(); ++j) {
      if (j != i) seeds.push_back(slots_[j].address);
    }
    return seeds;
  }

  void fail(std::string what) {
    if (!failure_.empty()) return;
    char at[64];
    std::snprintf(at, sizeof at,
                  "at %.6f s: ", std::chrono::duration<double>(sim_.now() - sim_.start()).count());
    failure_ = at + std::move(what);
  }

  // --- processes ---
  void startMember(std::size_t i);
  void stopMember(std::size_t i, bool crash);
  void reapBatons();

  // --- load ---
  void scheduleCall();
  void call();
  void answered(std::size_t id, Millis timeout, Result<std::string> raw);
  std::vector<std::size_t> upMembers() const {
    std::vector<std::size_t> up;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].process->up() && !slots_[i].member->paused) up.push_back(i);
    }
    return up;
  }

  // --- faults ---
  // Cuts (heals) from -> to, and to -> from if `both`; kept in cuts_ for healAll().
  void cut(const std::string& from, const std::string& to, bool both) {
    network_->cut(from, to);
    cuts_.emplace(from, to);
    if (both) cut(to, from, false);
  }
  void heal(const std::string& from, const std::string& to, bool both) {
    network_->heal(from, to);
    cuts_.erase({from, to});
    if (both) heal(to, from, false);
  }
  void scheduleFault();
  void injectFault();
  void restart(std::size_t i, bool keepDir);
  void healAll();

  // --- checks ---
  void checkLeases();
  bool converged(std::string* why) const;
  bool replicasComplete() const;
  void healedMemberFault() {
    --memberFaults_;
    quietUntil_ = after(6s);
  }
  void finalAudit(ClusterSimReport& report);

  std::uint64_t draw(std::uint64_t n) { return n == 0 ? 0 : sim_.rng()() % n; }
  template <class Rep, class Period>
  SteadyTime after(std::chrono::duration<Rep, Period> d) const {
    return sim_.now() + std::chrono::duration_cast<SteadyTime::duration>(d);
  }

  const ClusterSimOptions& o_;
  Simulation sim_;
  std::unique_ptr<SimNetwork> network_;
  std::shared_ptr<FrameFaults> faults_;
  ProcessorRegistry registry_;
  std::vector<Slot> slots_;
  std::deque<std::string> logTail_;
  std::string failure_;
  bool faultsOn_ = false;
  bool loadOn_ = false;
  std::vector<std::size_t> writers_;  // checkLeases: per partition, the member (1-based) or 0
  std::size_t memberFaults_ = 0;      // member-level faults not yet healed
  SteadyTime quietUntil_{};           // no new member-level fault before this
  bool frameFault_ = false;
  std::uint64_t faultCount_ = 0;
  std::set<std::pair<std::string, std::string>> cuts_;
  std::vector<Call> calls_;
  static constexpr std::uint32_t kFreshKeys = 8;
  static constexpr std::int64_t kFreshCapacity = 2;
  SteadyTime loadStart_{};
  std::vector<std::int64_t> capacity_;        // per key
  std::vector<std::int64_t> acked_;           // per key
  std::vector<std::uint64_t> remainingSeen_;  // per key: bit r set once a grant left r tokens
  std::uint64_t denied_ = 0, errors_ = 0, overDeadline_ = 0, leaseChecks_ = 0;
};

void ClusterRun::startMember(std::size_t i) {
  slots_[i].process->start(
      [this, i] { return std::make_unique<NodeImpl>(nodeOptions(i), registry_); },
      [this, i](const Result<bool>& r) {
        if (r.ok()) return;
        logTail_.push_back("m" + std::to_string(i + 1) + " start failed: " + r.error().message());
      });
}

void ClusterRun::stopMember(std::size_t i, bool crash) {
  Slot& s = slots_[i];
  if (!s.process->stop(crash)) return;
  if (crash) {
    for (Call& c : calls_) {
      if (c.member == i && !c.answered) c.callerGone = true;
    }
  }
}

// After an event: batons that finished are joined; a stopped node is destroyed.
void ClusterRun::reapBatons() {
  for (Slot& s : slots_) s.process->reap();
}

void ClusterRun::scheduleCall() {
  const auto gap = std::chrono::microseconds(draw(2 * o_.callGap.count() + 1));
  sim_.scheduleAt(
      after(gap), nullptr, [this] { call(); }, "call");
}

void ClusterRun::call() {
  if (!loadOn_) return;
  scheduleCall();
  const std::vector<std::size_t> up = upMembers();
  if (up.empty()) return;
  const std::size_t i = up[draw(up.size())];
  // Half the calls on the fixed keys (soon empty: they deny), half on the newest generation of
  // fresh keys (one a second), so that grants go on through every fault.
  const std::uint64_t generation =
      static_cast<std::uint64_t>((sim_.now() - loadStart_) / std::chrono::seconds(1));
  while (capacity_.size() < o_.keys + (generation + 1) * kFreshKeys) {
    capacity_.push_back(capacity_.size() < o_.keys ? o_.capacity : kFreshCapacity);
    acked_.push_back(0);
    remainingSeen_.push_back(0);
  }
  const auto key = static_cast<std::uint32_t>(
      draw(2) == 0 ? draw(o_.keys) : o_.keys + generation * kFreshKeys + draw(kFreshKeys));
  const std::size_t id = calls_.size();
  Slot& s = slots_[i];
  // The deadline is the caller's: its start on its own clock.
  calls_.push_back(Call{key, s.member->now(), i, false, false, s.pauses});
  const Millis timeout = s.node()->options().requestTimeout;
  SimulatedMemberScope scope(s.member);
  s.node()->invokeRaw(
      "audit-" + std::to_string(key), TokenBucketAcquire::kName,
      encode(TokenBucketAcquire{neverRefills(capacity_[key]), 1}),
      [this, id, timeout](Result<std::string> raw) { answered(id, timeout, std::move(raw)); });
}

void ClusterRun::answered(std::size_t id, Millis timeout, Result<std::string> raw) {
  Call& c = calls_[id];
  if (c.answered) {
    fail("call " + std::to_string(id) + " was answered twice");
    return;
  }
  c.answered = true;
  if (c.callerGone) return;  // the crashed process's caller is gone
  // A caller whose process was stopped meanwhile (SIGSTOP) could not be answered in time.
  const bool stopped = slots_[c.member].pauses != c.pauses;
  if (!stopped && slots_[c.member].member->now() - c.start > timeout + 1000ms) ++overDeadline_;
  Result<AcquireAnswer> r = decodeResult<TokenBucketAcquire>(std::move(raw));
  if (!r) {
    ++errors_;
    return;
  }
  if (!r->granted) {
    ++denied_;
    return;
  }
  ++acked_[c.key];
  // On a bucket that never refills each grant leaves one token fewer: two acknowledged grants
  // that left the same count took the same token (the state forked).
  const std::int64_t left = r->remaining;
  if (left >= 0 && left < 64) {
    const std::uint64_t bit = std::uint64_t{1} << left;
    if ((remainingSeen_[c.key] & bit) != 0) {
      fail("key audit-" + std::to_string(c.key) + ": two acknowledged grants both left " +
           std::to_string(left) + " tokens: one token granted twice");
    }
    remainingSeen_[c.key] |= bit;
  }
}

void ClusterRun::scheduleFault() {
  const auto gap = std::chrono::milliseconds(500 + draw(2500));
  sim_.scheduleAt(
      after(gap), nullptr, [this] { injectFault(); }, "fault");
}

void ClusterRun::injectFault() {
  if (!faultsOn_) return;
  scheduleFault();
  const std::size_t n = slots_.size();
  const std::size_t i = draw(n);
  Slot& s = slots_[i];
  const auto lasting = std::chrono::milliseconds(1000 + draw(6000));
  const std::uint64_t kind = draw(6);
  if (kind == 2) {  // a lossy, duplicating, reordering network: overlaps anything
    if (frameFault_) return;
    ++faultCount_;
    frameFault_ = true;
    FrameFaults::Rule rule;
    rule.drop = 0.02 * static_cast<double>(1 + draw(5));
    rule.duplicate = 0.02 * static_cast<double>(draw(3));
    rule.delayMax = std::chrono::milliseconds(draw(30));
    const int id = faults_->add(rule);
    sim_.trace("frames", 0, static_cast<std::uint64_t>(id));
    sim_.scheduleAt(
        after(lasting), nullptr,
        [this, id] {
          faults_->remove(id);
          frameFault_ = false;
        },
        "heal");
    return;
  }
  // A fault that can cost the cluster a member (a crash; or a partition or pause past the
  // failure timeout, after which the member is removed and its partitions move): with `backups`
  // copies besides the primary, at most that many at once, and a new one only once the cluster
  // has converged again with every replica complete, as the exactness claim assumes. Safety (one
  // writer per partition) is checked whatever the faults.
  // A healed fault may still cost a member later: a partial partition's verdict, judged on what
  // the members reported during a one-way cut, can remove a member seconds after the cut healed.
  // So the next one waits for a quiet period too (two failure timeouts after the last heal).
  if (memberFaults_ >= o_.backups || sim_.now() < quietUntil_ || !converged(nullptr) ||
      !replicasComplete()) {
    return;
  }
  if (!s.process->up() || s.member->paused) return;
  ++faultCount_;
  ++memberFaults_;
  switch (kind) {
    case 0: {  // isolate a member, both ways
      const std::string host = s.member->host();
      for (auto& other : slots_) {
        if (&other != &s) cut(host, other.member->host(), true);
      }
      sim_.trace("isolate", i + 1, static_cast<std::uint64_t>(lasting.count()));
      sim_.scheduleAt(
          after(lasting), nullptr,
          [this, host] {
            for (auto& other : slots_) {
              if (other.member->host() != host) heal(host, other.member->host(), true);
            }
            healedMemberFault();
          },
          "heal");
      break;
    }
    case 1: {  // one way: i no longer hears j
      const std::size_t j = (i + 1 + draw(n - 1)) % n;
      const std::string from = slots_[j].member->host(), to = s.member->host();
      cut(from, to, false);
      sim_.trace("cut-one-way", i + 1, j + 1);
      sim_.scheduleAt(
          after(lasting), nullptr,
          [this, from, to] {
            heal(from, to, false);
            healedMemberFault();
          },
          "heal");
      break;
    }
    case 3: {  // SIGSTOP, then SIGCONT
      sim_.pause(i);
      ++s.pauses;
      sim_.scheduleAt(
          after(lasting), nullptr,
          [this, i] {
            sim_.resume(i);
            healedMemberFault();
          },
          "heal");
      break;
    }
    default: {  // kill -9, then a new process on the same address
      stopMember(i, /*crash=*/true);
      const bool keepDir = !s.dataDir.empty() && draw(2) == 0;
      s.restartEvent = sim_.scheduleAt(
          after(lasting), nullptr, [this, i, keepDir] { restart(i, keepDir); }, "restart");
      break;
    }
  }
}

bool ClusterRun::replicasComplete() const {
  const TopologyPtr t = slots_[0].node() ? slots_[0].node()->topology() : nullptr;
  if (!t) return false;
  for (PartitionId p = 0; p < o_.partitions; ++p) {
    for (MemberId m : t->table.owners(p)) {
      if (t->syncingReplica(p, m) != nullptr) return false;
    }
  }
  return true;
}

void ClusterRun::restart(std::size_t i, bool keepDir) {
  Slot& s = slots_[i];
  s.restartEvent = 0;
  if (s.node()) {  // still stopping: try again a little later
    s.restartEvent = sim_.scheduleAt(
        after(100ms), nullptr, [this, i, keepDir] { restart(i, keepDir); }, "restart");
    return;
  }
  if (!keepDir && !s.dataDir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(s.dataDir, ignored);
  }
  startMember(i);
  healedMemberFault();
}

void ClusterRun::healAll() {
  faults_->clear();
  for (const auto& [from, to] : std::set<std::pair<std::string, std::string>>(cuts_)) {
    heal(from, to, false);
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].member->paused) sim_.resume(i);
  }
  sim_.trace("heal-all", 0);
}

void ClusterRun::checkLeases() {
  if (!failure_.empty()) return;
  ++leaseChecks_;
  writers_.assign(o_.partitions, 0);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.node()) continue;
    SimulatedMemberScope scope(s.member);  // the lease is judged on the member's own clock
    for (PartitionId p : s.node()->TEST_writablePartitions()) {
      if (writers_[p] != 0) {
        fail("partition " + std::to_string(p) + " has two members that may write as its " +
             "primary: m" + std::to_string(writers_[p]) + " and m" + std::to_string(i + 1) +
             " (id " + std::to_string(s.node()->memberId()) + "), each with a valid lease");
        return;
      }
      writers_[p] = i + 1;
    }
  }
}

bool ClusterRun::converged(std::string* why) const {
  std::uint64_t version = 0;
  std::size_t up = 0;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.node() || !s.process->up()) {
      if (why) *why = "m" + std::to_string(i + 1) + " is not up";
      return false;
    }
    ++up;
    const TopologyPtr t = s.node()->topology();
    if (s.node()->memberId() == 0 || !t->hasMember(s.node()->memberId())) {
      if (why) *why = "m" + std::to_string(i + 1) + " is not in its own topology";
      return false;
    }
    if (version != 0 && t->version != version) {
      if (why) *why = "topology versions differ (m" + std::to_string(i + 1) + ")";
      return false;
    }
    version = t->version;
  }
  const TopologyPtr t = slots_[0].node()->topology();
  if (t->members.size() != up) {
    if (why)
      *why = "the topology lists " + std::to_string(t->members.size()) + " members, " +
             std::to_string(up) + " are up";
    return false;
  }
  return true;
}

void ClusterRun::finalAudit(ClusterSimReport& report) {
  struct Final {
    bool read = false;
    std::int64_t consumed = 0;
  };
  // Shared with the reads' completions: one may come after the audit gave up on it.
  struct Reads {
    std::vector<Final> finals;
    std::size_t pending = 0;
  };
  auto reads = std::make_shared<Reads>();
  const auto keys = static_cast<std::uint32_t>(capacity_.size());
  reads->finals.resize(keys);
  std::vector<Final>& finals = reads->finals;
  auto readAll = [&] {
    for (std::uint32_t k = 0; k < keys; ++k) {
      if (finals[k].read) continue;
      const std::vector<std::size_t> up = upMembers();
      if (up.empty()) return;
      Slot& s = slots_[up[draw(up.size())]];
      SimulatedMemberScope scope(s.member);
      ++reads->pending;
      s.node()->invokeRaw("audit-" + std::to_string(k), GetEntry::kName, encode(GetEntry{}),
                          [reads, k, capacity = capacity_[k]](Result<std::string> raw) {
                            --reads->pending;
                            Result<EntrySnapshot> r = decodeResult<GetEntry>(std::move(raw));
                            if (!r) return;
                            reads->finals[k].read = true;
                            reads->finals[k].consumed =
                                r->exists ? capacity - decode<BucketState>(r->value).tokens : 0;
                          });
    }
  };
  for (int round = 0; round < 10; ++round) {
    readAll();
    sim_.runUntilTrue([&] { return reads->pending == 0; }, after(10s),
                      [this] {
                        reapBatons();
                        checkLeases();
                      });
    if (std::all_of(finals.begin(), finals.end(), [](const Final& f) { return f.read; })) break;
  }
  for (std::uint32_t k = 0; k < keys; ++k) {
    if (!finals[k].read) {
      fail("key audit-" + std::to_string(k) + " could not be read after the faults healed");
      continue;
    }
    if (acked_[k] > capacity_[k]) {
      report.doubled += static_cast<std::uint64_t>(acked_[k] - capacity_[k]);
      fail("key audit-" + std::to_string(k) + ": " + std::to_string(acked_[k]) +
           " grants acknowledged, capacity " + std::to_string(capacity_[k]));
    }
    // A grant beyond the capacity is counted doubled above, not lost too.
    const std::int64_t counted = std::min(acked_[k], capacity_[k]);
    if (counted > finals[k].consumed) {
      report.lost += static_cast<std::uint64_t>(counted - finals[k].consumed);
      fail("key audit-" + std::to_string(k) + ": " + std::to_string(acked_[k]) +
           " grants acknowledged, the final state counts " + std::to_string(finals[k].consumed));
    }
  }
}

ClusterSimReport ClusterRun::run() {
  // The real time a run takes (its speed, reported): the one read of a real clock here.
  const auto wallStart = std::chrono::steady_clock::now();
  ClusterSimReport report;
  report.seed = o_.seed;
  capacity_.clear();
  acked_.clear();
  remainingSeen_.clear();
  const auto afterEach = [this] {
    reapBatons();
    checkLeases();
  };
  const auto failed = [this] { return !failure_.empty(); };

  startMember(0);
  sim_.runUntilTrue([&] { return slots_[0].process->idle() || failed(); }, after(30s), afterEach);
  if (!slots_[0].process->up()) fail("the first member did not start");
  for (std::size_t i = 1; i < slots_.size() && failure_.empty(); ++i) startMember(i);
  sim_.runUntilTrue(
      [&] {
        return failed() || std::all_of(slots_.begin(), slots_.end(),
                                       [](const Slot& s) { return s.process->idle(); });
      },
      after(60s), afterEach);
  for (std::size_t i = 0; i < slots_.size() && failure_.empty(); ++i) {
    if (!slots_[i].process->up()) fail("m" + std::to_string(i + 1) + " did not join");
  }

  if (failure_.empty()) {
    loadOn_ = true;
    loadStart_ = sim_.now();
    scheduleCall();
    faultsOn_ = o_.faults;
    if (faultsOn_) scheduleFault();
    sim_.runUntilTrue(failed, after(o_.faultPhase), afterEach);
    faultsOn_ = false;
    healAll();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      // A crash's restart still to come is done here instead (and cancelled); one whose process
      // is still going down keeps its restart, which waits for it.
      if (!slots_[i].node() && !slots_[i].process->stopping()) {
        if (slots_[i].restartEvent != 0) sim_.cancel(std::exchange(slots_[i].restartEvent, 0));
        startMember(i);
      }
    }
    sim_.runUntilTrue(failed, after(o_.healPhase), afterEach);
    std::string why;
    if (failure_.empty() &&
        !sim_.runUntilTrue([&] { return converged(&why) || failed(); }, after(30s), afterEach)) {
      fail("no convergence 30 s after the heal phase: " + why);
    }
    loadOn_ = false;
    sim_.runUntilTrue(
        [&] {
          return failed() || std::all_of(calls_.begin(), calls_.end(),
                                         [](const Call& c) { return c.answered || c.callerGone; });
        },
        after(20s), afterEach);
    for (std::size_t id = 0; id < calls_.size() && failure_.empty(); ++id) {
      const Call& c = calls_[id];
      if (!c.answered && !c.callerGone) {
        fail("call " + std::to_string(id) + " to m" + std::to_string(c.member + 1) +
             " was never answered, and its process did not crash");
      }
    }
    if (failure_.empty()) finalAudit(report);
  }

  // Stop every member (gracefully), so that no baton thread is left.
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].member->paused) sim_.resume(i);
  }
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].node() && slots_[i].process->idle() && !slots_[i].process->stopping()) {
        stopMember(i, false);
      }
    }
    sim_.runUntilTrue(
        [&] {
          return std::all_of(slots_.begin(), slots_.end(),
                             [](const Slot& s) { return !s.node() && !s.process->hasBaton(); });
        },
        after(60s),
        [this] {
          reapBatons();
          checkLeases();  // a graceful stop hands partitions over: one writer still
        });
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].node() || slots_[i].process->hasBaton()) {
      // A baton thread still blocked: nothing can unwind it.
      fatal("seed " + std::to_string(o_.seed) + ": m" + std::to_string(i + 1) +
            " did not stop within 3 minutes" + (failure_.empty() ? "" : "; first " + failure_));
    }
  }

  report.traceHash = sim_.traceHash();
  report.events = sim_.events();
  report.simulatedSeconds = std::chrono::duration<double>(sim_.now() - sim_.start()).count();
  report.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  report.faults = faultCount_;
  report.calls = calls_.size();
  for (std::int64_t a : acked_) report.acked += static_cast<std::uint64_t>(a);
  report.denied = denied_;
  report.errors = errors_;
  report.unanswered = static_cast<std::uint64_t>(
      std::count_if(calls_.begin(), calls_.end(), [](const Call& c) { return !c.answered; }));
  report.overDeadline = overDeadline_;
  report.leaseChecks = leaseChecks_;
  if (failure_.empty() && overDeadline_ > 0) {
    fail(std::to_string(overDeadline_) + " calls answered past their deadline + 1 s");
  }
  report.failure = failure_;
  report.logTail.assign(logTail_.begin(), logTail_.end());
  return report;
}

}  // namespace

std::string ClusterSimReport::line() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "seed=%llu %s hash=%016llx events=%llu sim_s=%.1f wall_s=%.2f faults=%llu "
                "calls=%llu acked=%llu denied=%llu errors=%llu unanswered=%llu lost=%llu "
                "doubled=%llu over_deadline=%llu",
                static_cast<unsigned long long>(seed), ok() ? "ok" : "FAILED",
                static_cast<unsigned long long>(traceHash), static_cast<unsigned long long>(events),
                simulatedSeconds, wallSeconds, static_cast<unsigned long long>(faults),
                static_cast<unsigned long long>(calls), static_cast<unsigned long long>(acked),
                static_cast<unsigned long long>(denied), static_cast<unsigned long long>(errors),
                static_cast<unsigned long long>(unanswered), static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(doubled),
                static_cast<unsigned long long>(overDeadline));
  return buf;
}

ClusterSimReport runClusterSim(const ClusterSimOptions& options) {
  ClusterRun run(options);
  return run.run();
}

}  // namespace ingrid::sim
