#include "cluster/transport/topology_watchers.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "cluster/transport/messages.h"

namespace ingrid {

void TopologyWatchers::hold(const std::shared_ptr<Connection>& conn, const FrameHeader& request,
                            std::uint64_t after, std::chrono::milliseconds wait,
                            const TopologyPtr& current) {
  assert(here());
  current_ = current;
  if (current->version > after || wait.count() <= 0) {
    conn->reply(request, MessageType::kGetTopology, current->version,
                encode(TopologyBody{*current}));
    return;
  }
  const auto until = steadyNow() + std::min(wait, kMaxWait);
  if (held_.size() >= purgeAt_) {  // watches of closed connections, dropped in amortized O(1)
    std::erase_if(held_, [](const auto& kv) { return kv.second.conn.expired(); });
    purgeAt_ = std::max<std::size_t>(64, 2 * held_.size());
  }
  auto [it, fresh] = held_.try_emplace(conn.get());
  if (!fresh) {  // a second watch on one connection: the first is answered now
    if (auto held = it->second.conn.lock()) {
      held->reply(it->second.request, MessageType::kGetTopology, current->version,
                  encode(TopologyBody{*current}));
    }
  }
  it->second = Held{conn, request, after, until, nextSeq_++};
  // O(1) per watch: the timer only moves earlier here (expire() finds the next deadline).
  if (armedFor_ == SteadyTime{} || until < armedFor_) waitUntil(until);
}

void TopologyWatchers::publish(const TopologyPtr& t) {
  assert(here());
  current_ = t;
  if (held_.empty()) return;
  std::vector<Held> due;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.after >= t->version) {
      ++it;
      continue;
    }
    due.push_back(std::move(it->second));
    it = held_.erase(it);
  }
  if (due.empty()) return;
  answer(due, t->version, encode(TopologyBody{*t}));  // one encoding for every watcher
}

void TopologyWatchers::answer(std::vector<Held>& due, std::uint64_t version,
                              const std::string& body) {
  std::sort(due.begin(), due.end(), [](const Held& a, const Held& b) { return a.seq < b.seq; });
  for (const Held& h : due) {
    if (auto conn = h.conn.lock()) conn->reply(h.request, MessageType::kGetTopology, version, body);
  }
}

void TopologyWatchers::stop() {
  assert(here());
  timer_.cancel();
  armedFor_ = {};
  std::vector<Held> held;
  for (auto& [conn, h] : held_) held.push_back(std::move(h));
  held_.clear();
  if (!current_ || held.empty()) return;
  answer(held, current_->version, encode(TopologyBody{*current_}));
}

void TopologyWatchers::expire() {
  const auto now = steadyNow();
  std::vector<Held> due;
  for (auto it = held_.begin(); it != held_.end();) {
    const bool open = !it->second.conn.expired();
    if (open && it->second.until > now) {
      ++it;
      continue;
    }
    if (open) due.push_back(std::move(it->second));
    it = held_.erase(it);  // answered, or its connection is gone
  }
  if (due.empty() || !current_) return;
  answer(due, current_->version, encode(TopologyBody{*current_}));  // encoded once
}

void TopologyWatchers::arm() {
  if (held_.empty()) return;
  SteadyTime next = SteadyTime::max();
  for (const auto& [conn, h] : held_) next = std::min(next, h.until);
  if (armedFor_ != SteadyTime{} && armedFor_ <= next) return;  // a wait that comes first is set
  waitUntil(next);
}

void TopologyWatchers::waitUntil(SteadyTime next) {
  armedFor_ = next;
  timer_.expires_at(next);
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;  // cancelled: stop(), or set again for an earlier deadline
    armedFor_ = {};
    expire();
    arm();
  });
}

}  // namespace ingrid
