// `ingrid-cli recover`: the survivors of a lost quorum form a new control plane from the newest
// committed topology one of them holds (docs/operations.md, "Recovery after a lost quorum").
// It asks every member it can reach (the seeds, and the members their topologies list) for its
// status and topology, plans the recovery (cluster/transport/recovery_plan.h) and prints what is
// kept and what is lost; only with --yes does it send the plan (kRecover) to every survivor and
// wait for their new leader. Called from the main thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ingrid/client.h>

namespace ingrid::cli {

struct RecoverOptions {
  bool yes = false;           // act; without it, print the plan only (a dry run)
  bool force = false;         // even while a member leads (a quorum is alive)
  bool json = false;          // the plan as one JSON object on stdout
  std::string clusterSecret;  // --cluster-secret-file: proves the request to the members
};

// Adds --yes, --force, --json and --cluster-secret-file to `recover`.
void addRecoverOptions(CLI::App* recover, RecoverOptions& o);

// Runs the command through `client` (started on `seeds`); each request waits up to `timeout`,
// and the new leader is awaited up to 10 x `timeout`. Exit status: 0 planned (dry run) or
// recovered, 1 refused or failed (the reason on stderr).
int recover(ingrid::Client& client, const std::vector<std::string>& seeds, const RecoverOptions& o,
            std::chrono::milliseconds timeout);

}  // namespace ingrid::cli
