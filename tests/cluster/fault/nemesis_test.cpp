// A seeded nemesis: a random schedule of faults against five ingrid-node members on five hosts
// (support/hosts.h: a network namespace each, on a bridge), under the grant audit of
// support/grant_audit.h (32 callers on buckets that never refill). The schedule is a pure
// function of the seed: a failing seed replays the same faults in the same order, with the same
// targets and holds (a leader kill strikes whichever member leads then).
//
// What it claims: with 5 voters, 2 backups and a 2 s failure timeout, one fault at a time
// (touching at most two of the five members) struck on a safe cluster and healed after a random
// hold loses no acknowledged grant, grants no token twice, consumes no token that no call
// explains, lets no call run past its deadline (plus 500 ms), crashes no member, and always
// returns to one topology of five members with every replica complete, five voters and
// `ingrid-cli wait cluster-safe` satisfied. Load runs around each fault: grants acknowledged
// before it and after it.
//
// Faults (drawn from a shuffled bag of every kind, so each kind comes once in every ten):
//   kill          kill -9 of a member; a new process on its host joins after the hold
//   kill-leader   kill -9 of the control plane's leader (found then), restarted likewise
//   kill-two      kill -9 of two members at once (5 voters survive 2 losses, 2 backups keep a
//                 copy of every partition), both restarted after the hold
//   restart       SIGTERM (a graceful leave), and a new process on its host after the hold
//   pause         SIGSTOP shorter than the failure timeout, then SIGCONT
//   pause-long    SIGSTOP past the failure timeout: removed, it rejoins as a new member
//   isolate       one host cut from all the others, both ways
//   cut-one-way   one host cannot send to another (nft drops what it sends there)
//   cut           two hosts cannot talk to each other; both talk to the other three
//   split         two hosts cut from the other three, both ways
// Hosts 0, 2 and 4 run their members with a data directory each (--data-dir), kept across
// restarts on that host; hosts 1 and 3 without. So every kind that restarts a process restarts it
// with its Raft state on some hosts and without on others: a restored one votes as the member it
// was until the others have removed that member, then joins as a new one.
// Not injected, and why:
//   - a fault before the cluster is safe again, or three members out at once: beyond what 5
//     voters and 2 backups survive (a lost quorum needs `ingrid-cli recover`: recover_test).
//   - faults of the test's clients (they sit in the lab, which every cut leaves reachable), clock
//     steps, disks, and slow or lossy links (frame_fault_test drops, delays and reorders frames
//     in-process).
//
// INGRID_NEMESIS_SEED=N replays a seed (else one is drawn and printed first);
// INGRID_NEMESIS_SECONDS (default 30, as CTest runs it) is the length of the schedule: no fault is
// struck that would not end within it. It prints one line per fault (start, kind, target, hold,
// calls ok/failed while it lasted and while the cluster settled) and a summary; a failing run
// keeps every member's log in a directory it names. By hand: `scripts/nemesis.sh --minutes 10`.
// As root (namespaces); skipped with a warning otherwise, failed with CI set.
#include "support/host_cluster.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/client.h>

#include "support/eventually.h"
#include "support/fault_harness.h"
#include "support/grant_audit.h"
#include "support/hosts.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultClock;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::HostLab;
using ingrid::testing::NodeProcess;
using ingrid::testing::TempDir;
using std::chrono::milliseconds;

