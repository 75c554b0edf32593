#include "grid/dedup_table.h"

#include <algorithm>
#include <utility>

namespace ingrid {

namespace {
const ReplicationOutcome kInheritedOutcome{ReplicationOutcome::kInherited};
}  // namespace

ReplicationOutcome::Parked* ReplicationOutcome::closed() noexcept {
  static Parked mark;
  return &mark;
}

ReplicationOutcome::~ReplicationOutcome() {
  Parked* p = parked_.load(std::memory_order_acquire);
  if (p == nullptr || p == closed()) return;
  resolve(kFailed, {},
          Error(Errc::shutting_down,
                "the node stopped before the request's update "
                "was confirmed by every backup"));
}

bool ReplicationOutcome::park(Waiter& w) const {
  if (parkedCount_.fetch_add(1, std::memory_order_relaxed) >= kMaxParked) {
    parkedCount_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  auto* node = new Parked{std::move(w), nullptr};
  Parked* head = parked_.load(std::memory_order_acquire);
  do {
    if (head == closed()) {  // resolved meanwhile: the caller answers from the state
      w = std::move(node->waiter);
      delete node;
      parkedCount_.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    node->next = head;
  } while (!parked_.compare_exchange_weak(head, node, std::memory_order_acq_rel,
                                          std::memory_order_acquire));
  return true;
}

void ReplicationOutcome::resolve(std::uint8_t s, std::string_view answer, const Error& failure) {
  state.store(s, std::memory_order_release);
  Parked* head = parked_.exchange(closed(), std::memory_order_acq_rel);
  if (head == closed()) return;
  Parked* inOrder = nullptr;  // the list is newest first
  while (head != nullptr) {
    Parked* next = head->next;
    head->next = inOrder;
    inOrder = head;
    head = next;
  }
  while (inOrder != nullptr) {
    Parked* next = inOrder->next;
    if (s == kAcknowledged) {
      inOrder->waiter(std::string(answer));
    } else {
      inOrder->waiter(failure);
    }
    delete inOrder;
    inOrder = next;
  }
}

std::shared_ptr<const ReplicationOutcome> ReplicationOutcome::inherited() noexcept {
  return std::shared_ptr<const ReplicationOutcome>(std::shared_ptr<const void>(),
                                                   &kInheritedOutcome);
}

DedupTable::Record* DedupTable::SeqRecords::find(std::uint64_t seq) noexcept {
  if (tree_) {
    const auto it = tree_->map.find(seq);
    return it == tree_->map.end() ? nullptr : &it->second;
  }
  for (auto& [s, r] : small_) {
    if (s == seq) return &r;
  }
  return nullptr;
}

bool DedupTable::SeqRecords::assign(std::uint64_t seq, Record r) {
  if (tree_) return tree_->map.insert_or_assign(seq, std::move(r)).second;
  auto it = std::lower_bound(small_.begin(), small_.end(), seq,
                             [](const auto& entry, std::uint64_t s) { return entry.first < s; });
  if (it != small_.end() && it->first == seq) {
    it->second = std::move(r);
    return false;
  }
  if (small_.size() < kInline) {
    small_.emplace(it, seq, std::move(r));
    return true;
  }
  auto tree = std::make_unique<TreeBox>();
  for (auto& [s, old] : small_) tree->map.emplace(s, std::move(old));
  tree->map.emplace(seq, std::move(r));
  small_.clear();
  tree_ = std::move(tree);
  return true;
}

std::size_t DedupTable::SeqRecords::dropBelow(std::uint64_t mark) noexcept {
  if (tree_) {
    const auto end = tree_->map.lower_bound(mark);
    std::size_t dropped = 0;
    for (auto it = tree_->map.begin(); it != end; ++it) ++dropped;
    tree_->map.erase(tree_->map.begin(), end);
    if (tree_->map.empty()) tree_.reset();
    return dropped;
  }
  std::size_t dropped = 0;
  while (dropped < small_.size() && small_[dropped].first < mark) ++dropped;
  small_.erase(small_.begin(), small_.begin() + static_cast<std::ptrdiff_t>(dropped));
  return dropped;
}

void DedupTable::advance(ClientRecords& c, std::uint64_t mark) noexcept {
  if (mark <= c.doneBelow) return;  // a mark from a reordered, older request: nothing new
  c.doneBelow = mark;
  records_ -= c.records.dropBelow(mark);
}

DedupTable::Lookup DedupTable::find(const RequestId& id, Clock::time_point now) {
  const auto it = clients_.find(id.client);
  if (it == clients_.end()) return {};
  ClientRecords& c = it->second;
  c.lastUsed = now;
  advance(c, id.doneBelow);
  if (id.seq < c.doneBelow) return {Lookup::kForgotten, {}, nullptr};
  Record* const found = c.records.find(id.seq);
  if (found == nullptr) {
    return c.records.size() >= kMaxRecordsPerClient ? Lookup{Lookup::kFull, {}, nullptr} : Lookup{};
  }
  Record& record = *found;
  if (record.outcome) {
    switch (record.outcome->state.load(std::memory_order_acquire)) {
      case ReplicationOutcome::kPending:
        return {Lookup::kPending, {}, record.outcome};
      case ReplicationOutcome::kFailed:
        if (record.outcome->barrier) {  // the request's answer stands; its barrier did not
          record.outcome = ReplicationOutcome::inherited();
          return {Lookup::kInherited, record.result.view(), nullptr};
        }
        return {Lookup::kFailed, {}, nullptr};
      case ReplicationOutcome::kInherited:
        return {Lookup::kInherited, record.result.view(), nullptr};
      default:
        record.outcome.reset();  // acknowledged for good: no need to look again
    }
  }
  return {Lookup::kAnswered, record.result.view(), nullptr};
}

void DedupTable::record(const RequestId& id, std::string_view result,
                        std::shared_ptr<const ReplicationOutcome> outcome, Clock::time_point now) {
  ClientRecords& c = clients_[id.client];
  c.lastUsed = now;
  advance(c, id.doneBelow);
  if (id.seq < c.doneBelow) return;  // the client already has its answer
  if (c.records.assign(id.seq, Record{InlineBytes(result), std::move(outcome)})) ++records_;
}

std::size_t DedupTable::expireIdle(Clock::time_point now, Clock::duration window) {
  std::size_t dropped = 0;
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (now - it->second.lastUsed > window) {
      dropped += it->second.records.size();
      clients_.erase(it++);
    } else {
      ++it;
    }
  }
  records_ -= dropped;
  return dropped;
}

void DedupTable::clear() noexcept {
  clients_.clear();
  records_ = 0;
}

}  // namespace ingrid
