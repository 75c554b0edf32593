// The data plane's assembly and membership's two calls into it: prepare (fence and drain) and
// install (drop, promote, snapshot).
#include "cluster/shard/data_plane.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <future>
#include <set>
#include <tuple>

#include <asio/post.hpp>

#include "cluster/transport/timer.h"

namespace ingrid {
namespace {
using SteadyClock = std::chrono::steady_clock;
}  // namespace

DataPlane::DataPlane(DataPlaneHost& host, const DataPlaneOptions& options,
                     const ProcessorRegistry& registry, std::shared_ptr<const Clock> clock,
                     asio::io_context& net, unsigned threads, bool partitionsOnNet)
    : host_(host),
      options_(options),
      registry_(registry),
      clock_(clock),
      net_(net),
      workers_(options.partitions, threads, clock, options.expirySweepInterval,
               options.expirySweepEntries, partitionsOnNet ? &net : nullptr),
      replicas_(std::make_unique<Replica[]>(options.partitions)) {
  for (unsigned w = 0; w < workers_.threadCount(); ++w) {
    lanes_.push_back(std::make_unique<Lane>(workers_.io(w), w, registry.size()));
  }
  workers_.setDedupWindow(options.dedupWindow);
}

DataPlane::Lane* DataPlane::laneHere() noexcept {
  for (auto& lane : lanes_) {
    if (lane->round.here()) return lane.get();
  }
  return nullptr;
}

void DataPlane::markAllReady() {
  for (PartitionId p = 0; p < options_.partitions; ++p) replicas_[p].mode = ReplicaMode::kReady;
}

void DataPlane::prepare(const Topology& cur, const Topology& next,
                        std::chrono::milliseconds drainLimit, std::chrono::milliseconds fenceLimit,
                        UniqueFunction<void()> done) {
  assert(onNetworkThread());
  const MemberId self = memberId();
  std::vector<PartitionId> losing;
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    if (cur.table.primary(p) == self && next.table.primary(p) != self) losing.push_back(p);
  }
  if (losing.empty()) {
    done();
    return;
  }
  // Fence each losing partition on its worker, then wait until its in-flight replication is
  // acknowledged, so the next primary has every update before it starts serving.
  struct Drain {
    std::vector<PartitionId> partitions;
    std::size_t fencing;
    UniqueFunction<void()> done;
    Timer timer;
    SteadyClock::time_point deadline;
  };
  auto drain = std::make_shared<Drain>(
      Drain{losing, losing.size(), std::move(done), Timer(net_), steadyNow() + drainLimit});
  auto poll = std::make_shared<std::function<void()>>();
  *poll = [this, drain, poll] {
    bool idle = true;
    for (PartitionId p : drain->partitions) {
      idle = idle && replicas_[p].primary.outstanding.load(std::memory_order_acquire) == 0;
    }
    if (idle || steadyNow() >= drain->deadline) {
      auto finished = std::move(drain->done);
      *poll = nullptr;  // break the cycle
      finished();
      return;
    }
    drain->timer.expires_after(std::chrono::milliseconds(1));
    drain->timer.async_wait([poll](std::error_code) {
      if (*poll) (*poll)();
    });
  };
  const std::uint64_t version = next.version;
  for (PartitionId p : losing) {
    workers_.dispatch(p, [this, p, drain, poll, version](PartitionStore&) {
      replicas_[p].primary.fenced = true;
      replicas_[p].primary.fencedFor = version;
      asio::post(net_, [drain, poll] {
        if (--drain->fencing == 0) (*poll)();
      });
    });
  }
  // A fence is bounded by the change that set it: if that topology is not committed within
  // fenceLimit (its leader was deposed, or failed), the partitions serve again. Installing it (or
  // a newer one) releases the fence sooner (install).
  auto release = std::make_shared<Timer>(net_, fenceLimit);
  release->async_wait([this, release, losing = std::move(losing), version](std::error_code ec) {
    if (ec || host_.stopped() || topology()->version >= version) return;
    for (PartitionId p : losing) {
      workers_.dispatch(p, [this, p, version](PartitionStore&) {
        Replica& rep = replicas_[p];
        if (rep.primary.fenced && rep.primary.fencedFor == version) rep.primary.fenced = false;
      });
    }
  });
}

