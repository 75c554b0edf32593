// DedupTable: what one partition remembers of the requests that changed it, so that a request sent
// again with the same id gets its original answer instead of running twice (the
// completion records of RIFL, "Implementing Linearizability at Large Scale and Low Latency").
//
// Ids: a client (a thin Client, or a node's router) draws a random 64-bit id when it starts and
// numbers its requests 1, 2, ...; with each request it sends `doneBelow`, the lowest number it
// still awaits an answer for. A record lives until
//   - the client's `doneBelow` passes it: the client has the answer and never sends it again; or
//   - the client sends nothing to the partition for the idle window (NodeOptions::dedupWindow),
//     which outlasts any request's deadline, so no retry of it can still arrive.
// A client holds at most kMaxRecordsPerClient records per partition; past that its new requests
// are refused until its doneBelow moves.
// A request below the client's `doneBelow` is a stale copy (a frame delayed past its answer) and
// is refused without running.
// Only requests that changed the entry are recorded: one that failed or changed nothing may run
// again harmlessly.
// Records reach the backups with each replicated update and new owners with the snapshot, so a
// retry finds them on whichever member is primary by then.
//
// Thread safety: NOT thread-safe; it belongs to its PartitionStore's executor (invariant 1).
// A record's ReplicationOutcome is the one atomic: the network thread completes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <absl/container/btree_map.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include <ingrid/error.h>
#include <ingrid/result.h>
#include <ingrid/unique_function.h>

#include "grid/block_cache.h"
#include "grid/inline_bytes.h"

namespace ingrid {

// One request's identity, as the client sent it.
struct RequestId {
  std::uint64_t client = 0;     // the client's random id; 0: the request carries no id
  std::uint64_t seq = 0;        // its number at that client (from 1)
  std::uint64_t doneBelow = 0;  // every number below it is answered at that client
  bool valid() const noexcept { return client != 0 && seq != 0; }
};

// Whether a recorded request's update reached every backup. A copy of the request that arrives
// while it is pending is not answered yet: the update may still be lost to a failover, and the
// answer would then be a grant that no surviving copy holds.
//
// kInherited marks a record that came from a former primary (with a replicated update or a
// snapshot): this member holds it, but nothing says every other owner of the partition does. A
// primary answers it only after a barrier through its backups: answering at once could
// hand out a grant that a second failover, to an owner that lacks the update, loses.
//
// A copy that arrives while the outcome is pending is parked on it (park()) and answered when the
// replication resolves (resolve()), instead of being refused and sent again every few
// milliseconds by its router.
struct ReplicationOutcome {
  enum : std::uint8_t { kPending = 0, kAcknowledged = 1, kFailed = 2, kInherited = 3 };
  using Waiter = UniqueFunction<void(Result<std::string>)>;
  // Copies parked on one outcome at most; more are refused as before (`unavailable`).
  static constexpr std::uint32_t kMaxParked = 16;

  ReplicationOutcome() = default;
  explicit ReplicationOutcome(std::uint8_t s) : state(s) {}
  ReplicationOutcome(const ReplicationOutcome&) = delete;
  ReplicationOutcome& operator=(const ReplicationOutcome&) = delete;
  // Copies still parked (the replication never resolved: the node stopped) get shutting_down.
  ~ReplicationOutcome();

  std::atomic<std::uint8_t> state{kPending};
  // The replication of a barrier (not of the request's own update): if it fails, the record is
  // inherited again, and the next copy of the request tries another barrier.
  bool barrier = false;

  // Any thread: parks `w` until resolve(); true if parked (`w` moved from). False, `w` untouched,
  // once resolved or with kMaxParked copies parked.
  bool park(Waiter& w) const;
  // Once, by whoever completes the replication: sets `state` to `s` and answers the parked copies,
  // in the order they arrived, with `answer` (kAcknowledged) or `failure`.
  void resolve(std::uint8_t s, std::string_view answer, const Error& failure);

  // The one shared kInherited outcome (no control block: copying it counts nothing).
  static std::shared_ptr<const ReplicationOutcome> inherited() noexcept;

 private:
  struct Parked {
    Waiter waiter;
    Parked* next = nullptr;
  };
  static Parked* closed() noexcept;  // the list's mark once resolved
  mutable std::atomic<Parked*> parked_{nullptr};
  mutable std::atomic<std::uint32_t> parkedCount_{0};
};

class DedupTable {
 public:
  using Clock = std::chrono::steady_clock;

  // Records one client may hold in one partition. A new request of a client at the bound (its
  // doneBelow not moving) is refused, not run (kFull): evicting a record instead could let a
  // retry of a request still in flight run twice.
  static constexpr std::size_t kMaxRecordsPerClient = 1u << 16;

