// `ingrid-cli recover`: survey, plan, print, and (with --yes) recover. See cli_recover.h.
#include "client/cli_recover.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include "client/cli_json.h"
#include "cluster/transport/cli_options.h"
#include "cluster/transport/member_auth.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/recovery_plan.h"

namespace ingrid::cli {
namespace {

// One member that answered: where, its own view, and the topology it holds.
struct Survivor {
  std::string address;
  MemberStatus status;
  Topology topology;
};

template <class T>
std::string list(const std::vector<T>& items, const char* sep = " ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + std::to_string(i);
  return out.empty() ? "none" : out;
}

// Every member reachable from the seeds and from the topologies they hold (at most kMaxMembers
// addresses asked), each asked once for its status and topology.
std::vector<Survivor> survey(ingrid::Client& client, const std::vector<std::string>& seeds) {
  std::vector<std::string> toAsk(seeds.begin(), seeds.end());
  if (const TopologyPtr t = client.topology()) {
    for (const auto& m : t->members) toAsk.push_back(m.address);
  }
  std::set<std::string> asked;
  std::vector<Survivor> out;
  for (std::size_t i = 0; i < toAsk.size() && asked.size() < kMaxMembers; ++i) {
    if (!asked.insert(toAsk[i]).second) continue;
    auto status = client.statusOf(toAsk[i]);
    if (!status) {
      std::fprintf(stderr, "ingrid-cli: %s does not answer: %s\n", toAsk[i].c_str(),
                   status.error().message().c_str());
      continue;
    }
    auto topology = client.topologyOf(toAsk[i]);
    if (!topology) continue;
    for (const auto& m : topology->members) toAsk.push_back(m.address);
    out.push_back(Survivor{toAsk[i], std::move(*status), std::move(*topology)});
  }
  return out;
}

void printPlan(const RecoveryPlan& plan, const Survivor& base, bool json, bool yes) {
  const Topology& t = plan.topology;
  if (json) {
    std::printf(
        "{\"base_member\":%llu,\"base_version\":%llu,\"base_term\":%llu,\"version\":%llu,"
        "\"term\":%llu,\"survivors\":%s,\"lost_members\":%s,\"partitions\":%u,\"lost\":%s,"
        "\"promoted\":%s,\"incomplete\":%s,\"apply\":%s}\n",
        static_cast<unsigned long long>(base.status.memberId),
        static_cast<unsigned long long>(base.topology.version),
        static_cast<unsigned long long>(base.topology.term),
        static_cast<unsigned long long>(t.version), static_cast<unsigned long long>(t.term),
        jsonArray(plan.survivors).c_str(), jsonArray(plan.lostMembers).c_str(),
        t.table.partitionCount(), jsonArray(plan.lost).c_str(), jsonArray(plan.promoted).c_str(),
        jsonArray(plan.incomplete).c_str(), yes ? "true" : "false");
    std::fflush(stdout);
    return;
  }
  std::printf("recovery plan, from topology v%llu (term %llu) held by member %llu (%s):\n",
              static_cast<unsigned long long>(base.topology.version),
              static_cast<unsigned long long>(base.topology.term),
              static_cast<unsigned long long>(base.status.memberId), base.address.c_str());
  std::printf("  survivors (the new control plane's voters): %s\n", list(plan.survivors).c_str());
  std::printf("  members lost (removed for good; their ids are never reused): %s\n",
              list(plan.lostMembers).c_str());
  const std::size_t kept = t.table.partitionCount() - plan.lost.size();
  std::printf("  partitions kept: %zu of %u (a surviving backup becomes primary of %zu: %s)\n",
              kept, t.table.partitionCount(), plan.promoted.size(), list(plan.promoted).c_str());
  if (!plan.incomplete.empty()) {
    std::printf(
        "  partitions kept from a replica still receiving its first snapshot (all or nothing): "
        "%s\n",
        list(plan.incomplete).c_str());
  }
  std::printf(
      "  LOST: %zu partition(s) with no surviving replica restart empty (every bucket full): %s\n",
      plan.lost.size(), list(plan.lost).c_str());
  std::printf("  new topology v%llu in Raft term %llu\n",
              static_cast<unsigned long long>(t.version), static_cast<unsigned long long>(t.term));
  std::fflush(stdout);
}

// Waits (bounded) until a survivor leads a term from `term` on and has committed a topology
// after `version`; prints it. True if it did.
bool awaitLeader(ingrid::Client& client, const std::vector<Survivor>& survivors, std::uint64_t term,
                 std::uint64_t version, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const Survivor& s : survivors) {
      auto st = client.statusOf(s.address);
      if (st && st->isLeader && st->term >= term && st->topologyVersion > version) {
        std::fprintf(stderr,
                     "ingrid-cli: recovered: member %llu (%s) leads the control plane in term "
                     "%llu at topology v%llu\n",
                     static_cast<unsigned long long>(st->memberId), s.address.c_str(),
                     static_cast<unsigned long long>(st->term),
                     static_cast<unsigned long long>(st->topologyVersion));
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the polling interval
  }
  return false;
}

}  // namespace

void addRecoverOptions(CLI::App* recover, RecoverOptions& o) {
  recover->add_flag("--yes", o.yes,
                    "recover: send the plan to every survivor (without it, only print\n"
                    "the plan: a dry run that changes nothing)");
  recover->add_flag("--force", o.force,
                    "recover even though a member leads the control plane (a quorum is\n"
                    "alive: the members it leads are cut off from the survivors)");
  recover->add_flag("--json", o.json, "print the plan as one JSON object (docs/operations.md)");
  recover
      ->add_option_function<std::string>(
          "--cluster-secret-file",
          ingrid::cli::secretFileInto("--cluster-secret-file", o.clusterSecret),
          "the cluster secret, read from PATH, for members started with\n"
          "--cluster-secret-file (the request proves it)")
      ->type_name("PATH");
}

int recover(ingrid::Client& client, const std::vector<std::string>& seeds, const RecoverOptions& o,
            std::chrono::milliseconds timeout) {
  const std::vector<Survivor> answered = survey(client, seeds);
  if (answered.empty()) {
    std::fprintf(stderr, "ingrid-cli: recover: no member answered; nothing to recover onto\n");
    return 1;
  }
  // The newest committed topology: Raft terms, then versions, only grow.
  const Survivor& base =
      *std::max_element(answered.begin(), answered.end(), [](const Survivor& a, const Survivor& b) {
        return std::pair(a.topology.term, a.topology.version) <
               std::pair(b.topology.term, b.topology.version);
      });
  std::vector<Survivor> survivors;
  std::vector<MemberId> ids;
  std::uint64_t term = 0;
  for (const Survivor& s : answered) {
    term = std::max(term, s.status.term);
    const MemberInfo* m = base.topology.member(s.status.memberId);
    if (s.status.memberId == 0 || m == nullptr || s.status.rejoining) {
      std::fprintf(stderr,
                   "ingrid-cli: %s (member %llu) is not a member of topology v%llu: left out\n",
                   s.address.c_str(), static_cast<unsigned long long>(s.status.memberId),
                   static_cast<unsigned long long>(base.topology.version));
      continue;
    }
    if (std::find(ids.begin(), ids.end(), m->id) != ids.end()) continue;
    ids.push_back(m->id);
    survivors.push_back(s);
  }
  for (const Survivor& s : survivors) {
    if (s.status.isLeader && !o.force) {
      std::fprintf(stderr,
                   "ingrid-cli: recover refused: member %llu (%s) leads the control plane in term "
                   "%llu, so a quorum is alive and the cluster heals itself; recover is for a "
                   "cluster whose majority of voters is gone (--force to recover anyway)\n",
                   static_cast<unsigned long long>(s.status.memberId), s.address.c_str(),
                   static_cast<unsigned long long>(s.status.term));
      return 1;
    }
  }
  auto plan = planRecovery(base.topology, ids, term + 1);
  if (!plan) {
    std::fprintf(stderr, "ingrid-cli: recover: %s\n", plan.error().message().c_str());
    return 1;
  }
  printPlan(*plan, base, o.json, o.yes);
  if (!o.yes) {
    std::fprintf(stderr,
                 "ingrid-cli: dry run: nothing was changed; run again with --yes to "
                 "recover\n");
    return 0;
  }
  const std::string topologyBytes = encode(TopologyBody{plan->topology});
  const std::uint64_t index = plan->topology.version;
  std::size_t recovered = 0;
  for (const Survivor& s : survivors) {
    RecoverRequest req{plan->topology, plan->topology.term, index, o.force, {}};
    if (!o.clusterSecret.empty()) {
      req.proof = member_auth::recoverProof(o.clusterSecret, s.status.memberId, topologyBytes,
                                            req.term, req.index, req.force);
    }
    // A survivor that heard from a leader lately refuses as unavailable until that leader's
    // leases have surely run out (a lease and an election timeout): asked again until then.
    const auto askUntil = std::chrono::steady_clock::now() + timeout * 10;
    auto r = client.recoverRaw(s.address, encode(req), timeout);
    while (!r && r.error() == Errc::unavailable && std::chrono::steady_clock::now() < askUntil) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the retry interval
      r = client.recoverRaw(s.address, encode(req), timeout);
    }
    if (!r) {
      std::fprintf(stderr, "ingrid-cli: member %llu (%s) did not recover: %s\n",
                   static_cast<unsigned long long>(s.status.memberId), s.address.c_str(),
                   r.error().message().c_str());
      continue;
    }
    ++recovered;
    std::fprintf(stderr, "ingrid-cli: member %llu (%s) restarted its control plane\n",
                 static_cast<unsigned long long>(s.status.memberId), s.address.c_str());
  }
  if (recovered == 0) {
    std::fprintf(stderr, "ingrid-cli: recover failed: no survivor took the plan\n");
    return 1;
  }
  if (!awaitLeader(client, survivors, plan->topology.term, plan->topology.version, timeout * 10)) {
    std::fprintf(stderr,
                 "ingrid-cli: %zu of %zu survivor(s) restarted, but no leader committed a "
                 "topology after v%llu within %lld ms\n",
                 recovered, survivors.size(),
                 static_cast<unsigned long long>(plan->topology.version),
                 static_cast<long long>((timeout * 10).count()));
    return 1;
  }
  return 0;
}

}  // namespace ingrid::cli
