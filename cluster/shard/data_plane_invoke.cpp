// The primary's invoke path: Invoke requests admitted and run on their partition's worker, the
// dedup table's answers (records, parked copies, barriers for inherited records), and each change
// numbered, encoded and handed to replication (data_plane_replicate.cpp).
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <tuple>
#include <utility>

#include <ingrid/string_pool.h>
#include "cluster/shard/data_plane.h"
#include "cluster/transport/runtime.h"
#include "grid/block_cache.h"

namespace ingrid {
namespace {

std::string partitionName(PartitionId p) { return "partition " + std::to_string(p); }

}  // namespace

void DataPlane::countRequest(PartitionId p, std::size_t processor, std::size_t outcome,
                             bool nearLimit, std::chrono::steady_clock::time_point started) {
  if (processor >= registry_.size()) return;
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(steadyNow() - started).count();
  lanes_[workers_.workerOf(p)]->metrics.count(
      processor, outcome, nearLimit, static_cast<std::uint64_t>(std::max<long long>(nanos, 0)));
}

void DataPlane::addMetrics(RequestMetricsTotal& into) const {
  for (const auto& lane : lanes_) into.add(lane->metrics);
}

void DataPlane::execute(PartitionId p, PartitionStore& store, std::string_view key,
                        ErasedProcessorFn fn, std::size_t processor, std::string_view args,
                        const RequestId& id, std::chrono::steady_clock::time_point deadline,
                        RawCompletion done) {
  const auto steadyNow = ingrid::steadyNow();
  // Counted as it is answered here (a refusal, or a run that needs no replication); a redirect
  // (not_owner) is not: the request is counted where it is served.
  const auto answer = [&](Result<std::string> r, ProcessorVerdict verdict = {}) {
    if (r.ok() || r.error() != Errc::not_owner) {
      countRequest(
          p, processor,
          r.ok() ? RequestMetrics::outcomeOf(verdict) : RequestMetrics::outcomeOf(r.error()),
          r.ok() && verdict.nearLimit, steadyNow);
    }
    done(std::move(r));
  };
  const TopologyPtr topo = topology();
  if (std::optional<Error> refused = servingRefusal(p, *topo)) {
    answer(std::move(*refused));
    return;
  }
  if (id.valid() && answeredBefore(p, store, topo, id, deadline, steadyNow, done)) return;
  if (steadyNow >= deadline) {
    const auto late =
        std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow - deadline).count();
    answer(Error(Errc::timeout, "the deadline passed " + std::to_string(late) +
                                    " ms before the request started on " + partitionName(p) +
                                    ": not run"));
    return;
  }
  // No request outlives its dedup record: a retry of it can still find its answer.
  deadline = std::min(deadline, steadyNow + options_.dedupWindow / 2);
  const Nanos now = clock_->now();
  MutableEntry entry(key, store.find(key, now));
  ProcessorVerdict verdict;
  Result<std::string> result = fn(args, entry, now, &verdict);
  executed_.fetch_add(1, std::memory_order_relaxed);
  if (!result.ok() || entry.change() == MutableEntry::Change::kNone) {
    answer(std::move(result), verdict);  // a failed processor changes nothing
    return;
  }
  if (std::optional<Error> refused = writeRefusal(p, *topo)) {
    answer(std::move(*refused));
    return;
  }
  const std::optional<EntryView> stored = store.apply(key, entry, now);
  const std::vector<MemberId>& owners = topo->table.owners(p);
  if (owners.size() <= 1) {
    commitWithoutBackups(p, *topo);
    if (id.valid()) store.dedup().record(id, *result, nullptr, steadyNow);
    answer(std::move(result), verdict);
    return;
  }
  // The update is encoded here, from the stored entry and the answer where they lie.
  const ReplicateUpdateView update = changeUpdate(p, *topo, key, stored, id, result);
  std::shared_ptr<Replication> r = makeReplication(update);
  if (options_.replication == ReplicationMode::kAsyncBackups) {
    countRequest(p, processor, RequestMetrics::outcomeOf(verdict), verdict.nearLimit, steadyNow);
  } else {  // counted when the backups have answered
    r->processor = processor;
    r->verdict = verdict;
    r->started = steadyNow;
  }
  // Recorded before it replicates, from the answer where it lies (no copy of it), with the
  // outcome the replication resolves.
  if (id.valid()) store.dedup().record(id, *result, trackOutcome(*r), steadyNow);
  replicate(std::move(r), topo, std::move(result), deadline, std::move(done));
}

