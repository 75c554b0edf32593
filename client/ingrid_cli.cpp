// ingrid-cli: look at and exercise an ingrid cluster through the thin client.
//
//   ingrid-cli status  --seed HOST:PORT
//   ingrid-cli acquire --seed HOST:PORT KEY N [limiter options]
//   ingrid-cli inspect --seed HOST:PORT KEY [--limiter NAME]   (alias: get)
//   ingrid-cli release --seed HOST:PORT KEY LEASE
//   ingrid-cli extend  --seed HOST:PORT KEY LEASE [--period-ms TTL]
//   ingrid-cli load    --seed HOST:PORT [load options]
#include <asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/client.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

#include "cluster/transport/messages.h"

#include "client/cli_top.h"
#include "closed_loop.h"
#include "report.h"

namespace {

constexpr const char* kUsage = R"(usage: ingrid-cli COMMAND --seed HOST:PORT [options]

Commands:
  status                 members, topology, each member's view (term, leader, lease, fenced
                         partitions), replica health; exit status 3 if the cluster is degraded.
                         --json prints it as one JSON object (docs/operations.md)
  acquire KEY N          take N units from the limiter KEY; prints granted yes|no, then the
                         answer's fields; exit status 1 if refused. With --limiter
                         concurrency the answer names a lease, held for --period-ms
  inspect KEY            the entry's state and the members that hold it (alias: get); with
                         --limiter, the state is read as that limiter's
  release KEY LEASE      release a concurrency lease; exit status 1 if it was not live
  extend KEY LEASE       extend a live concurrency lease to --period-ms from now (never
                         shortens it); exit status 1 if it was not live
  load                   a bounded load test; prints ops/s and latency percentiles
  top --metrics HOST:PORT [--metrics HOST:PORT ...]
                         a view of the cluster refreshed every second, read from each
                         member's metrics (ingrid-node --metrics): requests/s, denials/s,
                         p50 and p99, partitions, leader, lease. --iterations N stops after
                         N refreshes (default: until interrupted)
  wait cluster-safe      wait until status is healthy (every member reachable and leased,
                         every replica complete, nothing migrating), within --timeout-ms
                         (default 60000; each status request then waits at most 2 s);
                         exit status 1 if it was not

Common options:
  --version              print the version and exit
  --seed HOST:PORT       a member to reach the cluster through (repeat for several; required)
  --timeout-ms N         deadline of each request. Default: 5000
  --client-secret-file PATH
                         the client secret, read from PATH (one line; a trailing newline is
                         dropped), for members that require clients to prove it
  --tls-ca PATH          PEM file of the cluster's CA: talk TLS to the members and verify
                         their certificates against it (for members started with --tls-ca)
  --tls-cert PATH, --tls-key PATH
                         a client certificate and its key (optional; members do not ask)

Limiter options (acquire, load):
  --limiter NAME         token-bucket, gcra, fixed-window, sliding-log, sliding-window,
                         leaky-meter, leaky-shaper, concurrency or composite.
                         Default: token-bucket
  --capacity N           the limit: bucket capacity (token-bucket, leaky-meter), burst (gcra),
                         units per window (fixed-window, sliding-log: at most 4096,
                         sliding-window), queue size (leaky-shaper), units held at once
                         (concurrency: at most 4096). Default: 100
  --period-ms N          the period in milliseconds: of the refill, leak or drain, or the
                         window; a lease's time to live (concurrency). Default: 1000
  --refill N             units refilled, leaked or drained per period (token-bucket, gcra,
                         leaky-meter, leaky-shaper). Default: capacity
  --initial N            tokens of a new bucket (token-bucket only). Default: capacity
  --max-wait-ms N        reserve instead (token-bucket only; docs/token-bucket.md
                         "Reservations"): take the units now if they exist within N ms,
                         and print the delay before they are the caller's
  --warmup-ms N          warm-up (token-bucket only; docs/warm-up.md, Guava's
                         SmoothWarmingUp): pace the units at --refill per --period-ms, up
                         to --cold-factor times slower after an idle period, coming down
                         to that rate over N ms of use. No burst: --capacity is unused.
                         With --max-wait-ms, go if the turn comes within it
  --cold-factor N        how much slower a cold permit is, 1 to 1000 (with --warmup-ms).
                         Default: 3
  --band CAPACITY/PERIOD_MS
                         a bandwidth of the composite bucket (--limiter composite;
                         docs/composite-bucket.md): CAPACITY units refilled over PERIOD_MS.
                         Repeat for up to 8; a request takes from all or none. Default:
                         one band, --capacity per --period-ms
  --config-version N     the composite bucket's configuration version: a higher one
                         replaces the stored configuration. Default: 0
  --replacement RULE     as-is, proportional or reset: what a newer configuration does
                         with the tokens already there (composite). Default: proportional

Load options:
  --keys N               distinct bucket keys, each request picks one uniformly at
                         random (1 = one hot key). Default: 1
  --concurrency N        requests in flight. Default: 16
  --seconds S            duration, at most 600. Default: 5
  --batching on|off      client-side batching of hot keys. Default: off

Run 'ingrid-cli COMMAND --help' for this text.
)";

struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;

  std::string get(const std::string& name, const std::string& fallback) const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second.back();
  }
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "ingrid-cli: %s\n", message.c_str());
  std::exit(2);
}

