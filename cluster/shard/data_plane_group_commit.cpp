// Group commit: the updates bound for one backup link wait on their worker until the end of its
// write round (write_round.h) and leave in one kReplicate batch with one acknowledgement, which is
// settled per update; and how a worker's request leaves on its path (requestFrom).
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include <ingrid/string_pool.h>
#include "cluster/shard/data_plane.h"

namespace ingrid {
namespace {

// A replication batch leaves once its updates hold about this many bytes (or at kMaxUpdates).
constexpr std::size_t kMaxBatchBytes = 1u << 20;

}  // namespace

void DataPlane::queueUpdate(Lane& lane, LinkKey key, std::shared_ptr<Peer> peer,
                            std::uint64_t version, std::shared_ptr<const Replication> update,
                            std::chrono::steady_clock::time_point deadline,
                            Connection::ResponseHandler arrive) {
  assert(lane.round.here());
  if (auto it = lane.outgoing.find(key);
      it != lane.outgoing.end() && it->second.peer != peer && !it->second.updates.empty()) {
    flushUpdates(lane, key);  // the link was made anew: the old batch leaves on the old one
  }
  const std::size_t bytes = update->encoded.size() + 16;
  if (auto it = lane.outgoing.find(key); it != lane.outgoing.end() && !it->second.updates.empty() &&
                                         it->second.bytes + bytes > kMaxBatchBytes) {
    flushUpdates(lane, key);  // this one would take the batch past its size: it starts the next
  }
  OutgoingUpdates& out = lane.outgoing[key];
  if (out.updates.capacity() == 0 && !lane.spareBatches.empty()) {
    out.updates = std::move(lane.spareBatches.back());  // an answered batch's array, emptied
    lane.spareBatches.pop_back();
  }
  out.member = key.first;
  out.peer = std::move(peer);
  out.version = std::max(out.version, version);
  out.latest = std::max(out.latest, deadline);
  out.bytes += bytes;
  const auto order = static_cast<std::uint32_t>(out.updates.size());
  out.updates.push_back(QueuedUpdate{std::move(update), std::move(arrive), order});
  if (out.updates.size() >= ReplicateBatch::kMaxUpdates || out.bytes >= kMaxBatchBytes) {
    flushUpdates(lane, key);
  } else if (!out.flushPosted) {
    // At the end of this round (write_round.h): the updates the rest of the round makes join, and
    // the batch leaves in the same write as the round's other frames on that link (its
    // acknowledgements).
    out.flushPosted = true;
    lane.round.atEnd([this, &lane, key] {
      auto it = lane.outgoing.find(key);
      if (it == lane.outgoing.end()) return;
      it->second.flushPosted = false;
      flushUpdates(lane, key);
    });
  }
}

void DataPlane::flushUpdates(Lane& lane, LinkKey key) {
  assert(lane.round.here());
  auto it = lane.outgoing.find(key);
  if (it == lane.outgoing.end()) return;
  OutgoingUpdates& out = it->second;
  if (out.updates.empty()) return;
  const MemberId b = out.member;
  std::shared_ptr<Peer> peer = std::move(out.peer);
  std::vector<QueuedUpdate> updates;
  updates.swap(out.updates);
  const auto latest = std::exchange(out.latest, std::chrono::steady_clock::time_point::min());
  const std::uint64_t version = std::exchange(out.version, 0);
  out.bytes = 0;
  // Nothing waits for this link now: forget it (a departed member leaves no entry behind).
  if (!out.flushPosted) lane.outgoing.erase(it);
  // Each partition's updates in sequence order: a retried update may have been queued after later
  // ones of its partition, which the backup would take for a gap (and resync). Sorted in place,
  // by partition, then sequence, then queue order (so the sort is stable without a buffer).
  const auto updateOrder = [](const QueuedUpdate& x, const QueuedUpdate& y) {
    return std::tie(x.update->partition, x.update->seq, x.order) <
           std::tie(y.update->partition, y.update->seq, y.order);
  };
  if (!std::is_sorted(updates.begin(), updates.end(), updateOrder)) {
    std::sort(updates.begin(), updates.end(), updateOrder);
  }
  std::string body = joinReplicateBatch(updates.begin(), updates.end(), [](const QueuedUpdate& q) {
    return std::string_view(q.update->encoded);
  });
  // Each attempt waits at most a heartbeat interval, so that a backup that stopped answering (a
  // paused process) is re-judged against the latest topology that often: once a committed topology
  // drops it, the update is released at once instead of at the caller's deadline. An update whose
  // own deadline comes sooner is judged by its own (in sendUpdate) when the answer arrives.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(latest - steadyNow());
  // The batch's array goes with it: the answer is judged over it, then it is kept for a next batch.
  lane.metrics.updatesPerBatch.observe(updates.size());
  requestFrom(
      lane.index, key, peer, MessageType::kReplicate, version, std::move(body),
      std::clamp(left, std::chrono::milliseconds(1), options_.heartbeatInterval),
      [this, &lane, updates = std::move(updates), b, sent = steadyNow()](Result<Frame> r) mutable {
        if (r) {
          lane.metrics.replicationAck.observe(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(steadyNow() - sent).count()));
        }
        settleBatch(b, updates, std::move(r));
        updates.clear();
        if (lane.spareBatches.size() < lane.spareBatches.capacity()) {
          lane.spareBatches.push_back(std::move(updates));
        }
      });
}

