// `ingrid-cli status`: gathers each member's report and prints the verdict, as text or JSON.
#include "client/cli_status.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "client/cli_json.h"
#include "cluster/transport/messages.h"

namespace ingrid::cli {
namespace {

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

}  // namespace

ClusterView gatherStatus(ingrid::Client& client) {
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
      !t.syncing.empty() ||
      !(t.table == ingrid::Topology::balancedFor(t.table.partitionCount(), t.members, t.backups));
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
    if (s.isLeader) {
      if (std::string why = ingrid::votersShortfall(m.id, s.voters, s.wantedVoters); !why.empty()) {
        v.problems.push_back(std::move(why));
      }
    }
    if (!s.suspects.empty()) {
      std::string ids;
      for (ingrid::MemberId x : s.suspects) ids += (ids.empty() ? "" : ", ") + std::to_string(x);
      v.problems.push_back(
          "the control plane's leader (member " + std::to_string(m.id) +
          ") may be about to remove member(s) " + ids +
          " (declared failed, not heard from, or at either end of a reported cut link)");
    }
  }
  if (v.migrating) v.problems.push_back("a migration is in progress");
  return v;
}

// The schema is documented in docs/operations.md ("ingrid-cli status --json").
void printStatusJson(const ClusterView& v) {
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
           ",\"address\":" + jsonString(member->address) + ",\"zone\":" + jsonString(member->zone) +
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
           ",\"behind\":" + jsonArray(s.behind) + ",\"voters\":" + jsonArray(s.voters) +
           ",\"suspects\":" + jsonArray(s.suspects) +
           ",\"wantedVoters\":" + jsonArray(s.wantedVoters) +
           ",\"rejoining\":" + (s.rejoining ? "true" : "false") + "}";
  }
  out += "],\"healthy\":" + std::string(v.problems.empty() ? "true" : "false") + ",\"problems\":[";
  for (std::size_t i = 0; i < v.problems.size(); ++i) {
    out += (i ? "," : "") + jsonString(v.problems[i]);
  }
  std::printf("%s]}\n", out.c_str());
}

void printStatusText(const ClusterView& v) {
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
          (s.incomplete.empty() ? "" : ", " + std::to_string(s.incomplete.size()) + " incomplete") +
          (s.suspects.empty() ? "" : ", " + std::to_string(s.suspects.size()) + " suspected");
    }
    const auto primaries = v.primaries.count(m.id) ? v.primaries.at(m.id) : 0;
    const auto backups = v.backups.count(m.id) ? v.backups.at(m.id) : 0;
    const std::string zone = m.zone.empty() ? "" : "  zone " + m.zone;
    std::printf("  member %llu  %-21s%s  primary %4d  backup %4d  %s\n",
                static_cast<unsigned long long>(m.id), m.address.c_str(), zone.c_str(), primaries,
                backups, view.c_str());
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

}  // namespace ingrid::cli
