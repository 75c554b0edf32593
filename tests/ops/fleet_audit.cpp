// fleet_audit: the grant audit (support/grant_audit.h) as a process, for scripts
// (scripts/fleet.sh): its callers acquire tokens of buckets that never refill through the members
// named by --seed, and it reports three windows of the run (calls that started in each):
//   steady   the first --steady-ms once --warm grants were acknowledged;
//   fault    from then until SIGUSR1 (the script's fault, a rolling restart, is over);
//   after    from SIGUSR1 until --after more grants were acknowledged (load after the fault).
// Prints "fleet-audit: steady done" when the fault may start; at the end one line per window
// (calls, granted, denied, failed, unknown, answers slower than 100 ms and when the slowest
// started, then bench/report.h's latency percentiles) and the audit's verdict: lost and doubled
// grants against the buckets' final state.
//
//   fleet_audit --seed HOST:PORT ... [--steady-ms 10000] [--max-fault-ms 600000] [--callers 16]
//               [--warm 200] [--after 200]
//
// Exit status: 0 when the run completed (the script judges the figures), 1 if a step did not
// happen in time (no load, no SIGUSR1 within --max-fault-ms, no grants after), 2 on bad usage.
// SIGTERM or SIGINT ends it early, reporting what ran.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "report.h"
#include "support/grant_audit.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditCall;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::FaultClock;
using ingrid::testing::GrantAudit;

namespace {

struct Args {
  std::vector<std::string> seeds;
  std::chrono::milliseconds steady{10000};
  std::chrono::milliseconds maxFault{600000};
  int callers = 16;
  std::uint64_t warm = 200;
  std::uint64_t after = 200;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    const long long n = std::strtoll(value, nullptr, 10);
    if (flag == "--seed") {
      a.seeds.emplace_back(value);
    } else if (flag == "--steady-ms" && n > 0) {
      a.steady = std::chrono::milliseconds(n);
    } else if (flag == "--max-fault-ms" && n > 0) {
      a.maxFault = std::chrono::milliseconds(n);
    } else if (flag == "--callers" && n > 0 && n <= 1024) {
      a.callers = static_cast<int>(n);
    } else if (flag == "--warm" && n > 0) {
      a.warm = static_cast<std::uint64_t>(n);
    } else if (flag == "--after" && n > 0) {
      a.after = static_cast<std::uint64_t>(n);
    } else {
      return false;
    }
  }
  return !a.seeds.empty();
}

// Waits up to `limit` for one of the blocked signals; returns it, or 0 at the limit.
int waitSignal(const sigset_t& set, std::chrono::milliseconds limit) {
  const auto deadline = FaultClock::now() + limit;
  for (auto left = limit; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - FaultClock::now())) {
    const timespec ts{static_cast<time_t>(left.count() / 1000),
                      static_cast<long>((left.count() % 1000) * 1000000)};
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno != EINTR) return 0;  // EAGAIN: the limit passed
  }
  return 0;
}