void DataPlane::settleBatch(MemberId b, std::vector<QueuedUpdate>& updates, Result<Frame> r) {
  const auto all = [&](const Result<Frame>& verdict) {
    for (QueuedUpdate& q : updates) q.arrive(verdict);
  };
  if (!r) {
    all(r.error());
    return;
  }
  ReplicateAck ack;
  try {
    decodeInto(r->body, ack);
    StringPool::give(std::move(r->body));  // read (the refusals are copies)
  } catch (const std::exception& e) {
    all(Error(Errc::malformed_message,
              "acknowledgement of a batch of " + std::to_string(updates.size()) +
                  " updates from member " + std::to_string(b) + ": " + e.what()));
    return;
  }
  // Each refusal names a distinct update of the batch; anything else makes the whole
  // acknowledgement untrustworthy, and no update of it counts as acknowledged.
  std::vector<bool> seen(ack.refused.empty() ? 0 : updates.size(), false);
  for (const UpdateRefusal& refused : ack.refused) {
    if (refused.index >= updates.size() || seen[refused.index]) {
      all(Error(Errc::malformed_message,
                "acknowledgement of a batch of " + std::to_string(updates.size()) +
                    " updates from member " + std::to_string(b) + " refuses update " +
                    std::to_string(refused.index) +
                    (refused.index >= updates.size() ? ", which it does not hold" : " twice")));
      return;
    }
    seen[refused.index] = true;
  }
  for (UpdateRefusal& refused : ack.refused) {
    auto arrive = std::exchange(updates[refused.index].arrive, Connection::ResponseHandler{});
    arrive(errorFromBody(std::move(refused.error), "member " + std::to_string(b)));
  }
  for (QueuedUpdate& q : updates) {
    if (q.arrive) q.arrive(Frame{});
  }
}

void DataPlane::requestFrom(unsigned w, LinkKey key, const std::shared_ptr<Peer>& peer,
                            MessageType type, std::uint64_t version, std::string body,
                            std::chrono::milliseconds timeout,
                            Connection::ResponseHandler handler) {
  assert(lanes_[w]->round.here());
  const MemberId to = key.first;
  if (peer) {
    peer->request(type, version, std::move(body), timeout, std::move(handler));
    return;
  }
  if (key.second != kViaNetwork) {
    // The shard path has no link now (this member is stopping, or has no id): never the member
    // link instead, which is not ordered with it.
    handler(Error(Errc::unreachable, "no link from member " + std::to_string(memberId()) +
                                         " to the shard port of member " + std::to_string(to)));
    return;
  }
  // The network thread's link to `to`. When this worker is that thread (partitions on it), at
  // once; otherwise the request goes there and its answer comes back here.
  const bool here = onNetworkThread();
  onNetwork([this, w, to, type, version, body = std::move(body), timeout,
             handler = std::move(handler), here]() mutable {
    const TopologyPtr topo = topology();
    const MemberInfo* info = topo->member(to);
    std::shared_ptr<Peer> link = info ? host_.peerFor(to, info->address) : nullptr;
    if (!here) {
      handler = [this, w, back = std::move(handler)](Result<Frame> r) mutable {
        asio::post(workers_.io(w),
                   [back = std::move(back), r = std::move(r)]() mutable { back(std::move(r)); });
      };
    }
    if (!link) {
      handler(Error(Errc::unreachable, "member " + std::to_string(to) + " has no address known"));
      return;
    }
    link->request(type, version, std::move(body), timeout, std::move(handler));
  });
}

}  // namespace ingrid