// `text` as a whole number in [min, max], all of it: "3x", "abc", "" and a number past the range
// (even past int64) are refused, naming `what`.
long long wholeNumber(const std::string& text, const std::string& what, long long min,
                      long long max) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    fail(what + " must be a whole number from " + std::to_string(min) + " to " +
         std::to_string(max) + ", got '" + text + "'");
  }
  return v;
}

long long number(const Args& a, const std::string& name, long long fallback, long long min,
                 long long max) {
  if (!a.options.count(name)) return fallback;
  return wholeNumber(a.get(name, ""), "--" + name, min, max);
}

// The limiters --limiter names, in its order.
enum class Limiter {
  kTokenBucket,
  kGcra,
  kFixedWindow,
  kSlidingLog,
  kSlidingWindow,
  kLeakyMeter,
  kLeakyShaper,
  kConcurrency,
  kComposite
};
constexpr const char* kLimiterNames[] = {"token-bucket", "gcra",           "fixed-window",
                                         "sliding-log",  "sliding-window", "leaky-meter",
                                         "leaky-shaper", "concurrency",    "composite"};

// --limiter, and the options that apply only to some limiters refused for the others.
Limiter limiterOf(const Args& a) {
  const std::string name = a.get("limiter", "token-bucket");
  const auto* it = std::find(std::begin(kLimiterNames), std::end(kLimiterNames), name);
  if (it == std::end(kLimiterNames)) {
    std::string all;
    for (const char* n : kLimiterNames) all += (all.empty() ? "" : ", ") + std::string(n);
    fail("--limiter must be one of " + all + ", got '" + name + "'");
  }
  const auto limiter = static_cast<Limiter>(it - std::begin(kLimiterNames));
  if (a.options.count("initial") && limiter != Limiter::kTokenBucket) {
    fail("--initial applies only to --limiter token-bucket, not " + name);
  }
  if (a.options.count("max-wait-ms") && limiter != Limiter::kTokenBucket) {
    fail("--max-wait-ms applies only to --limiter token-bucket, not " + name);
  }
  for (const char* option : {"warmup-ms", "cold-factor"}) {
    if (a.options.count(option) && limiter != Limiter::kTokenBucket) {
      fail("--" + std::string(option) + " applies only to --limiter token-bucket, not " + name);
    }
  }
  if (a.options.count("cold-factor") && !a.options.count("warmup-ms")) {
    fail("--cold-factor applies only with --warmup-ms");
  }
  if (a.options.count("initial") && a.options.count("warmup-ms")) {
    fail("--initial does not apply with --warmup-ms (a warm-up limiter has no burst)");
  }
  for (const char* option : {"band", "config-version", "replacement"}) {
    if (a.options.count(option) && limiter != Limiter::kComposite) {
      fail("--" + std::string(option) + " applies only to --limiter composite, not " + name);
    }
  }
  if (a.options.count("band")) {
    for (const char* option : {"capacity", "period-ms", "refill"}) {
      if (a.options.count(option)) {
        fail("--" + std::string(option) + " does not apply with --band (each band names its own)");
      }
    }
  }
  const bool hasRate = limiter == Limiter::kTokenBucket || limiter == Limiter::kGcra ||
                       limiter == Limiter::kLeakyMeter || limiter == Limiter::kLeakyShaper ||
                       limiter == Limiter::kComposite;
  if (a.options.count("refill") && !hasRate) {
    fail("--refill does not apply to --limiter " + name +
         (limiter == Limiter::kConcurrency ? " (its lease time to live is --period-ms)"
                                           : " (its window is --period-ms)"));
  }
  return limiter;
}

// Parameters a processor would refuse are refused here, naming the reason: nothing is sent.
template <class Params>
Params checked(Params p) {
  if (auto reason = p.invalidReason()) fail("the limiter's options are invalid: " + *reason);
  return p;
}

std::int64_t capacityOf(const Args& a) { return number(a, "capacity", 100, 1, INT64_MAX); }
ingrid::Nanos periodOf(const Args& a) {
  return number(a, "period-ms", 1000, 1, INT64_MAX / 1'000'000) * 1'000'000;
}
std::int64_t rateOf(const Args& a) { return number(a, "refill", capacityOf(a), 1, INT64_MAX); }

ingrid::BucketParams bucketOf(const Args& a) {
  ingrid::BucketParams p;
  p.capacity = capacityOf(a);
  p.refillTokens = rateOf(a);
  p.refillPeriod = periodOf(a);
  if (a.options.count("initial")) p.initialTokens = number(a, "initial", 0, 0, p.capacity);
  return checked(p);
}

// --warmup-ms and --cold-factor on the bucket's rate, with --max-wait-ms (default 0).
ingrid::WarmupParams warmupOf(const Args& a) {
  ingrid::WarmupParams p;
  p.permits = rateOf(a);
  p.period = periodOf(a);
  p.warmup = number(a, "warmup-ms", 0, 1, INT64_MAX / 1'000'000) * 1'000'000;
  p.coldFactor = number(a, "cold-factor", 3, 1, ingrid::WarmupParams::kMaxColdFactor);
  p.maxWait = number(a, "max-wait-ms", 0, 0, INT64_MAX / 1'000'000) * 1'000'000;
  return checked(p);
}