namespace {

constexpr int kHosts = 5;
constexpr auto kFailureTimeout = 2000ms;
// Sanitizer builds run five members and the load on two cores several times slower: the bounds
// on waits grow, the invariants stay.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kSlow = 3;
#else
constexpr int kSlow = 1;
#endif
constexpr std::uint64_t kGrantsAround = 100;  // acknowledged before each fault and after it
constexpr auto kGrantLimit = 20s * kSlow;
constexpr auto kSettleLimit = 60s * kSlow;  // from a fault's heal until the cluster is safe
constexpr auto kLeaveLimit = 30s * kSlow;   // a graceful leave
constexpr auto kReadLimit = 20s * kSlow;    // the final reads of every bucket

enum class Kind : std::uint8_t {
  kKill,
  kKillLeader,
  kKillTwo,
  kRestart,
  kPause,
  kPauseLong,
  kIsolate,
  kCutOneWay,
  kCut,
  kSplit,
};
constexpr std::array<const char*, 10> kKindNames = {
    "kill",       "kill-leader", "kill-two",    "restart", "pause",
    "pause-long", "isolate",     "cut-one-way", "cut",     "split"};
const char* nameOf(Kind k) { return kKindNames[static_cast<std::size_t>(k)]; }

// One fault of the schedule: hosts a and b (distinct; b only for the kinds of two), the load's
// time before it, and how long it holds.
struct Planned {
  Kind kind = Kind::kKill;
  int a = 0, b = 1;
  milliseconds gap{0}, hold{0};
};

// The first `count` faults of seed `seed`'s schedule. Only mt19937_64's output (fixed by the
// standard) and integer arithmetic: the same schedule on every platform.
std::vector<Planned> schedule(std::uint64_t seed, std::size_t count) {
  std::mt19937_64 rng(seed);
  const auto below = [&](std::uint64_t n) { return rng() % n; };
  const auto between = [&](milliseconds lo, milliseconds hi) {
    return lo + milliseconds(below(static_cast<std::uint64_t>((hi - lo).count()) + 1));
  };
  std::vector<Kind> bag;
  std::vector<Planned> out;
  while (out.size() < count) {
    if (bag.empty()) {
      for (std::size_t k = 0; k < kKindNames.size(); ++k) bag.push_back(static_cast<Kind>(k));
      for (std::size_t i = bag.size() - 1; i > 0; --i) std::swap(bag[i], bag[below(i + 1)]);
    }
    Planned p;
    p.kind = bag.back();
    bag.pop_back();
    p.a = static_cast<int>(below(kHosts));
    p.b = static_cast<int>((static_cast<std::uint64_t>(p.a) + 1 + below(kHosts - 1)) % kHosts);
    p.gap = between(500ms, 3000ms);
    switch (p.kind) {
      case Kind::kKill:
      case Kind::kKillLeader:
      case Kind::kKillTwo:
        // Some restarts come before the failure timeout: the new process is admitted at its
        // predecessor's address once that one's lease surely expired.
        p.hold = between(0ms, 5000ms);
        break;
      case Kind::kRestart:
        p.hold = between(0ms, 2000ms);
        break;
      case Kind::kPause:
        p.hold = between(200ms, kFailureTimeout * 3 / 4);
        break;
      case Kind::kPauseLong:
        p.hold = between(kFailureTimeout + 500ms, kFailureTimeout * 3);
        break;
      case Kind::kIsolate:
      case Kind::kCutOneWay:
      case Kind::kCut:
      case Kind::kSplit:
        p.hold = between(500ms, 6000ms);
        break;
    }
    out.push_back(p);
  }
  return out;
}

std::uint64_t envNumber(const char* name, std::uint64_t otherwise) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return otherwise;
  return std::strtoull(v, nullptr, 10);
}

double seconds(FaultClock::duration d) {
  return std::chrono::duration_cast<std::chrono::duration<double>>(d).count();
}
long long ms(FaultClock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<milliseconds>(d).count());
}
unsigned long long u(std::uint64_t v) { return static_cast<unsigned long long>(v); }

// What one fault did, for its line and the checks.
struct Record {
  int number = 0;
  Planned planned;
  std::string target;       // "host 2 (member 3, leader)"
  std::string outcome;      // what healing did ("restarted as member 7")
  std::string problem;      // a step that did not happen; empty if none
  bool loadBefore = false;  // grants acknowledged before it
  bool loadAfter = false;   // and after its heal
  bool safeAfter = false;   // the cluster safe again within kSettleLimit
  FaultClock::time_point struck, healed, settled;
  GrantAudit::Progress atStrike, atHeal, atSettle;
};

// Strikes faults on the cluster of `lab`'s hosts and heals them, one at a time.
class Nemesis {
 public:
  Nemesis(HostLab& lab, FaultCluster& cluster, GrantAudit& audit, ingrid::Client& probe)
      : lab_(lab), cluster_(cluster), audit_(audit), probe_(probe) {
    for (int h = 0; h < kHosts; ++h) at_[h] = static_cast<std::size_t>(h);
  }

