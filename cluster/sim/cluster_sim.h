// runClusterSim: one seeded run of a whole ingrid cluster in the simulator: real NodeImpls on a
// Simulation (simulation.h) and its in-memory network (transport/sim_network.h), under an audited
// load and seeded faults, checked at every simulated instant.
//
// The run: members start (the first bootstraps, the others join it), then for `faultPhase` an
// audited load (TokenBucketAcquire of 1 token on buckets that never refill) runs while faults
// come and go: partitions of a member (both ways or one way), lost, duplicated and delayed frames,
// pauses (SIGSTOP), crashes and restarts (a new process, with its data directory or without).
// Then every fault is healed and the load goes on for `healPhase`.
// Checked after every event: at most one member may write as the primary of a partition (its
// lease valid on its own clock, its topology naming it primary, its partition not fenced).
// Checked at the end: one topology listing exactly the members that are up, every key readable,
// no acknowledged grant lost (the final state counts it) or doubled (more than the capacity), no
// caller answered past its deadline plus a slack.
// A failure names the seed, the simulated time and what broke; the same seed replays the run
// event for event (the trace hash says so).
// Threads: call runClusterSim from one thread; it runs the members on it (and on the baton
// threads the Simulation hands control to, one at a time), and returns once all have stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ingrid::sim {

struct ClusterSimOptions {
  std::uint64_t seed = 1;
  std::size_t members = 5;
  // Simulated time with faults, then without (the cluster must converge in it).
  std::chrono::milliseconds faultPhase{30000};
  std::chrono::milliseconds healPhase{20000};
  bool faults = true;
  // Each member's clock runs fast or slow by up to this many parts per million. The leases assume
  // rates within 10% (100000 ppm); past that the checker is expected to catch a double primary.
  std::int64_t maxDriftPpm = 2000;
  std::uint32_t partitions = 16;
  std::uint32_t backups = 1;
  // Audited buckets and their capacity; mean gap between two calls of the load.
  std::uint32_t keys = 64;
  std::int64_t capacity = 3;
  std::chrono::microseconds callGap{4000};
  // A directory for the members' data directories (a crash then restarts with its directory half
  // the time); empty: no data directories.
  std::string dataRoot;
  // Receives every line of the trace (events) and of the members' logs; null: none kept.
  std::function<void(std::string_view)> print;
};

struct ClusterSimReport {
  std::uint64_t seed = 0;
  std::uint64_t traceHash = 0;
  std::uint64_t events = 0;
  double simulatedSeconds = 0;
  double wallSeconds = 0;
  std::uint64_t faults = 0;
  std::uint64_t calls = 0, acked = 0, denied = 0, errors = 0, unanswered = 0;
  std::uint64_t lost = 0, doubled = 0, overDeadline = 0;
  std::uint64_t leaseChecks = 0;
  // Empty: every invariant held. Otherwise what broke, first failure only.
  std::string failure;
  // The members' last log lines (kept for a failure's report).
  std::vector<std::string> logTail;

  bool ok() const noexcept { return failure.empty(); }
  // One line: seed, verdict, hash and the counts.
  std::string line() const;
};

ClusterSimReport runClusterSim(const ClusterSimOptions& options);

}  // namespace ingrid::sim