// Every --band CAPACITY/PERIOD_MS (or --capacity per --period-ms, refilled by --refill), with
// --config-version and --replacement.
ingrid::CompositeParams compositeOf(const Args& a) {
  ingrid::CompositeParams p;
  auto it = a.options.find("band");
  if (it == a.options.end()) {
    p.bandwidths.push_back(ingrid::BucketParams{capacityOf(a), rateOf(a), periodOf(a), {}});
  } else {
    if (it->second.size() > ingrid::CompositeParams::kMaxBandwidths) {
      fail("--band: at most " + std::to_string(ingrid::CompositeParams::kMaxBandwidths) +
           " bands, got " + std::to_string(it->second.size()));
    }
    for (const std::string& band : it->second) {
      const auto slash = band.find('/');
      if (slash == std::string::npos) {
        fail("--band takes CAPACITY/PERIOD_MS, got '" + band + "'");
      }
      const std::string what = "--band " + band + ": ";
      const std::int64_t capacity =
          wholeNumber(band.substr(0, slash), what + "CAPACITY", 1, INT64_MAX);
      const ingrid::Nanos period =
          wholeNumber(band.substr(slash + 1), what + "PERIOD_MS", 1, INT64_MAX / 1'000'000) *
          1'000'000;
      p.bandwidths.push_back(ingrid::BucketParams::perPeriod(capacity, period));
    }
  }
  p.version = number(a, "config-version", 0, 0, INT64_MAX);
  const std::string rule = a.get("replacement", "proportional");
  if (rule == "as-is") {
    p.replacement = ingrid::Replacement::kAsIs;
  } else if (rule == "proportional") {
    p.replacement = ingrid::Replacement::kProportional;
  } else if (rule == "reset") {
    p.replacement = ingrid::Replacement::kReset;
  } else {
    fail("--replacement takes as-is, proportional or reset, got '" + rule + "'");
  }
  return checked(p);
}

// Calls f with the request for `units` on the limiter --limiter names; returns what f returns.
template <class F>
int withRequest(const Args& a, std::int64_t units, F&& f) {
  const std::int64_t capacity = capacityOf(a);
  const ingrid::Nanos period = periodOf(a);
  switch (limiterOf(a)) {
    case Limiter::kTokenBucket:
      if (a.options.count("warmup-ms")) return f(ingrid::WarmupAcquire{warmupOf(a), units});
      if (a.options.count("max-wait-ms")) {
        const ingrid::Nanos maxWait =
            number(a, "max-wait-ms", 0, 0, INT64_MAX / 1'000'000) * 1'000'000;
        return f(ingrid::TokenBucketReserve{bucketOf(a), units, maxWait});
      }
      return f(ingrid::TokenBucketAcquire{bucketOf(a), units});
    case Limiter::kGcra:
      return f(ingrid::GcraThrottle{checked(ingrid::GcraParams{capacity - 1, rateOf(a), period}),
                                    units});
    case Limiter::kFixedWindow:
      return f(ingrid::FixedWindowAcquire{checked(ingrid::WindowParams{capacity, period}), units});
    case Limiter::kSlidingLog:
      return f(
          ingrid::SlidingLogAcquire{checked(ingrid::SlidingLogParams{capacity, period}), units});
    case Limiter::kSlidingWindow:
      return f(
          ingrid::SlidingWindowAcquire{checked(ingrid::WindowParams{capacity, period}), units});
    case Limiter::kLeakyMeter:
      return f(ingrid::LeakyMeterAcquire{
          checked(ingrid::LeakyMeterParams{capacity, rateOf(a), period}), units});
    case Limiter::kLeakyShaper:
      return f(ingrid::LeakyShaperAcquire{
          checked(ingrid::LeakyShaperParams{capacity, rateOf(a), period}), units});
    case Limiter::kConcurrency:
      return f(
          ingrid::ConcurrencyAcquire{checked(ingrid::ConcurrencyParams{capacity, period}), units});
    case Limiter::kComposite:
      return f(ingrid::CompositeBucketAcquire{compositeOf(a), units});
  }
  fail("unknown limiter");
}

// "never", or whole microseconds.
std::string duration(ingrid::Nanos ns) {
  return ns == ingrid::kNever ? "never" : std::to_string(ns / 1000) + " us";
}

bool isGranted(const ingrid::AcquireAnswer& r) { return r.granted; }
bool isGranted(const ingrid::GcraAnswer& r) { return r.granted(); }
bool isGranted(const ingrid::LimitAnswer& r) { return r.granted; }
bool isGranted(const ingrid::ShaperAnswer& r) { return r.granted; }
bool isGranted(const ingrid::LeaseAnswer& r) { return r.granted; }
bool isGranted(const ingrid::ReserveAnswer& r) { return r.granted; }
bool isGranted(const ingrid::WarmupAnswer& r) { return r.granted; }
bool isGranted(const ingrid::CompositeAnswer& r) { return r.granted; }

