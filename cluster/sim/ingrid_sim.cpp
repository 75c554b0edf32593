// ingrid-sim: runs seeded simulations of a whole cluster (cluster_sim.h) and reports each seed
// and a summary; exit status 1 if any seed failed, naming how to replay it.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cluster/sim/cluster_sim.h"
#include "cluster/sim/simulation.h"

// Pointer values, and with them absl's per-process hash seed and every order by address, come
// from the address space's layout: the simulator runs without ASLR, so that they repeat from run
// to run (re-executing itself once with ADDR_NO_RANDOMIZE, as `setarch -R` does).
void withoutAddressRandomization(char** argv) {
  const int persona = personality(0xffffffff);
  if (persona != -1 && (persona & ADDR_NO_RANDOMIZE) != 0) return;
  if (persona != -1 && personality(static_cast<unsigned long>(persona) | ADDR_NO_RANDOMIZE) != -1) {
    execv("/proc/self/exe", argv);  // returns only on failure
  }
  std::fprintf(stderr,
               "ingrid-sim: could not turn address randomization off (personality: %s); a "
               "seed may not replay in another process\n",
               std::strerror(errno));
}

int main(int argc, char** argv) {
  withoutAddressRandomization(argv);
  ingrid::sim::setFatalSink([](std::string_view what) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(what.size()), what.data());
  });
  // stdout's buffer allocated now, not by the first line a run prints (--trace prints during
  // the run, which would otherwise move the heap under it).
  static char outBuffer[1 << 16];
  std::setvbuf(stdout, outBuffer, _IOFBF, sizeof outBuffer);
  CLI::App app{"ingrid-sim: a seeded, deterministic simulation of an ingrid cluster under faults"};
  std::uint64_t first = 1;
  std::uint64_t seeds = 1;
  ingrid::sim::ClusterSimOptions o;
  double faultSeconds = 30, healSeconds = 20;
  bool trace = false, replay = false, noFaults = false;
  std::string dataRoot;
  app.add_option("--seed", first, "First seed")->capture_default_str();
  app.add_option("--seeds", seeds, "How many seeds, from --seed on")->capture_default_str();
  app.add_option("--members", o.members, "Members of the cluster")->capture_default_str();
  app.add_option("--fault-seconds", faultSeconds, "Simulated seconds with faults")
      ->capture_default_str();
  app.add_option("--heal-seconds", healSeconds, "Simulated seconds after the faults heal")
      ->capture_default_str();
  app.add_option("--drift-ppm", o.maxDriftPpm, "Largest clock drift of a member, in ppm")
      ->capture_default_str();
  app.add_option("--data-dir", dataRoot,
                 "Give members data directories under this folder (crashes may keep them)");
  app.add_flag("--no-faults", noFaults, "Run the load without faults");
  app.add_flag("--trace", trace, "Print every event and every member's log line");
  app.add_flag("--check-replay", replay, "Run each seed twice; fail if the traces differ");
  CLI11_PARSE(app, argc, argv);
  if (o.maxDriftPpm < 0 || o.maxDriftPpm >= 1'000'000) {
    std::fprintf(stderr, "ingrid-sim: --drift-ppm %lld is out of range: 0 to 999999\n",
                 static_cast<long long>(o.maxDriftPpm));
    return 2;
  }
  // What the replay command must repeat besides the seed.
  std::string replayArgs;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || name == "--seed" || name == "--seeds" || name == "--trace" ||
        name == "--check-replay" || name == "--help") {
      continue;
    }
    replayArgs += " " + name;
    if (name == "--no-faults") continue;  // a flag: no value
    for (const std::string& v : opt->results()) replayArgs += " " + v;
  }
  o.faultPhase = std::chrono::milliseconds(static_cast<std::int64_t>(faultSeconds * 1000));
  o.healPhase = std::chrono::milliseconds(static_cast<std::int64_t>(healSeconds * 1000));
  o.faults = !noFaults;
  if (trace)
    o.print = [](std::string_view line) {
      std::printf("%.*s\n", static_cast<int>(line.size()), line.data());
    };

  // Each run happens in a child forked from this process as it is now, so that a seed's run
  // does not depend on the runs before it in the same process (the heap they left behind): a seed
  // of a batch replays alone.
  struct Outcome {
    bool ok = false;
    std::uint64_t hash = 0, events = 0;
    double simulated = 0, wall = 0;
  };
  const auto runInChild = [&](bool print) {
    Outcome out;
    int fds[2];
    if (pipe(fds) != 0) return out;
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const ingrid::sim::ClusterSimReport r = ingrid::sim::runClusterSim(o);
      if (print) {
        std::printf("%s\n", r.line().c_str());
        if (!r.ok()) {
          std::printf("  failure: %s\n", r.failure.c_str());
          for (const std::string& line : r.logTail) std::printf("  log: %s\n", line.c_str());
          std::printf("  replay: scripts/simulate.sh --seed %llu%s --trace\n",
                      static_cast<unsigned long long>(o.seed), replayArgs.c_str());
        }
      }
      std::fflush(stdout);
      const Outcome mine{r.ok(), r.traceHash, r.events, r.simulatedSeconds, r.wallSeconds};
      const ssize_t written = write(fds[1], &mine, sizeof mine);
      _exit(written == static_cast<ssize_t>(sizeof mine) ? 0 : 3);
    }
    close(fds[1]);
    if (pid > 0) {
      Outcome got;
      if (read(fds[0], &got, sizeof got) == static_cast<ssize_t>(sizeof got)) out = got;
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out.ok = false;
    }
    close(fds[0]);
    return out;
  };

  std::uint64_t failed = 0;
  double simulated = 0, wall = 0;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    o.seed = seed;
    if (!dataRoot.empty()) {
      o.dataRoot = dataRoot + "/seed-" + std::to_string(seed);
      std::filesystem::remove_all(o.dataRoot);
      std::filesystem::create_directories(o.dataRoot);
    }
    const Outcome r = runInChild(true);
    simulated += r.simulated;
    wall += r.wall;
    bool ok = r.ok;
    if (ok && replay) {
      if (!o.dataRoot.empty()) {
        std::filesystem::remove_all(o.dataRoot);
        std::filesystem::create_directories(o.dataRoot);
      }
      const Outcome again = runInChild(false);
      if (again.hash != r.hash || again.events != r.events) {
        ok = false;
        std::printf("  replay of seed %llu differs: hash %016llx, %llu events\n",
                    static_cast<unsigned long long>(seed),
                    static_cast<unsigned long long>(again.hash),
                    static_cast<unsigned long long>(again.events));
      } else {
        std::printf("  replay of seed %llu: the same trace (hash %016llx, %llu events)\n",
                    static_cast<unsigned long long>(seed),
                    static_cast<unsigned long long>(again.hash),
                    static_cast<unsigned long long>(again.events));
      }
    }
    if (!ok) ++failed;
    std::fflush(stdout);
  }
  std::printf(
      "simulated %llu seeds of %zu members: %llu failed; %.0f simulated s in %.1f wall s "
      "(%.0f simulated s per wall s)\n",
      static_cast<unsigned long long>(seeds), o.members, static_cast<unsigned long long>(failed),
      simulated, wall, wall > 0 ? simulated / wall : 0.0);
  return failed == 0 ? 0 : 1;
}