std::optional<Error> DataPlane::servingRefusal(PartitionId p, const Topology& topo) const {
  if (servesAsPrimary(p, topo)) return std::nullopt;
  const MemberId self = memberId();
  // A member without an id (joining, or rejoining after it was removed) leads nothing, not even
  // the partitions of an empty table (whose primary is 0 too).
  if (self == 0 || topo.table.primary(p) != self) {
    return Error(Errc::not_owner, "member " + std::to_string(self) + " is not the primary of " +
                                      partitionName(p) + " at topology " +
                                      std::to_string(topo.version));
  }
  if (replicas_[p].primary.fenced) {
    return Error(Errc::unavailable, partitionName(p) + " is moving to another member");
  }
  return std::nullopt;
}

bool DataPlane::answeredBefore(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                               const RequestId& id, std::chrono::steady_clock::time_point deadline,
                               std::chrono::steady_clock::time_point steadyNow,
                               RawCompletion& done) {
  const DedupTable::Lookup seen = store.dedup().find(id, steadyNow);
  if (seen.kind == DedupTable::Lookup::kAnswered) {
    done(StringPool::copy(seen.result));  // ran before: its answer, and it does not run again
    return true;
  }
  if (seen.kind == DedupTable::Lookup::kPending && seen.outcome->park(done)) {
    // A copy of a request whose update is still replicating: answered once that resolves.
    parkedCopies_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (seen.kind == DedupTable::Lookup::kInherited) {
    confirmInherited(p, store, topo, id, std::string(seen.result), deadline, std::move(done));
    return true;
  }
  if (seen.kind != DedupTable::Lookup::kNew) {
    done(dedupAnswer(p, id, seen));
    return true;
  }
  return false;
}

void DataPlane::commitWithoutBackups(PartitionId p, const Topology& topo) {
  pruneLagging(p, [](MemberId) { return false; });  // no backup left to lag
  advance(p, topo);  // numbered like every change, with no backup to send it to
  if (topo.members.size() > 1 && topo.backups > 0) {  // a backup is missing
    degradedWrites_.fetch_add(1, std::memory_order_relaxed);
  }
}

ReplicateUpdateView DataPlane::changeUpdate(PartitionId p, const Topology& topo,
                                            std::string_view key,
                                            const std::optional<EntryView>& stored,
                                            const RequestId& id,
                                            const Result<std::string>& result) {
  ReplicateUpdateView update = nextUpdate(p, topo);
  update.key = key;
  if (stored) {
    update.kind = ReplicateBody::kPut;
    update.value = stored->value;
    update.expiresAt = stored->expiresAt;
  } else {
    update.kind = ReplicateBody::kRemove;
  }
  if (id.valid()) {
    update.client = id.client;
    update.requestSeq = id.seq;
    update.doneBelow = id.doneBelow;
    update.result = *result;
  }
  return update;
}

std::optional<Error> DataPlane::writeRefusal(PartitionId p, const Topology& topo) const {
  const MemberId self = memberId();
  if (!host_.primaryLeaseValid()) {  // invariant 13: no write without a valid primary lease
    return Error(Errc::unavailable, "member " + std::to_string(self) +
                                        " holds no valid primary lease (no renewal from "
                                        "the control plane's leader within " +
                                        std::to_string(host_.leaseDuration().count()) +
                                        " ms): the write to " + partitionName(p) +
                                        " is refused, nothing changed");
  }
  if (options_.minInSyncReplicas > 1) {
    std::size_t complete = 0;
    for (MemberId m : topo.table.owners(p)) complete += topo.syncingReplica(p, m) ? 0 : 1;
    if (complete < options_.minInSyncReplicas) {
      return Error(Errc::unavailable,
                   partitionName(p) + " has " + std::to_string(complete) + " complete cop" +
                       (complete == 1 ? "y" : "ies") +
                       " (its primary and complete backups), fewer than minInSyncReplicas " +
                       std::to_string(options_.minInSyncReplicas) +
                       ": the write is refused, nothing changed (taken again once a backup has "
                       "its snapshot)");
    }
  }
  if (topo.members.size() < options_.minMembers) {  // split-brain protection: no write
    return Error(Errc::no_quorum,
                 "member " + std::to_string(self) + " sees " + std::to_string(topo.members.size()) +
                     " member(s), fewer than minMembers " + std::to_string(options_.minMembers) +
                     ": the write to " + partitionName(p) + " is refused");
  }
  return std::nullopt;
}

std::uint64_t DataPlane::advance(PartitionId p, const Topology& topo) {
  Replica& rep = replicas_[p];
  const std::uint64_t prevEpoch = rep.lastEpoch;
  ++rep.seq;
  rep.lastEpoch = topo.epoch(p);
  return prevEpoch;
}

ReplicateUpdateView DataPlane::nextUpdate(PartitionId p, const Topology& topo) {
  ReplicateUpdateView update;
  update.prevEpoch = advance(p, topo);
  update.epoch = replicas_[p].lastEpoch;
  update.partition = p;
  update.seq = replicas_[p].seq;
  return update;
}

std::shared_ptr<DataPlane::Replication> DataPlane::makeReplication(
    const ReplicateUpdateView& update) {
  auto r = std::allocate_shared<Replication>(CachedAllocator<Replication>());  // block_cache.h
  r->partition = update.partition;
  r->seq = update.seq;
  r->barrier = update.kind == ReplicateBody::kBarrier;
  // A pooled string (given back when the record goes) with room for all of it.
  r->encoded = StringPool::take(ReplicateUpdateView::kFixedBytes + update.key.size() +
                                update.value.size() + update.result.size());
  encodeInto(r->encoded, update);
  return r;
}

void DataPlane::confirmInherited(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                                 const RequestId& id, std::string answer,
                                 std::chrono::steady_clock::time_point deadline,
                                 RawCompletion done) {
  const auto steadyNow = ingrid::steadyNow();
  if (topo->table.owners(p).size() <= 1 || options_.replication == ReplicationMode::kAsyncBackups) {
    // No other owner to wait for (or a mode that never waits for one).
    store.dedup().record(id, answer, nullptr, steadyNow);
    done(std::move(answer));
    return;
  }
  const std::string request = "request " + std::to_string(id.seq) + " of client " +
                              std::to_string(id.client) + " ran on a former primary of " +
                              partitionName(p);
  if (steadyNow >= deadline) {
    done(Error(Errc::unavailable, request + "; the deadline passed before its answer could be "
                                            "confirmed by every owner: ask again"));
    return;
  }
  if (std::optional<Error> refused = writeRefusal(p, *topo)) {
    // Not `no_quorum` (a write refused): this request ran, and a caller must not send it anew.
    done(Error(Errc::unavailable, request + "; confirming it: " + refused->detail()));
    return;
  }
  // A barrier through every backup: once each acknowledges it, each holds every update before it,
  // the request's among them. Copies that arrive meanwhile find the record pending.
  ReplicateUpdateView barrier = nextUpdate(p, *topo);
  barrier.kind = ReplicateBody::kBarrier;
  barrier.client = id.client;
  barrier.requestSeq = id.seq;
  barrier.doneBelow = id.doneBelow;
  barrier.result = answer;
  deadline = std::min(deadline, steadyNow + options_.dedupWindow / 2);
  barriers_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<Replication> r = makeReplication(barrier);
  store.dedup().record(id, answer, trackOutcome(*r), steadyNow);
  replicate(std::move(r), topo, Result<std::string>(std::move(answer)), deadline, std::move(done));
}

Error DataPlane::dedupAnswer(PartitionId p, const RequestId& id, const DedupTable::Lookup& seen) {
  const std::string request = "request " + std::to_string(id.seq) + " of client " +
                              std::to_string(id.client) + " on " + partitionName(p);
  switch (seen.kind) {
    case DedupTable::Lookup::kPending:
      return Error(Errc::unavailable,
                   request + " ran, and its update is still being replicated: ask again");
    case DedupTable::Lookup::kFailed:
      return Error(Errc::indeterminate,
                   request + " ran on the primary, but a backup never confirmed its update");
    case DedupTable::Lookup::kFull:
      return Error(Errc::overloaded,
                   request + ": the client already has " +
                       std::to_string(DedupTable::kMaxRecordsPerClient) +
                       " answered requests recorded here that it has not acknowledged "
                       "(doneBelow " +
                       std::to_string(id.doneBelow) + "): not run; retry once earlier calls end");
    case DedupTable::Lookup::kForgotten:
      return Error(Errc::invalid_argument, request + " is below the client's doneBelow (" +
                                               std::to_string(id.doneBelow) +
                                               "): a stale copy of an answered request, not run");
    default:
      return Error(Errc::processor_failed, request + ": no recorded answer");
  }
}

std::shared_ptr<const ReplicationOutcome> DataPlane::trackOutcome(Replication& r) const {
  // kAsyncBackups: no outcome, a copy of the request gets the same answer at once.
  if (options_.replication == ReplicationMode::kAsyncBackups) return nullptr;
  r.outcome = std::allocate_shared<ReplicationOutcome>(CachedAllocator<ReplicationOutcome>());
  r.outcome->barrier = r.barrier;
  return r.outcome;
}

std::optional<DataPlane::AdmittedInvoke> DataPlane::admitInvoke(
    const std::shared_ptr<Connection>& conn, const Frame& frame) {
  // The fields are read in place (no copy): found here, used on the worker over the same body.
  AdmittedInvoke call;
  try {
    call.spans = InvokeRequestSpans::of(frame.body);
  } catch (const std::exception& e) {
    conn->replyError(frame.header, Error(Errc::malformed_message,
                                         std::string("Invoke body does not decode: ") + e.what()));
    return std::nullopt;
  }
  const std::string_view key = call.spans.key.in(frame.body);
  const std::string_view processor = call.spans.processor.in(frame.body);
  const bool running = host_.beginInvocation();
  std::tie(call.fn, call.processor) = registry_.lookup(processor);
  Error refused;
  if (!running) {
    refused = Error(Errc::shutting_down, "member " + std::to_string(memberId()) + " is stopping");
  } else if (auto bad = keyError(key)) {
    refused = std::move(*bad);
  } else if (call.fn == nullptr) {
    refused = Error(Errc::unknown_processor, "no processor named '" + std::string(processor) +
                                                 "' is registered on member " +
                                                 std::to_string(memberId()));
  }
  if (refused.code()) {
    conn->replyError(frame.header, refused);
    host_.endInvocation();
    return std::nullopt;
  }
  call.partition = partitionOf(key, options_.partitions);
  std::chrono::milliseconds left = call.spans.timeoutMs != 0
                                       ? std::chrono::milliseconds(call.spans.timeoutMs)
                                       : options_.requestTimeout;
  if (call.spans.deadlineUnixMs != 0) {
    // The sender's wall-clock deadline, allowing clock skew of up to 0.4 of the dedup window: a
    // copy that arrives past it was delayed in transit, perhaps beyond the window that would find
    // its first run's record, and must not run. (A deadline is at most half the window after the
    // send, and a record lives at least the window after the first run: a copy that arrives
    // within the allowance still finds it.)
    const auto skew = static_cast<std::uint64_t>((options_.dedupWindow * 2 / 5).count());
    const auto wallNow = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(systemNow().time_since_epoch())
            .count());
    const std::uint64_t deadline = call.spans.deadlineUnixMs;
    const std::uint64_t latest = deadline > UINT64_MAX - skew ? UINT64_MAX : deadline + skew;
    if (wallNow >= latest) {
      lateRequests_.fetch_add(1, std::memory_order_relaxed);
      conn->replyError(frame.header,
                       Error(Errc::timeout,
                             "the request arrived " + std::to_string(wallNow - deadline) +
                                 " ms after its deadline (by member " + std::to_string(memberId()) +
                                 "'s wall clock, allowing " + std::to_string(skew) +
                                 " ms of clock skew; a sender whose clock is behind by more "
                                 "has every request refused): not run"));
      host_.endInvocation();
      return std::nullopt;
    }
    left = std::min<std::chrono::milliseconds>(
        left, std::chrono::milliseconds(std::min<std::uint64_t>(latest - wallNow, UINT32_MAX)));
  }
  call.deadline = steadyNow() + left;
  return call;
}