// The answer's fields, `granted yes|no` first.
std::string describe(const ingrid::AcquireAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", remaining " +
         std::to_string(r.remaining) + ", wait " +
         (r.waitNanos == ingrid::kNever ? "never (more than the capacity)" : duration(r.waitNanos));
}
std::string describe(const ingrid::GcraAnswer& r) {
  return "granted " + std::string(r.granted() ? "yes" : "no") + ", limited " +
         (r.limited ? "yes" : "no") + ", limit " + std::to_string(r.limit) + ", remaining " +
         std::to_string(r.remaining) + ", retry after " + duration(r.retryAfter) +
         ", reset after " + duration(r.resetAfter);
}
std::string describe(const ingrid::LimitAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", limit " + std::to_string(r.limit) +
         ", remaining " + std::to_string(r.remaining) + ", retry after " + duration(r.retryAfter) +
         ", reset after " + duration(r.resetAfter);
}
std::string describe(const ingrid::ShaperAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", limit " + std::to_string(r.limit) + ", remaining " + std::to_string(r.remaining) +
         ", retry after " + duration(r.retryAfter) + ", reset after " + duration(r.resetAfter);
}

std::string describe(const ingrid::ReserveAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", remaining " + std::to_string(r.remaining);
}
std::string describe(const ingrid::WarmupAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", cost " + duration(r.cost) + ", stored " + std::to_string(r.stored);
}
std::string describe(const ingrid::CompositeAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", remaining " +
         std::to_string(r.remaining) + ", wait " +
         (r.waitNanos == ingrid::kNever ? "never (more than a capacity)" : duration(r.waitNanos)) +
         ", version " + std::to_string(r.version);
}
std::string describe(const ingrid::LeaseAnswer& r) {
  std::string text = "granted " + std::string(r.granted ? "yes" : "no") + ", lease " +
                     std::to_string(r.lease) + ", expires after " + duration(r.expiresAfter);
  if (r.limit > 0) {  // an acquire
    text += ", limit " + std::to_string(r.limit) + ", held " + std::to_string(r.held) +
            ", remaining " + std::to_string(r.remaining()) + ", retry after " +
            duration(r.retryAfter);
  } else {
    text += ", held " + std::to_string(r.held);
  }
  return text;
}

// A started client for `a`'s seeds and options, or why it could not start.
ingrid::Result<std::unique_ptr<ingrid::Client>> tryConnect(const Args& a) {
  ingrid::ClientOptions o;
  auto it = a.options.find("seed");
  if (it == a.options.end()) fail("--seed HOST:PORT is required");
  o.seeds = it->second;
  o.requestTimeout = std::chrono::milliseconds(number(a, "timeout-ms", 5000, 1, 3'600'000));
  o.connectTimeout = o.requestTimeout;
  if (a.options.count("client-secret-file")) {
    const std::string path = a.get("client-secret-file", "");
    std::ifstream in(path, std::ios::binary);
    std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    if (!in.good() && !in.eof()) secret.clear();
    if (secret.empty()) fail("--client-secret-file " + path + ": cannot read it, or it is empty");
    o.clientSecret = std::move(secret);
  }
  o.tls.caFile = a.get("tls-ca", "");
  o.tls.certificateChainFile = a.get("tls-cert", "");
  o.tls.privateKeyFile = a.get("tls-key", "");
  auto client = std::make_unique<ingrid::Client>(o);
  if (auto started = client->start(); !started) return started.error();
  return client;
}

std::unique_ptr<ingrid::Client> connect(const Args& a) {
  auto client = tryConnect(a);
  if (!client) fail(client.error().message());
  return std::move(*client);
}

// What `status` reports: the topology a client learnt, each member's own view, and the problems
// that make the cluster not healthy.
struct ClusterView {
  ingrid::TopologyPtr topology;
  std::map<ingrid::MemberId, int> primaries, backups;
  std::vector<std::pair<const ingrid::MemberInfo*, ingrid::Result<ingrid::MemberStatus>>> views;
  int healthy = 0;             // partitions with all their replicas complete by the topology
  bool migrating = false;      // replicas syncing, or a table other than the balanced one
  std::size_t incomplete = 0;  // replicas the members report incomplete
  std::vector<std::string> problems;
};

