// `ingrid-cli status` and `wait cluster-safe`: what a cluster looks like from a client (its
// topology and each member's own report) and the verdict, healthy or the problems found, printed
// as text or as one JSON object (schema in docs/operations.md). Called from the main thread.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/client.h>

namespace ingrid::cli {

// What `status` reports: the topology a client learnt, each member's own view, and the problems
// that make the cluster not healthy.
struct ClusterView {
  ingrid::TopologyPtr topology;
  std::map<ingrid::MemberId, int> primaries, backups;
  std::vector<std::pair<const ingrid::MemberInfo*, ingrid::Result<ingrid::MemberStatus>>> views;
  int healthy = 0;                    // partitions with all their replicas complete by the topology
  bool migrating = false;             // replicas syncing, or a table other than the balanced one
  std::size_t incomplete = 0;         // replicas the members report incomplete
  std::vector<std::string> problems;  // empty: healthy
};

// Asks every member of `client`'s topology for its status (each within the client's request
// timeout) and judges the cluster. `views` point into the returned `topology`.
ClusterView gatherStatus(ingrid::Client& client);

// Prints `v` to stdout as one JSON object on one line.
void printStatusJson(const ClusterView& v);

// Prints `v` to stdout for a person: the topology, a line per member, replica health, the verdict.
void printStatusText(const ClusterView& v);

}  // namespace ingrid::cli
