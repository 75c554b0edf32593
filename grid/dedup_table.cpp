#include <ingrid/grid/dedup_table.h>

#include <utility>

namespace ingrid {

void DedupTable::advance(ClientRecords& c, std::uint64_t mark) noexcept {
  if (mark <= c.doneBelow) return;  // a mark from a reordered, older request: nothing new
  c.doneBelow = mark;
  const auto end = c.records.lower_bound(mark);
  for (auto it = c.records.begin(); it != end; ++it) --records_;
  c.records.erase(c.records.begin(), end);
}

DedupTable::Lookup DedupTable::find(const RequestId& id, Clock::time_point now) {
  const auto it = clients_.find(id.client);
  if (it == clients_.end()) return {};
  ClientRecords& c = it->second;
  c.lastUsed = now;
  advance(c, id.doneBelow);
  if (id.seq < c.doneBelow) return {Lookup::kForgotten, nullptr};
  const auto r = c.records.find(id.seq);
  if (r == c.records.end()) {
    return c.records.size() >= kMaxRecordsPerClient ? Lookup{Lookup::kFull, nullptr} : Lookup{};
  }
  Record& record = r->second;
  if (record.outcome) {
    switch (record.outcome->state.load(std::memory_order_acquire)) {
      case ReplicationOutcome::kPending:
        return {Lookup::kPending, nullptr};
      case ReplicationOutcome::kFailed:
        return {Lookup::kFailed, nullptr};
      default:
        record.outcome.reset();  // acknowledged for good: no need to look again
    }
  }
  return {Lookup::kAnswered, &record.result};
}

void DedupTable::record(const RequestId& id, std::string result,
                        std::shared_ptr<const ReplicationOutcome> outcome, Clock::time_point now) {
  ClientRecords& c = clients_[id.client];
  c.lastUsed = now;
  advance(c, id.doneBelow);
  if (id.seq < c.doneBelow) return;  // the client already has its answer
  auto [it, inserted] =
      c.records.insert_or_assign(id.seq, Record{std::move(result), std::move(outcome)});
  (void)it;
  if (inserted) ++records_;
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