void DataPlane::runInvoke(PartitionStore& store, const std::shared_ptr<Connection>& conn,
                          const FrameHeader& header, std::string body, const AdmittedInvoke& call) {
  const InvokeRequestSpans& spans = call.spans;
  execute(
      call.partition, store, spans.key.in(body), call.fn, call.processor, spans.args.in(body),
      RequestId{spans.client, spans.seq, spans.doneBelow}, call.deadline,
      [this, conn, header](Result<std::string> r) {
        const std::uint64_t version = topology()->version;
        if (r.ok()) {
          // Encoded into a pooled string; the answer's own string (encode()'s, pooled) goes back.
          InvokeReply reply{std::move(*r)};
          std::string encoded = StringPool::take(InvokeReply::kFixedBytes + reply.result.size());
          encodeInto(encoded, reply);
          StringPool::give(std::move(reply.result));
          conn->reply(header, MessageType::kInvoke, version, std::move(encoded));
        } else if (r.error() == Errc::not_owner) {
          conn->reply(header, MessageType::kRedirect, version, encode(TopologyBody{*topology()}));
        } else {
          conn->replyError(header, r.error());
        }
        host_.endInvocation();
      });
  StringPool::give(std::move(body));  // nothing views it any more: the next frame's body
}

void DataPlane::handleInvoke(const std::shared_ptr<Connection>& conn, Frame frame) {
  std::optional<AdmittedInvoke> call = admitInvoke(conn, frame);
  if (!call) return;
  if (workers_.onWorkerOf(call->partition)) {
    // Partitions on the network thread (one thread per node): run where it was read, no re-post.
    runInvoke(workers_.store(call->partition), conn, frame.header, std::move(frame.body), *call);
    return;
  }
  postInvoke(conn, std::move(frame), *call);
}

void DataPlane::postInvoke(const std::shared_ptr<Connection>& conn, Frame frame,
                           const AdmittedInvoke& call) {
  workers_.post(call.partition, [this, conn, header = frame.header, body = std::move(frame.body),
                                 call](PartitionStore& store) mutable {
    runInvoke(store, conn, header, std::move(body), call);
  });
}

void DataPlane::handleShardInvoke(unsigned w, const std::shared_ptr<Connection>& conn,
                                  Frame frame) {
  std::optional<AdmittedInvoke> call = admitInvoke(conn, frame);
  if (!call) return;
  if (workers_.workerOf(call->partition) == w) {  // read by the thread that owns it: run now
    shardInPlace_.fetch_add(1, std::memory_order_relaxed);
    runInvoke(workers_.store(call->partition), conn, frame.header, std::move(frame.body), *call);
    return;
  }
  // Another worker's partition (a client that routed by an older layout, or one not shard-aware):
  // forwarded inside the node; its answer goes back through the connection's own thread.
  shardForwarded_.fetch_add(1, std::memory_order_relaxed);
  postInvoke(conn, std::move(frame), *call);
}

}  // namespace ingrid