ClusterView gather(ingrid::Client& client) {
  ClusterView v;
  v.topology = client.topology();
  const ingrid::Topology& t = *v.topology;
  std::vector<int> syncing(t.table.partitionCount());
  for (const auto& r : t.syncing) {
    if (r.partition < syncing.size()) ++syncing[r.partition];
  }
  for (ingrid::PartitionId p = 0; p < t.table.partitionCount(); ++p) {
    const auto& owners = t.table.owners(p);
    for (std::size_t i = 0; i < owners.size(); ++i) ++(i == 0 ? v.primaries : v.backups)[owners[i]];
    const std::size_t want = std::min<std::size_t>(t.backups + 1, t.members.size());
    // Complete replicas: the owners that are not still receiving their snapshot.
    if (owners.size() - static_cast<std::size_t>(syncing[p]) >= want) ++v.healthy;
  }
  v.migrating =
      !t.syncing.empty() || !(t.table == ingrid::PartitionTable::balanced(
                                             t.table.partitionCount(), t.memberIds(), t.backups));
  // Each member's own view: what it has installed, the control plane as it sees it, its lease,
  // the partitions it leads that refuse writes, and the replicas it owns that are not complete.
  // The verdict comes from these reports: a cluster where any member reports an incomplete
  // replica, or any partition is unavailable, is never "healthy".
  std::map<std::pair<ingrid::PartitionId, ingrid::MemberId>, bool> incomplete;
  for (const auto& r : t.syncing) incomplete[{r.partition, r.member}] = true;
  for (const auto& m : t.members) {
    v.views.emplace_back(&m, client.statusOf(m.address));
    if (v.views.back().second) {
      for (std::uint32_t p : v.views.back().second->incomplete) incomplete[{p, m.id}] = true;
      v.incomplete += v.views.back().second->incomplete.size();
    }
  }
  int noComplete = 0;
  for (ingrid::PartitionId p = 0; p < t.table.partitionCount(); ++p) {
    const auto& owners = t.table.owners(p);
    if (std::all_of(owners.begin(), owners.end(), [&](ingrid::MemberId m) {
          return incomplete.count({p, m}) != 0;
        })) {
      ++noComplete;
    }
  }
  if (noComplete > 0) {
    v.problems.push_back(std::to_string(noComplete) + " partition(s) without a complete replica");
  }
  for (auto& [member, st] : v.views) {
    const auto& m = *member;
    if (!st) {
      v.problems.push_back("member " + std::to_string(m.id) + " unreachable");
      continue;
    }
    const auto& s = *st;
    if (s.topologyVersion != t.version) {
      v.problems.push_back("member " + std::to_string(m.id) + " is at v" +
                           std::to_string(s.topologyVersion));
    }
    if (s.memberId != m.id) {
      v.problems.push_back("the process at " + m.address + " is member " +
                           std::to_string(s.memberId) + ", not " + std::to_string(m.id));
    }
    if (s.leaseLeftMs <= 0 && v.primaries[m.id] > 0) {
      v.problems.push_back("member " + std::to_string(m.id) + " holds no lease: its " +
                           std::to_string(v.primaries[m.id]) + " partition(s) refuse writes");
    }
    if (!s.fenced.empty()) {
      v.problems.push_back(std::to_string(s.fenced.size()) + " partition(s) fenced on member " +
                           std::to_string(m.id));
    }
    if (!s.incomplete.empty()) {
      v.problems.push_back("member " + std::to_string(m.id) + " reports " +
                           std::to_string(s.incomplete.size()) + " incomplete replica(s)");
    }
    if (!s.behind.empty()) {
      v.problems.push_back(
          "member " + std::to_string(m.id) + " leads " + std::to_string(s.behind.size()) +
          " partition(s) with a backup that lacks an update (replication failing)");
    }
    if (s.leader == 0) v.problems.push_back("member " + std::to_string(m.id) + " knows no leader");
  }
  if (v.migrating) v.problems.push_back("a migration is in progress");
  return v;
}

// `s` as a JSON string literal.
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {  // control bytes, and bytes outside ASCII as Latin-1
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <class T>
std::string jsonArray(const std::vector<T>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i ? "," : "") + std::to_string(items[i]);
  }
  return out + "]";
}

// The schema is documented in docs/operations.md ("ingrid-cli status --json").
void printJson(const ClusterView& v) {
  const ingrid::Topology& t = *v.topology;
  std::string out = "{\"topologyVersion\":" + std::to_string(t.version) +
                    ",\"partitions\":" + std::to_string(t.table.partitionCount()) +
                    ",\"backups\":" + std::to_string(t.backups) +
                    ",\"leader\":" + std::to_string(t.leader) +
                    ",\"term\":" + std::to_string(t.term) +
                    ",\"healthyPartitions\":" + std::to_string(v.healthy) +
                    ",\"syncingReplicas\":" + std::to_string(t.syncing.size()) +
                    ",\"incompleteReplicas\":" + std::to_string(v.incomplete) +
                    ",\"migrating\":" + (v.migrating ? "true" : "false") + ",\"members\":[";
  for (std::size_t i = 0; i < v.views.size(); ++i) {
    const auto& [member, st] = v.views[i];
    const auto primaries = v.primaries.count(member->id) ? v.primaries.at(member->id) : 0;
    const auto backups = v.backups.count(member->id) ? v.backups.at(member->id) : 0;
    out += std::string(i ? "," : "") + "{\"id\":" + std::to_string(member->id) +
           ",\"address\":" + jsonString(member->address) +
           ",\"primaries\":" + std::to_string(primaries) +
           ",\"backups\":" + std::to_string(backups) + ",\"reachable\":" + (st ? "true" : "false");
    if (!st) {
      out += ",\"error\":" + jsonString(st.error().message()) + "}";
      continue;
    }
    const ingrid::MemberStatus& s = *st;
    out += ",\"topologyVersion\":" + std::to_string(s.topologyVersion) +
           ",\"term\":" + std::to_string(s.term) + ",\"leader\":" + std::to_string(s.leader) +
           ",\"isLeader\":" + (s.isLeader ? "true" : "false") +
           ",\"leaseLeftMs\":" + std::to_string(s.leaseLeftMs) +
           ",\"fenced\":" + jsonArray(s.fenced) + ",\"incomplete\":" + jsonArray(s.incomplete) +
           ",\"behind\":" + jsonArray(s.behind) +
           ",\"rejoining\":" + (s.rejoining ? "true" : "false") + "}";
  }
  out += "],\"healthy\":" + std::string(v.problems.empty() ? "true" : "false") + ",\"problems\":[";
  for (std::size_t i = 0; i < v.problems.size(); ++i) {
    out += (i ? "," : "") + jsonString(v.problems[i]);
  }
  std::printf("%s]}\n", out.c_str());
}

