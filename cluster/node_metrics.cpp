// NodeImpl: what an operator reads of a running member: its metrics in Prometheus's text format
// (built from prometheus-cpp's MetricFamily and written by its TextSerializer), and the verdicts
// of its probes (liveness, readiness, cluster safety). Called from any thread but the node's own
// (a scrape's): what the network thread owns is read there, what a worker owns on that worker,
// each with a bounded wait; the request path's cells are read in place (request_metrics.h).
#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <asio/post.hpp>

#include "cluster/build_info.h"
#include "cluster/node_impl.h"
#include "cluster/shard/request_metrics.h"

namespace ingrid {
namespace {

constexpr std::chrono::milliseconds kProbeWait{1000};

// Why member `s` reports that the cluster is not safe to lose a member: an incomplete replica
// there, a backup behind on a partition it leads, and on the control plane's leader a member it
// may be about to remove or a voter it lacks; empty if none.
std::string reportVerdict(const MemberStatusBody& s) {
  const std::string member = "member " + std::to_string(s.memberId);
  if (!s.incomplete.empty()) {
    return member + " reports " + std::to_string(s.incomplete.size()) +
           " incomplete replicas (first: partition " + std::to_string(s.incomplete.front()) + ")";
  }
  if (!s.behind.empty()) {
    return member + " leads " + std::to_string(s.behind.size()) +
           " partitions with a backup that lacks an update (first: " +
           std::to_string(s.behind.front()) + "): replication is failing";
  }
  if (!s.suspects.empty()) {
    return "the control plane's leader (" + member + ") may be about to remove member " +
           std::to_string(s.suspects.front()) + (s.suspects.size() > 1 ? " and others" : "") +
           " (declared failed, not heard from, or at either end of a reported cut link)";
  }
  return s.isLeader ? votersShortfall(s.memberId, s.voters, s.wantedVoters) : std::string();
}

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily family(std::string name, std::string help, MetricType type) {
  return MetricFamily{std::move(name), std::move(help), type, {}};
}

ClientMetric labelled(std::vector<ClientMetric::Label> labels) {
  ClientMetric m;
  m.label = std::move(labels);
  return m;
}

// One unlabelled sample of `type` named `name`.
void single(std::vector<MetricFamily>& out, std::string name, std::string help, MetricType type,
            double value) {
  MetricFamily f = family(std::move(name), std::move(help), type);
  ClientMetric m;
  (type == MetricType::Counter ? m.counter.value : m.gauge.value) = value;
  f.metric.push_back(std::move(m));
  out.push_back(std::move(f));
}

void gauge(std::vector<MetricFamily>& out, std::string name, std::string help, double value) {
  single(out, std::move(name), std::move(help), MetricType::Gauge, value);
}

void counter(std::vector<MetricFamily>& out, std::string name, std::string help, double value) {
  single(out, std::move(name), std::move(help), MetricType::Counter, value);
}

template <class Total>
ClientMetric histogram(const Total& t, double scale, std::vector<ClientMetric::Label> labels) {
  ClientMetric m = labelled(std::move(labels));
  const auto& bounds = Total::bounds();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    m.histogram.bucket.push_back(
        ClientMetric::Bucket{t.cumulative[i], static_cast<double>(bounds[i]) * scale});
  }
  m.histogram.bucket.push_back(
      ClientMetric::Bucket{t.cumulative.back(), std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = t.count();
  m.histogram.sample_sum = static_cast<double>(t.sum) * scale;
  return m;
}

}  // namespace

NodeImpl::Gauges NodeImpl::gaugesHere() const {
  Gauges g;
  g.status = ownStatus();
  const TopologyPtr t = topology();
  g.members = t->members.size();
  const MemberId self = g.status.memberId;
  const std::size_t full = std::min<std::size_t>(t->backups + 1, t->members.size());
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    const auto& owners = t->table.owners(p);
    bool syncing = false;
    for (MemberId m : owners) syncing = syncing || t->syncingReplica(p, m) != nullptr;
    if (syncing || owners.size() > full) ++g.migrationsPending;
    if (self == 0 || !t->table.isOwner(p, self)) continue;
    const bool primary = t->table.primary(p) == self;
    const char* state = "complete";
    if (!data_->complete(p)) {
      state = "syncing";
    } else if (primary && data_->fenced(p)) {
      state = "fenced";
    } else if (owners.size() < full) {
      state = "degraded";
    }
    ++g.partitions[{primary ? "primary" : "backup", state}];
  }
  if (transport_) {
    if (const auto inbound = transport_->shared().inbound) g.accepted = inbound->load();
    g.memberLinks = peers_.size();
  }
  return g;
}

std::optional<NodeImpl::Gauges> NodeImpl::gauges() {
  if (!running()) return std::nullopt;
  if (!transport_) return gaugesHere();  // no network thread: nothing runs concurrently with it
  auto answer = std::make_shared<std::promise<Gauges>>();
  std::future<Gauges> got = answer->get_future();
  asio::post(netIo_, [this, answer] { answer->set_value(gaugesHere()); });
  if (!waitFor(got, steadyNow() + kProbeWait)) return std::nullopt;
  return got.get();
}

std::string NodeImpl::metricsText() {
  std::vector<MetricFamily> out;
  const std::size_t processors = registry_.size();
  RequestMetricsTotal requests(processors);
  if (data_) data_->addMetrics(requests);

  MetricFamily total = family("ingrid_requests_total",
                              "Requests run on this member as primary, by processor and outcome "
                              "(granted, denied, ok, or an error code's name)",
                              MetricType::Counter);
  MetricFamily near =
      family("ingrid_near_limit_total", "Requests granted with less than 20% of the limit left",
             MetricType::Counter);
  MetricFamily duration = family("ingrid_request_duration_seconds",
                                 "Time from a request's start on its primary's worker to its "
                                 "answer, replication included",
                                 MetricType::Histogram);
  for (std::size_t p = 0; p < processors; ++p) {
    const std::string& name = registry_.nameAt(p);
    for (std::size_t o = 0; o < RequestMetrics::kOutcomes; ++o) {
      const std::uint64_t n = requests.outcomes[p * RequestMetrics::kOutcomes + o];
      // Every processor's granted and denied are listed from the start (rate() needs a zero);
      // other outcomes once they happen, so the series stay few.
      if (n == 0 && o != RequestMetrics::kGranted && o != RequestMetrics::kDenied) continue;
      ClientMetric m =
          labelled({{"processor", name}, {"outcome", std::string(RequestMetrics::outcomeName(o))}});
      m.counter.value = static_cast<double>(n);
      total.metric.push_back(std::move(m));
    }
    ClientMetric m = labelled({{"processor", name}});
    m.counter.value = static_cast<double>(requests.nearLimit[p]);
    near.metric.push_back(std::move(m));
    duration.metric.push_back(histogram(requests.duration[p], 1e-9, {{"processor", name}}));
  }
  out.push_back(std::move(total));
  out.push_back(std::move(near));
  out.push_back(std::move(duration));

  MetricFamily ack = family("ingrid_replication_ack_duration_seconds",
                            "Time from sending a replication batch to a backup to its answer",
                            MetricType::Histogram);
  ack.metric.push_back(histogram(requests.replicationAck, 1e-9, {}));
  out.push_back(std::move(ack));
  MetricFamily batch =
      family("ingrid_replication_updates_per_batch",
             "Updates in each replication batch sent to a backup", MetricType::Histogram);
  batch.metric.push_back(histogram(requests.updatesPerBatch, 1.0, {}));
  out.push_back(std::move(batch));

  counter(out, "ingrid_resyncs_total",
          "Times a replica here missed an update and waited for a snapshot",
          static_cast<double>(data_ ? data_->resyncs() : 0));

  counter(out, "ingrid_late_requests_total",
          "Requests that arrived after their deadline (plus the clock skew "
          "allowed): refused, not run (copies delayed in transit)",
          static_cast<double>(data_ ? data_->lateRequests() : 0));

  MetricFamily refusals = family("ingrid_refusals_total", "Frames refused at admission, by reason",
                                 MetricType::Counter);
  for (std::size_t r = 0; r < refusals_.size(); ++r) {
    ClientMetric m = labelled({{"reason", std::string(verdictName(static_cast<Verdict>(r + 1)))}});
    m.counter.value = static_cast<double>(refusals_[r].load(std::memory_order_relaxed));
    refusals.metric.push_back(std::move(m));
  }
  out.push_back(std::move(refusals));

  counter(out, "ingrid_lease_lapses_total",
          "Times this member's primary lease ran out before a renewal came: its partitions "
          "refused writes until then",
          static_cast<double>(lease_.lapses()));

  counter(out, "ingrid_degraded_writes_total",
          "Writes acknowledged with fewer copies than the cluster could "
          "hold (after a failure, until the re-sync)",
          static_cast<double>(degradedWrites()));

  if (const std::optional<Gauges> g = gauges()) {
    gauge(out, "ingrid_members", "Members in the topology this member routes by",
          static_cast<double>(g->members));
    gauge(out, "ingrid_raft_term", "The control plane's current term here",
          static_cast<double>(g->status.term));
    gauge(out, "ingrid_raft_leader_id", "The control plane's leader as this member knows it",
          static_cast<double>(g->status.leader));
    gauge(out, "ingrid_topology_version", "Version of the topology this member routes by",
          static_cast<double>(g->status.topologyVersion));
    gauge(out, "ingrid_lease_remaining_seconds", "How long this member's primary lease still runs",
          static_cast<double>(g->status.leaseLeftMs) / 1000.0);
    gauge(out, "ingrid_migrations_pending",
          "Partitions with a replica still receiving its snapshot, or more owners than the "
          "balanced table (a change under way)",
          static_cast<double>(g->migrationsPending));
    MetricFamily parts = family(
        "ingrid_partitions", "Partitions this member owns, by role and state", MetricType::Gauge);
    for (const char* role : {"primary", "backup"}) {
      for (const char* state : {"complete", "syncing", "fenced", "degraded"}) {
        ClientMetric m = labelled({{"role", role}, {"state", state}});
        const auto it = g->partitions.find({role, state});
        m.gauge.value = it == g->partitions.end() ? 0.0 : static_cast<double>(it->second);
        parts.metric.push_back(std::move(m));
      }
    }
    out.push_back(std::move(parts));
    MetricFamily conns = family("ingrid_connections",
                                "Connections: accepted on this member's ports (clients' and "
                                "members'), and links this member keeps to other members",
                                MetricType::Gauge);
    conns.metric.push_back(labelled({{"kind", "accepted"}}));
    conns.metric.back().gauge.value = static_cast<double>(g->accepted);
    conns.metric.push_back(labelled({{"kind", "member_links"}}));
    conns.metric.back().gauge.value = static_cast<double>(g->memberLinks);
    out.push_back(std::move(conns));
  }
  const PartitionWorkers::Census census =
      data_ && running() ? data_->census(kProbeWait) : PartitionWorkers::Census{};
  gauge(out, "ingrid_store_entries", "Entries held here (as primary or backup)",
        static_cast<double>(census.entries));
  gauge(out, "ingrid_dedup_records", "Exactly-once records held here",
        static_cast<double>(census.dedupRecords));

  MetricFamily build = family("ingrid_build_info", "The build of this member", MetricType::Gauge);
  build.metric.push_back(labelled({{"version", buildVersion()}, {"commit", buildCommit()}}));
  build.metric.back().gauge.value = 1;
  out.push_back(std::move(build));
  // The calls this node's embedded invokes made (ingrid_client_*), after the member's own.
  return prometheus::TextSerializer().Serialize(out) + callMetricsText(router_.metrics(), false);
}

Probe NodeImpl::liveness() {
  if (!running()) return {false, "the node is not running"};
  if (transport_) {
    auto turned = std::make_shared<std::promise<void>>();
    std::future<void> got = turned->get_future();
    asio::post(netIo_, [turned] { turned->set_value(); });
    if (!waitFor(got, steadyNow() + kProbeWait)) {
      return {false, "the network thread's event loop did not turn within " +
                         std::to_string(kProbeWait.count()) + " ms"};
    }
  }
  const PartitionWorkers::Census census = data_->census(kProbeWait);
  if (census.answered < census.workers) {
    return {false, std::to_string(census.workers - census.answered) + " of " +
                       std::to_string(census.workers) +
                       " partition workers' event loops did not turn within " +
                       std::to_string(kProbeWait.count()) + " ms"};
  }
  return {true, "event loops turning"};
}

Probe NodeImpl::readiness() {
  if (stopCalled_.load()) return {false, "the node is leaving the cluster (stopping)"};
  const std::optional<Gauges> g = gauges();
  if (!g) return {false, "the node is not running, or its network thread did not answer"};
  const MemberStatusBody& s = g->status;
  if (s.memberId == 0 || s.rejoining) return {false, "not a member (joining or rejoining)"};
  if (transport_ && s.leaseLeftMs <= 0) {
    return {false, "member " + std::to_string(s.memberId) +
                       " holds no primary lease (no renewal from the control plane's leader)"};
  }
  if (!s.incomplete.empty()) {
    return {false, "member " + std::to_string(s.memberId) + " has " +
                       std::to_string(s.incomplete.size()) +
                       " partitions it owns not yet installed (first: " +
                       std::to_string(s.incomplete.front()) + ")"};
  }
  return {true, "member " + std::to_string(s.memberId) + " is serving"};
}

Probe NodeImpl::clusterSafe() {
  const std::optional<Gauges> g = gauges();
  if (!g) return {false, "the node is not running, or its network thread did not answer"};
  if (g->status.memberId == 0 || g->status.rejoining) {
    return {false, "this node is not a member (joining or rejoining): it cannot tell"};
  }
  if (g->migrationsPending > 0) {
    return {false, std::to_string(g->migrationsPending) + " partitions are migrating"};
  }
  if (std::string why = reportVerdict(g->status); !why.empty()) {
    return {false, why};
  }
  if (!transport_) return {true, "one member, nothing migrating"};
  // Every other member's own report: the topology says a replica is complete once it synced,
  // but a replica that missed an update since is resyncing, which only its member knows.
  struct Gather {
    std::promise<std::string> done;  // empty: every member reports every replica complete
    std::size_t left = 0;
    std::string verdict;
  };
  auto gather = std::make_shared<Gather>();
  std::future<std::string> got = gather->done.get_future();
  asio::post(netIo_, [this, gather] {
    const TopologyPtr t = topology();
    std::vector<const MemberInfo*> others;
    for (const MemberInfo& m : t->members) {
      if (m.id != memberId()) others.push_back(&m);
    }
    gather->left = others.size();
    if (others.empty()) {
      gather->done.set_value({});
      return;
    }
    for (const MemberInfo* m : others) {
      std::shared_ptr<Peer> peer = peerFor(m->id, m->address);
      auto answer = [gather, id = m->id](Result<Frame> r) {
        if (gather->verdict.empty()) {
          if (!r) {
            gather->verdict =
                "member " + std::to_string(id) + " did not report: " + r.error().message();
          } else {
            try {
              gather->verdict = reportVerdict(decode<MemberStatusBody>(r->body));
            } catch (const std::exception& e) {
              gather->verdict =
                  "member " + std::to_string(id) + "'s status does not decode: " + e.what();
            }
          }
        }
        if (--gather->left == 0) gather->done.set_value(gather->verdict);
      };
      if (!peer) {
        answer(Error(Errc::unreachable, "no link"));
        continue;
      }
      peer->request(MessageType::kStatus, t->version, {}, kProbeWait, std::move(answer));
    }
  });
  if (!waitFor(got, steadyNow() + 2 * kProbeWait)) {
    return {false, "the members' reports did not all come within " +
                       std::to_string(2 * kProbeWait.count()) + " ms"};
  }
  const std::string why = got.get();
  if (!why.empty()) return {false, why};
  return {true, std::to_string(g->members) + " members, every replica complete, nothing migrating"};
}

}  // namespace ingrid
