#include "cluster/transport/topology_watch.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include <ingrid/partition_table.h>

#include "cluster/transport/messages.h"

namespace ingrid {

TopologyWatch::TopologyWatch(Host& host, asio::io_context& io, Options options)
    : host_(host), io_(io), options_(options) {}

TopologyWatch::~TopologyWatch() {
  for (auto& [member, slot] : slots_) {
    if (slot.conn) slot.conn->close(Error(Errc::shutting_down, "topology watch ended"));
    if (slot.retry) slot.retry->cancel();
  }
}

void TopologyWatch::retarget() {
  assert(here());
  if (stopped_) return;
  const TopologyPtr t = host_.watchedTopology();
  if (!t) return;
  std::vector<const MemberInfo*> members;
  for (const MemberInfo& m : t->members) members.push_back(&m);
  const auto salt = static_cast<PartitionId>(options_.salt ^ (options_.salt >> 32));
  const std::size_t n = std::min(options_.width, members.size());
  std::partial_sort(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(n),
                    members.end(), [salt](const MemberInfo* a, const MemberInfo* b) {
                      const auto wa = rendezvousWeight(salt, a->id);
                      const auto wb = rendezvousWeight(salt, b->id);
                      return wa != wb ? wa > wb : a->id < b->id;
                    });
  members.resize(n);
  for (auto it = slots_.begin(); it != slots_.end();) {
    const auto chosen = std::find_if(members.begin(), members.end(), [&](const MemberInfo* m) {
      return m->id == it->first && m->address == it->second.address;
    });
    if (chosen != members.end()) {
      ++it;
      continue;
    }
    if (it->second.conn) it->second.conn->close(Error(Errc::shutting_down, "no longer watched"));
    if (it->second.retry) it->second.retry->cancel();
    it = slots_.erase(it);
  }
  for (const MemberInfo* m : members) {
    if (slots_.count(m->id) != 0) continue;
    slots_[m->id].address = m->address;
    dial(m->id);
  }
}

void TopologyWatch::stop() {
  assert(here());
  stopped_ = true;
  for (auto& [member, slot] : slots_) {
    if (slot.conn) slot.conn->close(Error(Errc::shutting_down, "topology watch stopped"));
    if (slot.retry) slot.retry->cancel();
  }
  slots_.clear();
}

void TopologyWatch::dial(MemberId member) {
  Slot& slot = slots_.at(member);
  if (slot.dialling || slot.conn) return;  // one connection per watched member
  slot.dialling = true;
  const std::uint64_t generation = slot.generation = ++generations_;
  std::weak_ptr<int> life = life_;
  host_.dialAuthenticated(slot.address, [this, life, member,
                                         generation](Result<std::shared_ptr<Connection>> conn) {
    const auto it = life.expired() ? slots_.end() : slots_.find(member);
    if (life.expired() || stopped_ || it == slots_.end() || it->second.generation != generation) {
      if (conn) conn.value()->close(Error(Errc::shutting_down, "no longer watched"));
      return;
    }
    it->second.dialling = false;
    if (!conn) {
      failed(member);
      return;
    }
    it->second.conn = std::move(conn).value();
    send(member);
  });
}

void TopologyWatch::send(MemberId member) {
  Slot& slot = slots_.at(member);
  const std::uint64_t generation = slot.generation;
  const TopologyPtr known = host_.watchedTopology();
  // Not before what this member already gave: a topology the host refused (not a valid
  // successor of its own) must not be answered again at once, round after round.
  const WatchTopologyBody watch{std::max(known ? known->version : 0, slot.answeredVersion),
                                static_cast<std::uint32_t>(options_.wait.count())};
  std::weak_ptr<int> life = life_;
  slot.conn->request(
      MessageType::kGetTopology, watch.after, encode(watch), options_.wait + options_.margin,
      [this, life, member, generation](Result<Frame> r) {
        if (life.expired()) return;
        const auto it = slots_.find(member);
        if (stopped_ || it == slots_.end() || it->second.generation != generation) return;
        if (!r) {
          failed(member);
          return;
        }
        TopologyPtr t;
        try {
          t = std::make_shared<const Topology>(decode<TopologyBody>(r->body).topology);
        } catch (const std::exception&) {
          failed(member);  // an answer that does not decode: that member is not used
          return;
        }
        it->second.answeredVersion = std::max(it->second.answeredVersion, t->version);
        it->second.backoff = std::chrono::milliseconds(0);  // it answers: no backoff
        host_.topologyAnswered(t);                          // may retarget, closing this very watch
        const auto again = slots_.find(member);
        if (!stopped_ && again != slots_.end() && again->second.generation == generation) {
          send(member);
        }
      });
}

void TopologyWatch::failed(MemberId member) {
  Slot& slot = slots_.at(member);
  if (slot.conn) {
    slot.conn->close(Error(Errc::shutting_down, "topology watch failed"));
    slot.conn.reset();
  }
  slot.generation = ++generations_;  // late callbacks of the failed watch are ignored
  slot.dialling = false;
  slot.backoff =
      slot.backoff.count() == 0
          ? options_.retryDelay
          : std::min(slot.backoff * 2, std::max(options_.maxRetryDelay, options_.retryDelay));
  slot.retry = std::make_shared<Timer>(io_, slot.backoff);
  std::weak_ptr<int> life = life_;
  slot.retry->async_wait([this, life, member, timer = slot.retry](std::error_code ec) {
    if (ec || life.expired() || stopped_) return;
    const auto it = slots_.find(member);
    if (it == slots_.end() || it->second.retry != timer) return;
    it->second.retry.reset();
    retarget();  // drops it if its member is no longer chosen (it left, say)
    if (slots_.count(member) != 0) dial(member);
  });
  host_.watchFailed();  // last: it may learn a topology and retarget, erasing this slot
}

}  // namespace ingrid