void printText(const ClusterView& v) {
  const ingrid::Topology& t = *v.topology;
  std::printf(
      "topology v%llu, %zu members, %u partitions, %u backup(s) each, control-plane leader %llu "
      "(term %llu)\n",
      static_cast<unsigned long long>(t.version), t.members.size(), t.table.partitionCount(),
      t.backups, static_cast<unsigned long long>(t.leader),
      static_cast<unsigned long long>(t.term));
  for (const auto& [member, st] : v.views) {
    const auto& m = *member;
    std::string view;
    if (!st) {
      view = "unreachable: " + st.error().message();
    } else {
      const auto& s = *st;
      view =
          "sees v" + std::to_string(s.topologyVersion) + ", term " + std::to_string(s.term) +
          ", leader " + std::to_string(s.leader) + (s.isLeader ? " (itself)" : "") +
          (s.leaseLeftMs > 0 ? ", lease " + std::to_string(s.leaseLeftMs) + " ms" : ", NO LEASE") +
          (s.fenced.empty() ? "" : ", " + std::to_string(s.fenced.size()) + " fenced") +
          (s.incomplete.empty() ? "" : ", " + std::to_string(s.incomplete.size()) + " incomplete");
    }
    const auto primaries = v.primaries.count(m.id) ? v.primaries.at(m.id) : 0;
    const auto backups = v.backups.count(m.id) ? v.backups.at(m.id) : 0;
    std::printf("  member %llu  %-21s  primary %4d  backup %4d  %s\n",
                static_cast<unsigned long long>(m.id), m.address.c_str(), primaries, backups,
                view.c_str());
  }
  std::printf(
      "replica health: %d of %u partitions have all their replicas, %zu replica(s) "
      "syncing, %zu reported incomplete%s\n",
      v.healthy, t.table.partitionCount(), t.syncing.size(), v.incomplete,
      v.migrating ? " (a migration is in progress)" : "");
  if (v.problems.empty()) {
    std::printf("cluster: healthy\n");
    return;
  }
  std::string all;
  for (const auto& p : v.problems) all += (all.empty() ? "" : "; ") + p;
  std::printf("cluster: DEGRADED: %s\n", all.c_str());
}

int status(const Args& a) {
  auto client = connect(a);
  const ClusterView v = gather(*client);
  if (a.options.count("json")) {
    printJson(v);
  } else {
    printText(v);
  }
  return v.problems.empty() ? 0 : 3;
}