  struct Lookup {
    enum Kind : std::uint8_t {
      kNew,        // never seen here: run it
      kAnswered,   // ran, and every owner holds its update: `result` is its answer
      kInherited,  // ran on a former primary: `result` is its answer, once every owner holds it
      kPending,    // ran, and its update is still being replicated: answer later
      kFailed,     // ran, and a backup never confirmed its update: the outcome is indeterminate
      kForgotten,  // below the client's doneBelow: a stale copy, answered long ago
      kFull,       // new, and the client already holds kMaxRecordsPerClient records here
    };
    Kind kind = kNew;
    std::string_view result;  // kAnswered, kInherited; valid until the table changes
    // kPending: the replication to wait for (park a copy on it); valid while the record lives.
    std::shared_ptr<const ReplicationOutcome> outcome;
  };

  // Looks `id` up; first drops the client's records below id.doneBelow, and counts the client as
  // active at `now`.
  Lookup find(const RequestId& id, Clock::time_point now);

  // Records that `id` ran and answered `result`. `outcome`, if set, is its update's replication
  // (nullptr: nothing to wait for; ReplicationOutcome::inherited(): learnt from a former primary).
  // Replaces a record of the same id.
  void record(const RequestId& id, std::string_view result,
              std::shared_ptr<const ReplicationOutcome> outcome, Clock::time_point now);

  // Drops the records of clients that sent nothing for `window`. Returns the records dropped.
  std::size_t expireIdle(Clock::time_point now, Clock::duration window);

  void clear() noexcept;
  std::size_t records() const noexcept { return records_; }
  std::size_t clients() const noexcept { return clients_.size(); }

  // Every record, for a snapshot: fn(client, doneBelow, seq, result) (a string_view).
  template <class Fn>
  void forEach(Fn&& fn) const {
    for (const auto& entry : clients_) {  // (no structured binding: clang 14 cannot capture one)
      const std::uint64_t client = entry.first;
      const ClientRecords& c = entry.second;
      c.records.forEach([&](std::uint64_t seq, const Record& r) {
        fn(client, c.doneBelow, seq, r.result.view());
      });
    }
  }

 private:
  struct Record {
    InlineBytes result;  // inline up to 36 bytes: every limiter's answer fits
    std::shared_ptr<const ReplicationOutcome> outcome;  // nullptr once known to be acknowledged
  };
  // One client's records in one partition, by seq. A client rarely holds more than a few here at
  // once (its requests in flight to this partition), so they sit sorted in an inline array, which
  // a request adds to and its doneBelow takes from without allocating; past kInline they move to
  // a btree (bounded cost per request at up to kMaxRecordsPerClient), and back once it empties.
  class SeqRecords {
   public:
    static constexpr std::size_t kInline = 2;
    std::size_t size() const noexcept { return tree_ ? tree_->map.size() : small_.size(); }
    // The record of `seq`, or nullptr.
    Record* find(std::uint64_t seq) noexcept;
    // Sets the record of `seq`; true if it is new.
    bool assign(std::uint64_t seq, Record r);
    // Drops the records below `mark`; returns how many.
    std::size_t dropBelow(std::uint64_t mark) noexcept;
    template <class Fn>
    void forEach(Fn&& fn) const {
      if (tree_) {
        for (const auto& [seq, r] : tree_->map) fn(seq, r);
      } else {
        for (const auto& [seq, r] : small_) fn(seq, r);
      }
    }

   private:
    // The tree and its nodes come from the thread's block cache (block_cache.h): a client with
    // more than kInline requests in flight fills and empties its tree over and over.
    using Tree = absl::btree_map<std::uint64_t, Record, std::less<std::uint64_t>,
                                 CachedAllocator<std::pair<const std::uint64_t, Record>>>;
    struct TreeBox : CachedBlocks {
      Tree map;
    };
    absl::InlinedVector<std::pair<std::uint64_t, Record>, kInline> small_;  // sorted by seq
    std::unique_ptr<TreeBox> tree_;  // set: the records are here, and small_ is empty
  };
  struct ClientRecords {
    std::uint64_t doneBelow = 0;
    Clock::time_point lastUsed;
    SeqRecords records;
  };
  // Raises c's doneBelow to `mark`, dropping the records below it.
  void advance(ClientRecords& c, std::uint64_t mark) noexcept;

  absl::flat_hash_map<std::uint64_t, ClientRecords> clients_;
  std::size_t records_ = 0;
};

}  // namespace ingrid