// One window's line: its calls' outcomes, then the latency percentiles of those that answered.
void reportWindow(const char* name, const AuditResult& r, FaultClock::time_point from,
                  FaultClock::time_point to) {
  std::uint64_t calls = 0, granted = 0, denied = 0, failed = 0, unknown = 0;
  std::vector<std::int64_t> latencies;
  std::uint64_t slow = 0;                         // answered calls that took over 100 ms
  FaultClock::duration slowest{0}, slowestAt{0};  // the slowest one, and its start - from
  for (const AuditCall& c : r.calls) {
    if (c.start < from || c.start >= to) continue;
    ++calls;
    if (c.outcome == AuditCall::kGranted) ++granted;
    if (c.outcome == AuditCall::kDenied) ++denied;
    if (c.outcome == AuditCall::kError) ++failed;
    if (c.unknown) ++unknown;
    if (c.outcome == AuditCall::kError) continue;
    latencies.push_back((c.end - c.start).count());
    if (c.end - c.start > 100ms) ++slow;
    if (c.end - c.start > slowest) slowest = c.end - c.start, slowestAt = c.start - from;
  }
  const double seconds = std::chrono::duration<double>(to - from).count();
  std::printf(
      "fleet-audit: window %s: %.1f s, %llu calls, %llu granted, %llu denied, %llu failed, "
      "%llu unknown; %llu answered after over 100 ms, the slowest started at +%.2f s\n",
      name, seconds, static_cast<unsigned long long>(calls),
      static_cast<unsigned long long>(granted), static_cast<unsigned long long>(denied),
      static_cast<unsigned long long>(failed), static_cast<unsigned long long>(unknown),
      static_cast<unsigned long long>(slow), std::chrono::duration<double>(slowestAt).count());
  const std::string label = std::string("fleet-audit: latency ") + name;
  ingrid::bench::report(label.c_str(), std::move(latencies), seconds > 0 ? seconds : 1);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: fleet_audit --seed HOST:PORT ... [--steady-ms N] [--max-fault-ms N] "
                 "[--callers N] [--warm N] [--after N]\n");
    return 2;
  }
  // Blocked before any thread starts, so that every thread inherits the mask and only
  // sigtimedwait below takes them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  AuditOptions o;
  o.prefix = "fleet-" + std::to_string(::getpid());
  o.callers = args.callers;
  o.fixedBuckets = 1024;
  o.fixedCapacity = 1;
  o.freshBuckets = 32;
  o.freshCapacity = 2;
  o.freshWindow = 100ms;
  o.clients = std::min<std::size_t>(4, args.seeds.size());
  GrantAudit audit(args.seeds, o);
  if (std::string failed = audit.start(); !failed.empty()) {
    std::fprintf(stderr, "fleet-audit: cannot start the clients: %s\n", failed.c_str());
    return 1;
  }
  int status = 0;
  const auto begin = FaultClock::now();
  auto steadyFrom = begin, faultFrom = begin, afterFrom = begin;
  int sig = 0;
  if (!audit.waitForGrants(args.warm, 60s)) {
    std::fprintf(stderr, "fleet-audit: fewer than %llu grants in 60 s\n",
                 static_cast<unsigned long long>(args.warm));
    status = 1;
  } else {
    steadyFrom = FaultClock::now();
    std::printf("fleet-audit: load running (%llu grants)\n",
                static_cast<unsigned long long>(args.warm));
    std::fflush(stdout);
    sig = waitSignal(set, args.steady);  // the steady window's length (or an early stop)
    faultFrom = FaultClock::now();
    if (sig == 0) {
      std::printf("fleet-audit: steady done\n");
      std::fflush(stdout);
      sig = waitSignal(set, args.maxFault);
      if (sig == 0) {
        std::fprintf(stderr, "fleet-audit: no SIGUSR1 within %lld ms\n",
                     static_cast<long long>(args.maxFault.count()));
        status = 1;
      }
    }
    afterFrom = FaultClock::now();
    if (sig == SIGUSR1 && !audit.waitForGrants(args.after, 60s)) {
      std::fprintf(stderr, "fleet-audit: fewer than %llu grants in 60 s after the fault\n",
                   static_cast<unsigned long long>(args.after));
      status = 1;
    }
  }
  const auto end = FaultClock::now();
  const AuditResult r = audit.finish(30s);
  reportWindow("steady", r, steadyFrom, faultFrom);
  reportWindow("fault", r, faultFrom, afterFrom);
  reportWindow("after", r, afterFrom, end);
  const auto& s = r.summary;
  std::printf(
      "fleet-audit: audit: lost=%llu doubled=%llu phantom=%llu unreadable=%llu failed=%llu "
      "unknown=%llu acked=%llu keys=%llu\n",
      static_cast<unsigned long long>(s.lost), static_cast<unsigned long long>(s.doubled),
      static_cast<unsigned long long>(s.phantom), static_cast<unsigned long long>(s.unreadable),
      static_cast<unsigned long long>(s.errors), static_cast<unsigned long long>(s.unknown),
      static_cast<unsigned long long>(s.acked), static_cast<unsigned long long>(s.keys));
  std::printf("fleet-audit: %s\n", s.line().c_str());
  if (s.lost || s.doubled) std::printf("%s", r.worst().c_str());
  std::fflush(stdout);
  return status;
}