// wait cluster-safe: polls the cluster's status (a fresh client each time, so a restarted seed or
// a new topology is learnt) until it is healthy, within --timeout-ms.
int waitFor(const Args& a) {
  if (a.positional.size() != 1 || a.positional[0] != "cluster-safe") {
    fail("wait takes one condition: cluster-safe");
  }
  const long long timeoutMs = number(a, "timeout-ms", 60000, 1, 86'400'000);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  std::string last = "no status yet";
  Args once = a;
  once.options["timeout-ms"] = {"2000"};  // each status request's deadline
  for (int round = 0; std::chrono::steady_clock::now() < until && round < 1'000'000; ++round) {
    auto client = tryConnect(once);
    if (!client) {
      last = client.error().message();
    } else {
      const ClusterView v = gather(**client);
      if (v.problems.empty()) {
        std::printf("cluster-safe: topology v%llu, %zu members, every replica complete\n",
                    static_cast<unsigned long long>(v.topology->version),
                    v.topology->members.size());
        return 0;
      }
      last = v.problems.front();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the polling interval
  }
  std::fprintf(stderr, "ingrid-cli: the cluster was not safe within %lld ms: %s\n", timeoutMs,
               last.c_str());
  return 1;
}

int acquire(const Args& a) {
  if (a.positional.size() != 2) fail("acquire takes KEY and N");
  const long long n = wholeNumber(a.positional[1], "acquire's N (units to take)", 1, INT64_MAX);
  limiterOf(a);  // refuse bad limiter options before connecting
  return withRequest(a, n, [&](const auto& request) {
    auto client = connect(a);
    auto r = client->invoke(a.positional[0], request);
    if (!r) fail(r.error().message());
    std::printf("%s\n", describe(*r).c_str());
    return isGranted(*r) ? 0 : 1;
  });
}

// release KEY LEASE, extend KEY LEASE: a concurrency lease's end or extension.
int leaseCommand(const Args& a, bool isRelease) {
  const std::string what = isRelease ? "release" : "extend";
  if (a.positional.size() != 2) fail(what + " takes KEY and LEASE");
  const long long lease = wholeNumber(a.positional[1], what + "'s LEASE", INT64_MIN, INT64_MAX);
  if (a.options.count("limiter") && a.get("limiter", "") != "concurrency") {
    fail(what + " applies only to --limiter concurrency");
  }
  const ingrid::Nanos ttl = periodOf(a);
  if (isRelease && a.options.count("period-ms")) fail("release takes no --period-ms");
  auto client = connect(a);
  auto r = isRelease ? client->invoke(a.positional[0], ingrid::ConcurrencyRelease{lease})
                     : client->invoke(a.positional[0], ingrid::ConcurrencyExtend{lease, ttl});
  if (!r) fail(r.error().message());
  std::printf("%s\n", describe(*r).c_str());
  return r->granted ? 0 : 1;
}

// Prints `value` read as `limiter`'s stored state; exit status 1 if it is not one.
// `warmup`: a token bucket with --warmup-ms, whose state is a warm-up limiter's.
int describeState(Limiter limiter, bool warmup, const std::string& value) {
  auto ll = [](std::int64_t v) { return static_cast<long long>(v); };
  try {
    switch (limiter) {
      case Limiter::kTokenBucket: {
        if (warmup) {
          const auto s = ingrid::decode<ingrid::WarmupState>(value);
          std::printf("warm-up: %lld stored permits, remainder %lld, next free at %lld ns\n",
                      ll(s.stored), ll(s.remainder), ll(s.nextFree));
          return 0;
        }
        const auto s = ingrid::decode<ingrid::BucketState>(value);
        std::printf("token bucket: %lld tokens, remainder %lld, refilled up to %lld ns\n",
                    ll(s.tokens), ll(s.remainder), ll(s.lastRefill));
        return 0;
      }
      case Limiter::kGcra:
      case Limiter::kLeakyShaper:
        std::printf("%s: theoretical arrival time %lld ns\n",
                    limiter == Limiter::kGcra ? "gcra" : "leaky shaper",
                    ll(ingrid::decode<std::int64_t>(value)));
        return 0;
      case Limiter::kFixedWindow: {
        const auto s = ingrid::decode<ingrid::FixedWindowState>(value);
        std::printf("fixed window: %lld granted in the window from %lld ns\n", ll(s.count),
                    ll(s.windowStart));
        return 0;
      }
      case Limiter::kSlidingLog: {
        const auto s = ingrid::decode<ingrid::SlidingLogState>(value);
        std::int64_t units = 0;
        for (const auto& rec : s.records) units += rec.count;
        std::printf("sliding log: %lld granted in %zu record(s), the newest at %lld ns\n",
                    ll(units), s.records.size(), ll(s.records.empty() ? 0 : s.records.back().at));
        return 0;
      }
      case Limiter::kSlidingWindow: {
        const auto s = ingrid::decode<ingrid::SlidingWindowState>(value);
        std::printf(
            "sliding window: %lld granted in the window from %lld ns, %lld in the one "
            "before\n",
            ll(s.current), ll(s.windowStart), ll(s.previous));
        return 0;
      }
      case Limiter::kLeakyMeter: {
        const auto s = ingrid::decode<ingrid::LeakyMeterState>(value);
        std::printf("leaky meter: level %lld, drained %lld, leaked up to %lld ns\n", ll(s.level),
                    ll(s.drained), ll(s.lastLeak));
        return 0;
      }
      case Limiter::kConcurrency: {
        const auto s = ingrid::decode<ingrid::ConcurrencyState>(value);
        std::printf("concurrency: %zu lease(s), next id %lld\n", s.leases.size(), ll(s.nextId));
        for (const auto& l : s.leases) {
          std::printf("  lease %lld: %lld unit(s), expires at %lld ns\n", ll(l.id), ll(l.units),
                      ll(l.expiresAt));
        }
        return 0;
      }
      case Limiter::kComposite: {
        const auto s = ingrid::decode<ingrid::CompositeState>(value);
        std::printf("composite: version %lld, %zu band(s)\n", ll(s.version), s.bands.size());
        for (const auto& b : s.bands) {
          std::printf("  capacity %lld per %lld ns: %lld tokens, refilled up to %lld ns\n",
                      ll(b.config.capacity), ll(b.config.refillPeriod), ll(b.level.tokens),
                      ll(b.level.lastRefill));
        }
        return 0;
      }
    }
  } catch (const std::exception& e) {
    std::printf("not a %s: %s (%zu bytes of state)\n", kLimiterNames[static_cast<int>(limiter)],
                e.what(), value.size());
  }
  return 1;
}

int inspect(const Args& a) {
  if (a.positional.size() != 1) fail("inspect takes KEY");
  if (a.options.count("limiter")) limiterOf(a);  // refused before connecting
  const std::string& key = a.positional[0];
  auto client = connect(a);
  auto r = client->invoke(key, ingrid::GetEntry{});
  if (!r) fail(r.error().message());
  const ingrid::TopologyPtr t = client->topology();
  const ingrid::PartitionId p = ingrid::partitionOf(key, t->table.partitionCount());
  std::string holders;
  for (ingrid::MemberId m : t->table.owners(p)) {
    const auto* info = t->member(m);
    holders += (holders.empty() ? "primary " : ", backup ") + std::to_string(m) + " (" +
               (info ? info->address : "?") + ")";
  }
  std::printf("key '%s': partition %u, held by %s\n", key.c_str(), p, holders.c_str());
  if (!r->exists) {
    std::printf("no entry (never used, or expired)\n");
    return 0;
  }
  std::printf("expires %s\n", r->expiresAt == ingrid::kNever
                                  ? "never"
                                  : ("at " + std::to_string(r->expiresAt) + " ns").c_str());
  if (a.options.count("limiter")) {
    return describeState(limiterOf(a), a.options.count("warmup-ms") != 0, r->value);
  }
  try {  // a token bucket?
    const auto s = ingrid::decode<ingrid::BucketState>(r->value);
    std::printf("token bucket: %lld tokens, remainder %lld, refilled up to %lld ns\n",
                static_cast<long long>(s.tokens), static_cast<long long>(s.remainder),
                static_cast<long long>(s.lastRefill));
    return 0;
  } catch (const std::exception&) {
  }
  try {  // a counter?
    std::printf("counter: %lld\n", static_cast<long long>(ingrid::decode<std::int64_t>(r->value)));
    return 0;
  } catch (const std::exception&) {
  }
  std::printf("%zu bytes of state\n", r->value.size());
  return 0;
}

// The load test for one limiter's request P, 1 unit each.
template <class P>
int runLoad(const Args& a, const P& request) {
  const int keys = static_cast<int>(number(a, "keys", 1, 1, 1'000'000));
  const int concurrency = static_cast<int>(number(a, "concurrency", 16, 1, 100'000));
  const double seconds = static_cast<double>(number(a, "seconds", 5, 1, 600));
  const std::string batching = a.get("batching", "off");
  if (batching != "on" && batching != "off") fail("--batching takes on or off");
  auto client = connect(a);
  std::vector<std::string> names;
  for (int i = 0; i < keys; ++i) names.push_back("load-" + std::to_string(i));
  ingrid::Batcher<ingrid::Client, P> batcher(*client, {});
  std::atomic<std::uint64_t> granted{0};
  auto op = [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
    // Uniform over the keys: step i of chain c draws its key from a hash of (c, i).
    const std::string& key = names[ingrid::bench::uniformIndex(chain, i, names.size())];
    auto onAnswer = [&granted, done = std::move(done)](ingrid::Result<typename P::Result> r) {
      if (r && isGranted(*r)) granted.fetch_add(1, std::memory_order_relaxed);
      done(r.ok());
    };
    if (batching == "on") {
      batcher.invokeAsync(key, request, std::move(onAnswer));
    } else {
      client->invokeAsync(key, request, std::move(onAnswer));
    }
  };
  const std::uint64_t sentBefore = client->requestsSent();
  auto result = ingrid::bench::runClosedLoop(op, concurrency, seconds);
  const std::uint64_t messages = client->requestsSent() - sentBefore;
  const std::size_t ops = result.latenciesNs.size();
  std::printf(
      "load: %s, %d key(s), %d in flight, batching %s, %.1f s: %llu granted, %llu failed, "
      "%llu messages (%.1f requests per message)\n",
      a.get("limiter", "token-bucket").c_str(), keys, concurrency, batching.c_str(), result.seconds,
      static_cast<unsigned long long>(granted.load()),
      static_cast<unsigned long long>(result.failures), static_cast<unsigned long long>(messages),
      messages ? static_cast<double>(ops + result.failures) / static_cast<double>(messages) : 0.0);
  ingrid::bench::report("load", std::move(result.latenciesNs), result.seconds);
  return 0;
}

int load(const Args& a) {
  return withRequest(a, 1, [&](const auto& request) { return runLoad(a, request); });
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("ingrid-cli %s (commit %s)\n", INGRID_VERSION, INGRID_COMMIT);
      return 0;
    }
    if (arg == "--json") {  // the one flag that takes no value
      a.options["json"].push_back("true");
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) fail(arg + " needs a value");
      a.options[arg.substr(2)].push_back(argv[++i]);
    } else if (a.command.empty()) {
      a.command = arg;
    } else {
      a.positional.push_back(arg);
    }
  }
  for (const auto& option : a.options) {
    const std::string& name = option.first;  // not a structured binding: a lambda captures it
    static const char* known[] = {"seed",        "timeout-ms",  "limiter",  "capacity",
                                  "refill",      "period-ms",   "initial",  "keys",
                                  "concurrency", "seconds",     "batching", "client-secret-file",
                                  "tls-ca",      "tls-cert",    "tls-key",  "max-wait-ms",
                                  "warmup-ms",   "cold-factor", "band",     "config-version",
                                  "replacement", "json",        "metrics",  "iterations"};
    if (std::none_of(std::begin(known), std::end(known),
                     [&](const char* k) { return name == k; })) {
      fail("unknown option --" + name + " (see --help)");
    }
  }
  if ((a.command == "status" || a.command == "load") && !a.positional.empty()) {
    fail(a.command + " takes no arguments, got '" + a.positional[0] + "'");
  }
  if (a.command != "status" && a.options.count("json")) fail("--json applies only to status");
  if (a.command == "status") return status(a);
  if (a.command == "wait") return waitFor(a);
  if (a.command == "top") {
    auto it = a.options.find("metrics");
    if (it == a.options.end()) fail("top needs --metrics HOST:PORT of each member (see --help)");
    return ingrid::cli::top(it->second, static_cast<int>(number(a, "iterations", 0, 0, 1'000'000)),
                            std::chrono::milliseconds(1000));
  }
  if (a.command == "acquire") return acquire(a);
  if (a.command == "inspect" || a.command == "get") return inspect(a);
  if (a.command == "load") return load(a);
  if (a.command == "release") return leaseCommand(a, true);
  if (a.command == "extend") return leaseCommand(a, false);
  if (a.command.empty()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  fail("unknown command '" + a.command +
       "' (commands: status, wait, top, acquire, inspect, load, release, extend; see --help)");
}