  // Load, the gap, the fault, its hold, its heal, load again, and the wait until the cluster is
  // safe to strike again.
  void run(const Planned& p, Record& r) {
    r.planned = p;
    r.loadBefore = audit_.waitForGrants(kGrantsAround, kGrantLimit);
    std::this_thread::sleep_until(FaultClock::now() + p.gap);  // the schedule: load, no fault
    r.atStrike = audit_.progress();
    r.struck = FaultClock::now();
    strike(p, r);
    std::this_thread::sleep_until(r.struck + p.hold);  // the schedule: the fault holds
    heal(p, r);
    r.healed = FaultClock::now();
    r.atHeal = audit_.progress();
    r.loadAfter = audit_.waitForGrants(kGrantsAround, kGrantLimit);
    std::string why;
    r.safeAfter = safe(kSettleLimit, why);
    if (!r.safeAfter)
      note(r, "not safe " + std::to_string(ms(kSettleLimit)) + " ms after the heal: " + why);
    r.settled = FaultClock::now();
    r.atSettle = audit_.progress();
  }

  // Waits up to `limit` until every live member agrees on one topology of kHosts members with
  // nothing syncing, the leader counts kHosts voters, all in that topology, and `ingrid-cli wait
  // cluster-safe` is satisfied, all on the same topology version: the wait can end on a cluster
  // short of a member (its removal committed and the others settled before it joined again), so
  // the first two are checked again after it. False with `why` otherwise.
  bool safe(milliseconds limit, std::string& why) {
    const auto deadline = FaultClock::now() + limit;
    for (int round = 0; round < 20; ++round) {
      const Convergence c = cluster_.waitConverged(kHosts, left(deadline));
      if (!c.converged) {
        std::string voters;
        fullVoters(voters);
        why = c.detail + "  " + voters + "\n";
        return false;
      }
      const bool voters =
          ingrid::testing::eventually([&] { return fullVoters(why); }, left(deadline));
      if (!voters) return false;
      NodeProcess cli({}, INGRID_CLI_PATH,
                      {"wait", "cluster-safe", "--seed", HostLab::endpoint(0), "--timeout-ms",
                       std::to_string(std::max<long long>(1000, left(deadline).count()))});
      const auto status = cli.waitExit(left(deadline) + 10s);
      if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        if (!status) cli.kill9();
        why = "ingrid-cli wait cluster-safe: " + cli.tail(3);
        return false;
      }
      const Convergence after = cluster_.waitConverged(kHosts, milliseconds(0));
      if (after.converged && after.version == c.version && fullVoters(why)) return true;
      why = "the cluster changed while ingrid-cli wait cluster-safe ran (v" +
            std::to_string(c.version) + " -> " +
            (after.converged ? "v" + std::to_string(after.version) : "not converged") + ")";
      if (FaultClock::now() >= deadline) return false;
    }
    return false;
  }

  // The process on host h now.
  NodeProcess& on(int h) { return cluster_[at_[h]]; }

 private:
  static milliseconds left(FaultClock::time_point deadline) {
    return std::max(0ms, std::chrono::duration_cast<milliseconds>(deadline - FaultClock::now()));
  }
  static void note(Record& r, const std::string& what) {
    r.problem += (r.problem.empty() ? "" : "; ") + what;
  }

  // The host whose member leads the control plane, or -1.
  int leaderHost() {
    const int leader = cluster_.leaderIndex();
    for (int h = 0; h < kHosts; ++h) {
      if (leader >= 0 && at_[h] == static_cast<std::size_t>(leader)) return h;
    }
    return -1;
  }
  // "host 2 (member 3, leader)".
  std::string describe(int h, int leader) {
    const auto t = on(h).latestTopology();
    return "host " + std::to_string(h) + " (member " + std::to_string(t ? t->self : 0) +
           (h == leader ? ", leader)" : ")");
  }
  // The addresses of every host but `a` and `b`, comma-separated: a restarted member's seeds.
  static std::string seedsBut(int a, int b = -1) {
    std::string out;
    for (int h = 0; h < kHosts; ++h) {
      if (h != a && h != b) out += (out.empty() ? "" : ",") + HostLab::endpoint(h);
    }
    return out;
  }

  // A new process on host h in place of the one that ended.
  void restart(int h, const std::string& seeds, Record& r) {
    const std::string failed = cluster_.add(seeds, static_cast<std::size_t>(h));
    at_[h] = cluster_.size() - 1;
    if (!failed.empty()) {
      note(r, "restart on host " + std::to_string(h) + ": " + failed);
      return;
    }
    // With a data directory (hosts 0, 2, 4) it logged the Raft state it restored before joining.
    const bool restored = on(h).waitForLine("restored member", 0ms).has_value();
    r.outcome += (r.outcome.empty() ? "" : ", ") + std::string("host ") + std::to_string(h) +
                 " restarted as member " + std::to_string(on(h).memberId) +
                 (restored ? " (restored its Raft state first)" : "");
  }

  void strike(const Planned& p, Record& r) {
    const int leader = leaderHost();
    int a = p.a;
    if (p.kind == Kind::kKillLeader) {
      if (leader >= 0) {
        a = leader;
      } else {
        note(r, "no leader found: struck host " + std::to_string(a));
      }
    }
    r.target = describe(a, leader);
    strikeHost_ = a;
    const bool two = p.kind == Kind::kKillTwo || p.kind == Kind::kCutOneWay ||
                     p.kind == Kind::kCut || p.kind == Kind::kSplit;
    if (two) r.target += (p.kind == Kind::kCutOneWay ? " -> " : " and ") + describe(p.b, leader);
    bool ok = true;
    switch (p.kind) {
      case Kind::kKill:
      case Kind::kKillLeader:
        on(a).kill9();
        break;
      case Kind::kKillTwo:
        on(a).kill9();
        on(p.b).kill9();
        break;
      case Kind::kRestart: {
        const auto status = on(a).leave(kLeaveLimit);
        if (!status) {
          on(a).kill9();
          note(r, "did not leave within " + std::to_string(ms(kLeaveLimit)) + " ms of SIGTERM");
        } else if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
          note(r, "left: " + ingrid::testing::describeExit(*status));
        }
        break;
      }
      case Kind::kPause:
      case Kind::kPauseLong:
        on(a).pause();
        break;
      case Kind::kIsolate:
        ok = lab_.isolate(a);
        break;
      case Kind::kCutOneWay:
        ok = lab_.cut(a, p.b, /*bothWays=*/false);
        break;
      case Kind::kCut:
        ok = lab_.cut(a, p.b, /*bothWays=*/true);
        break;
      case Kind::kSplit:
        ok = lab_.split({a, p.b});
        break;
    }
    if (!ok) note(r, "nft: " + lab_.output());
  }

  void heal(const Planned& p, Record& r) {
    const int a = strikeHost_;
    switch (p.kind) {
      case Kind::kKill:
      case Kind::kKillLeader:
      case Kind::kRestart:
        restart(a, seedsBut(a), r);
        break;
      case Kind::kKillTwo:
        restart(a, seedsBut(a, p.b), r);
        restart(p.b, seedsBut(a, p.b), r);
        break;
      case Kind::kPause:
      case Kind::kPauseLong:
        on(a).resume();
        r.outcome = "resumed";
        break;
      case Kind::kIsolate:
      case Kind::kCutOneWay:
      case Kind::kCut:
      case Kind::kSplit:
        if (!lab_.healAll()) note(r, "nft heal: " + lab_.output());
        r.outcome = "healed";
        break;
    }
  }

  // Whether the leader counts kHosts voters, every one a member of its topology.
  bool fullVoters(std::string& why) {
    const int h = leaderHost();
    if (h < 0) {
      why = "no leader";
      return false;
    }
    auto s = probe_.statusOf(on(h).address);
    const auto t = on(h).latestTopology();
    if (!s || !t) {
      why = "no status or topology from the leader";
      return false;
    }
    std::set<std::uint64_t> members;
    for (const auto& m : t->members) members.insert(m.first);
    std::size_t in = 0;
    for (const auto v : s->voters) in += members.count(v);
    why = "the leader counts " + std::to_string(s->voters.size()) + " voters, " +
          std::to_string(in) + " of them members";
    return s->voters.size() == static_cast<std::size_t>(kHosts) &&
           in == static_cast<std::size_t>(kHosts);
  }

  HostLab& lab_;
  FaultCluster& cluster_;
  GrantAudit& audit_;
  ingrid::Client& probe_;
  std::array<std::size_t, kHosts> at_{};  // host -> index of its process in cluster_
  int strikeHost_ = 0;                    // the first host the current fault struck
};