void DataPlane::install(const TopologyPtr& cur, const TopologyPtr& next) {
  const MemberId self = memberId();
  // Snapshots this node (as a primary in `next`) starts: every syncing replica that is new, whose
  // snapshot was restarted (a new `since`), or that was another primary's to serve.
  std::vector<std::vector<MemberId>> snapshots(options_.partitions);
  {
    std::set<std::tuple<PartitionId, MemberId, std::uint64_t>> underway;
    for (const SyncingReplica& r : cur->syncing) {
      if (cur->table.primary(r.partition) == self) underway.emplace(r.partition, r.member, r.since);
    }
    for (const SyncingReplica& r : next->syncing) {
      if (r.partition >= options_.partitions || next->table.primary(r.partition) != self) continue;
      if (underway.count({r.partition, r.member, r.since}) == 0) {
        snapshots[r.partition].push_back(r.member);
      }
    }
  }
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    const bool wasOwner = cur->table.isOwner(p, self);
    const bool isOwner = next->table.isOwner(p, self);
    if (!wasOwner && !isOwner) continue;
    workers_.dispatch(p, [this, p, next, self, wasOwner, isOwner,
                          to = std::move(snapshots[p])](PartitionStore& store) {
      Replica& rep = replicas_[p];
      if (!isOwner || next->table.primary(p) != self) {
        pruneLagging(p, [](MemberId) { return false; });  // lags behind no primary of ours
      } else {
        pruneLagging(p, [&](MemberId m) { return next->table.isOwner(p, m); });
      }
      if (!isOwner) {  // moved away: drop it
        if (wasOwner) store.clear();
        rep.mode = ReplicaMode::kEmpty;
        rep.seq = 0;
        rep.lastEpoch = 0;
        rep.backup.staging = {};
        rep.backup.stagingId = 0;
        rep.backup.ignoredSeq = 0;
        rep.backup.ignoredEpoch = 0;
        rep.backup.syncedEpoch = 0;
        rep.primary.fenced = false;
        return;
      }
      if (next->table.primary(p) != self) {
        // The change it was for is in.
        if (rep.primary.fencedFor <= next->version) rep.primary.fenced = false;
        return;
      }
      rep.primary.fenced = false;
      // A primary serves what it holds: only a partition that lost every replica (it restarts
      // empty) has a primary that was not a complete replica. A snapshot it was staging (it was
      // resyncing, and kept its complete copy meanwhile) is dropped.
      rep.mode = ReplicaMode::kReady;
      rep.backup.staging = {};
      rep.backup.stagingId = 0;
      for (MemberId m : to) sendSnapshot(p, store, m, next->version);
    });
  }
}

std::vector<std::pair<std::string, Entry>> DataPlane::TEST_partitionEntries(PartitionId p) {
  std::promise<std::vector<std::pair<std::string, Entry>>> got;
  auto answer = got.get_future();
  workers_.post(p, [this, &got](PartitionStore& store) {
    std::vector<std::pair<std::string, Entry>> out;
    store.forEach(clock_->now(), [&](std::string_view k, EntryView e) {
      out.emplace_back(std::string(k), Entry{std::string(e.value), e.expiresAt});
    });
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    got.set_value(std::move(out));
  });
  return answer.get();
}

std::uint64_t DataPlane::TEST_partitionSeq(PartitionId p) {
  std::promise<std::uint64_t> got;
  auto answer = got.get_future();
  workers_.post(p, [this, p, &got](PartitionStore&) { got.set_value(replicas_[p].seq); });
  return answer.get();
}

}  // namespace ingrid