// Writes every process's whole log (stdout and stderr) to a new directory, each line stamped
// with its seconds since `begin` (the schedule's t=); returns the directory's path.
std::string keepLogs(FaultCluster& cluster, FaultClock::time_point begin) {
  char dir[] = "/tmp/ingrid-nemesis-XXXXXX";
  if (mkdtemp(dir) == nullptr) return "(mkdtemp failed)";
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const std::string path = std::string(dir) + "/process-" + std::to_string(i) + ".log";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      const std::string log = cluster[i].command() + "\n" + cluster[i].timedLog(begin);
      std::fwrite(log.data(), 1, log.size(), f);
      std::fclose(f);
    }
  }
  return dir;
}

void print(const Record& r, FaultClock::time_point begin) {
  const auto during = [](const GrantAudit::Progress& from, const GrantAudit::Progress& to) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "ok %llu failed %llu", u(to.answered - from.answered),
                  u(to.failed - from.failed));
    return std::string(buf);
  };
  std::printf(
      "[nemesis] #%d t=%.1fs %s %s hold=%lldms: %s | during: %s | settling %.1fs: %s | "
      "load before=%s after=%s safe=%s%s%s\n",
      r.number, seconds(r.struck - begin), nameOf(r.planned.kind), r.target.c_str(),
      static_cast<long long>(r.planned.hold.count()), r.outcome.c_str(),
      during(r.atStrike, r.atHeal).c_str(), seconds(r.settled - r.healed),
      during(r.atHeal, r.atSettle).c_str(), r.loadBefore ? "yes" : "no", r.loadAfter ? "yes" : "no",
      r.safeAfter ? "yes" : "no", r.problem.empty() ? "" : " PROBLEM: ", r.problem.c_str());
  std::fflush(stdout);
}

}  // namespace

TEST_CASE(
    "Nemesis: a seeded random schedule of kills, pauses and cuts on five hosts loses no grant",
    "[fault][hosts][nemesis]") {
  const std::uint64_t seed = envNumber("INGRID_NEMESIS_SEED", std::random_device{}());
  const std::uint64_t length =
      std::clamp<std::uint64_t>(envNumber("INGRID_NEMESIS_SECONDS", 30), 1, 24 * 3600);
  std::printf("[nemesis] seed %llu (INGRID_NEMESIS_SEED=%llu replays it), schedule %llu s\n",
              u(seed), u(seed), u(length));
  std::fflush(stdout);
  INFO("seed " << seed << " (INGRID_NEMESIS_SEED=" << seed << " replays it)");

  HostLab lab(kHosts);  // declared first: it outlives the processes in it
  if (!ingrid::testing::labUsable(lab)) return;
  HostLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  FaultClusterOptions o;
  o.args = {"--partitions",
            "64",
            "--workers",
            "1",
            "--backups",
            "2",
            "--failure-timeout-ms",
            std::to_string(kFailureTimeout.count())};
  o.startLimit = 30s * kSlow;
  TempDir dataDirs("ingrid-nemesis-data");
  REQUIRE_FALSE(dataDirs.path.empty());
  for (int h = 0; h < kHosts; ++h) {
    o.memberArgs.push_back(
        h % 2 == 0 ? std::vector<std::string>{"--data-dir", dataDirs.sub(std::to_string(h))}
                   : std::vector<std::string>{});
  }
  FaultCluster cluster(ingrid::testing::onHosts(lab, o));
  const std::string started = ingrid::testing::startOnHosts(cluster);
  INFO(started);
  REQUIRE(started.empty());

  ingrid::ClientOptions po;
  po.seeds = cluster.addresses();
  po.requestTimeout = 1000ms;
  ingrid::Client probe(po);
  REQUIRE(probe.start().ok());
  GrantAudit audit(cluster.addresses(), ingrid::testing::scenarioAudit("nemesis"));
  REQUIRE(audit.start().empty());
  Nemesis nemesis(lab, cluster, audit, probe);
  std::string why;
  const bool safeAtStart = nemesis.safe(kSettleLimit, why);  // five voters before the first fault
  INFO(why);
  REQUIRE(safeAtStart);

  // Every fault takes at least its gap (>= 500 ms): this many cannot run out.
  const std::vector<Planned> plan = schedule(seed, static_cast<std::size_t>(length) * 2 + 1);
  const auto begin = FaultClock::now();
  const auto end = begin + std::chrono::seconds(length);
  std::vector<Record> records;
  std::map<std::string, int> byKind;
  for (const Planned& p : plan) {
    if (FaultClock::now() + p.gap + p.hold > end) break;  // it would not end within the schedule
    Record& r = records.emplace_back();
    r.number = static_cast<int>(records.size());
    nemesis.run(p, r);
    ++byKind[nameOf(p.kind)];
    print(r, begin);
    if (!r.safeAfter) break;  // a next fault could exceed what the design survives
  }
  const auto scheduleEnd = FaultClock::now();

  // Everything is healed (each fault heals itself); the end state, then the audit's verdict.
  std::string finalWhy;
  const bool safeAtEnd = nemesis.safe(kSettleLimit, finalWhy);
  const std::vector<std::string> unserved = audit.servedWithin(kReadLimit);
  const AuditResult r = audit.finish(kReadLimit);
  const auto crashes = cluster.crashes();
  milliseconds maxLatency{0};
  for (const auto& c : r.calls) {
    maxLatency = std::max(maxLatency, std::chrono::duration_cast<milliseconds>(c.end - c.start));
  }
  // The failed calls of each fault (ended between its strike and the safe cluster after it), by
  // error, with the slowest call then: one more line for each fault that saw a failure.
  std::vector<std::map<std::string, std::uint64_t>> failures(records.size());
  std::vector<milliseconds> slowest(records.size(), 0ms);
  for (const auto& c : r.calls) {
    const auto it = std::upper_bound(records.begin(), records.end(), c.end,
                                     [](auto t, const Record& rec) { return t < rec.struck; });
    if (it == records.begin() || c.end > std::prev(it)->settled) continue;
    const auto i = static_cast<std::size_t>(std::prev(it) - records.begin());
    slowest[i] = std::max(slowest[i], std::chrono::duration_cast<milliseconds>(c.end - c.start));
    if (c.outcome == ingrid::testing::AuditCall::kError) {
      ++failures[i][ingrid::testing::errcName(c.code)];
    }
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (failures[i].empty()) continue;
    std::string codes;
    for (const auto& [code, n] : failures[i]) {
      codes += (codes.empty() ? "" : ",") + code + ":" + std::to_string(n);
    }
    std::printf("[nemesis] #%d %s: failed calls {%s}, slowest call %lld ms\n", records[i].number,
                nameOf(records[i].planned.kind), codes.c_str(),
                static_cast<long long>(slowest[i].count()));
  }
  std::string kinds;
  for (const auto& [kind, n] : byKind) {
    kinds += (kinds.empty() ? "" : " ") + kind + "=" + std::to_string(n);
  }
  std::printf(
      "[nemesis] summary: seed=%llu schedule_s=%.1f faults=%zu {%s} calls=%llu acked=%llu "
      "failed=%llu lost=%llu doubled=%llu phantom=%llu over_deadline=%llu max_latency_ms=%lld "
      "safe_at_end=%s crashes=%zu unserved=%zu\n[nemesis] audit: %s\n",
      u(seed), seconds(scheduleEnd - begin), records.size(), kinds.c_str(), u(r.summary.calls),
      u(r.summary.acked), u(r.summary.errors), u(r.summary.lost), u(r.summary.doubled),
      u(r.summary.phantom), u(r.summary.overDeadline), static_cast<long long>(maxLatency.count()),
      safeAtEnd ? "yes" : "no", crashes.size(), unserved.size(), r.summary.line().c_str());
  std::fflush(stdout);

  const bool failed = !safeAtEnd || !crashes.empty() || !unserved.empty() ||
                      r.summary.lost + r.summary.doubled + r.summary.phantom +
                              r.summary.overDeadline + r.summary.unreadable !=
                          0 ||
                      std::any_of(records.begin(), records.end(), [](const Record& rec) {
                        return !rec.problem.empty() || !rec.loadBefore || !rec.loadAfter;
                      });
  if (failed) {
    std::printf("[nemesis] seed %llu failed; every member's log is in %s\n", u(seed),
                keepLogs(cluster, begin).c_str());
    std::fflush(stdout);
  }
  for (const Record& rec : records) {
    INFO("fault #" << rec.number << " " << nameOf(rec.planned.kind) << " " << rec.target << ": "
                   << rec.problem);
    CHECK(rec.problem.empty());
    CHECK(rec.loadBefore);
    CHECK(rec.loadAfter);
    CHECK(rec.safeAfter);
  }
  INFO(finalWhy);
  INFO(r.worst());
  std::string crashText;
  for (const auto& c : crashes) crashText += c + "\n";
  INFO(crashText);
  INFO((unserved.empty() ? std::string() : unserved.front()));
  CHECK(!records.empty());
  CHECK(safeAtEnd);
  CHECK(crashes.empty());
  CHECK(unserved.empty());
  CHECK(r.summary.unreadable == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.phantom == 0);
  CHECK(r.summary.overDeadline == 0);
}
