// ingrid::testing::GrantAudit: records what a rate limiter acknowledged during a test, then
// checks it against the buckets' final state after the faults. Link with ingrid::testing.
//
// The audited buckets never refill (neverRefills(capacity)): every token is one countable grant,
// so after any faults
//   - no key was granted more than its capacity (a token granted twice shows as a surplus);
//   - nothing acknowledged was lost (the final state counts at least every acknowledged grant);
//   - nothing was granted that no call explains (no phantom consumption beyond the acknowledged
//     grants and the calls whose outcome is unknown: a timeout, an indeterminate write);
//   - no caller was answered past its deadline (plus a slack);
//   - every call was answered, once.
//
// Use: acquire(node, key, capacity, handler) in place of node.invokeAsync(key,
// TokenBucketAcquire{...}, handler), or begin()/end() around a call made any other way (through
// a service's own handler, say). Then, once the calls are answered and the cluster has healed,
// check(cluster) reads every key's final state and returns the verdict.
//
// Thread safety: begin(), end(), acquire() and the counters from any thread, concurrently (a
// loopback cluster's completions run on the nodes' threads); check() from the test's thread.
// The record is shared with acquire()'s handlers, so an answer that arrives after the audit is
// destroyed is safe (it is not recorded); the caller's own handler must still outlive nothing it
// captures.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/result.h>

namespace ingrid::testing {

class Cluster;

// A bucket of `capacity` tokens that refills 1 token per ~292 years (INT64_MAX ns): never, in a
// test.
inline BucketParams neverRefills(std::int64_t capacity) {
  return BucketParams{capacity, 1, std::numeric_limits<Nanos>::max(), std::nullopt};
}

// Whether a call that failed with `e` may still have taken its tokens (a timeout, an
// indeterminate write, a member that could not be reached, a broken reply).
bool outcomeUnknown(const Error& e) noexcept;

// One key's verdict.
struct KeyVerdict {
  std::string key;
  std::int64_t capacity = 0;
  std::int64_t acked = 0;     // tokens acknowledged to callers
  std::int64_t unknown = 0;   // tokens asked by calls whose outcome is unknown
  std::int64_t consumed = 0;  // capacity minus the tokens of the final state (0: no entry)
  std::int64_t denied = 0;    // calls answered granted == false
  bool readable = false;      // the final state could be read
  std::int64_t doubled() const noexcept { return acked > capacity ? acked - capacity : 0; }
  std::int64_t lost() const noexcept {
    const std::int64_t counted = acked < capacity ? acked : capacity;  // a surplus is doubled
    return readable && counted > consumed ? counted - consumed : 0;
  }
  std::int64_t phantom() const noexcept {
    return readable && consumed > acked + unknown ? consumed - acked - unknown : 0;
  }
};

struct AuditReport {
  std::uint64_t calls = 0, granted = 0, denied = 0, errors = 0, unknown = 0, unanswered = 0;
  std::uint64_t overDeadline = 0;   // answered past deadline + slack
  std::uint64_t answeredTwice = 0;  // end() called again for a ticket already answered
  std::uint64_t doubled = 0, lost = 0, phantom = 0, unreadable = 0;
  std::chrono::nanoseconds longestCall{0};
  std::vector<KeyVerdict> keys;  // by key, sorted
  std::string readError;         // the last error of a key that could not be read

  // Every check held.
  bool ok() const noexcept {
    return doubled == 0 && lost == 0 && phantom == 0 && unreadable == 0 && overDeadline == 0 &&
           unanswered == 0 && answeredTwice == 0;
  }
  // One line: the counts.
  std::string summary() const;
  // What failed, a line per check and per key (at most `maxKeys` keys); empty if ok().
  std::string failures(std::size_t maxKeys = 10) const;
  // Tokens acknowledged on `key` (0 if never called).
  std::int64_t ackedOn(const std::string& key) const;
};

class GrantAudit {
 public:
  using Duration = std::chrono::nanoseconds;
  using Ticket = std::size_t;

  // Calls are timed on `now` (a monotonic time, read where each call begins and where it is
  // answered; from any thread on loopback). Null: std::chrono::steady_clock, real time (in a
  // simulation pass the cluster instead: its handlers run on simulated time).
  explicit GrantAudit(std::function<Duration()> now = nullptr);
  // Timed on one clock for both ends of every call: the cluster's simulated time
  // (Cluster::elapsed()) on a simulated network, std::chrono::steady_clock on loopback. The
  // cluster must outlive the calls' answers.
  explicit GrantAudit(const Cluster& cluster);
  GrantAudit(const GrantAudit&) = delete;
  GrantAudit& operator=(const GrantAudit&) = delete;
  ~GrantAudit();

  // A call begins: `tokens` from `key`, a bucket of `capacity` that never refills, answered
  // within `deadline` or late. Returns the ticket end() takes.
  Ticket begin(std::string key, std::int64_t capacity, std::int64_t tokens, Duration deadline);
  // Its answer (once per ticket; a second end() of a ticket is counted in
  // AuditReport::answeredTwice, which fails the check).
  void end(Ticket ticket, const Result<AcquireAnswer>& answer);

  // TokenBucketAcquire of `tokens` on `key` through `node`, recorded; then `handler` with the
  // answer, where node.invokeAsync would run it. The deadline is the node's requestTimeout.
  template <class Handler>
  void acquire(Node& node, std::string key, std::int64_t capacity, Handler&& handler,
               std::int64_t tokens = 1) {
    const Ticket t = begin(key, capacity, tokens, node.options().requestTimeout);
    node.invokeAsync(
        std::move(key), TokenBucketAcquire{neverRefills(capacity), tokens},
        [state = state_, t, h = std::forward<Handler>(handler)](Result<AcquireAnswer> r) mutable {
          endOn(*state, t, r);
          h(std::move(r));
        });
  }
  // The same with no handler of the caller's.
  void acquire(Node& node, std::string key, std::int64_t capacity, std::int64_t tokens = 1) {
    acquire(
        node, std::move(key), capacity, [](const Result<AcquireAnswer>&) {}, tokens);
  }

  // Calls begun, and those not answered yet.
  std::size_t calls() const;
  std::size_t pending() const;
  // Tokens acknowledged so far, over every key.
  std::int64_t granted() const;

  // Reads every audited key's final state with `read` (GetEntry; retried for up to `readLimit`
  // of the reader's time while it fails, through `retry`, which waits a little) and checks the
  // calls against it. `slack`: how far past its deadline an answer may come.
  AuditReport check(const std::function<Result<EntrySnapshot>(const std::string&)>& read,
                    Duration slack = std::chrono::seconds(1)) const;
  // The same, reading through the cluster's up nodes in turn (Cluster::invoke of GetEntry),
  // retried for up to 30 s of the cluster's time.
  AuditReport check(Cluster& cluster, Duration slack = std::chrono::seconds(1)) const;

 private:
  struct Call {
    std::string key;
    std::int64_t capacity = 0;
    std::int64_t tokens = 0;
    Duration start{0}, deadline{0}, end{0};
    bool answered = false;
    bool granted = false, denied = false, unknown = false, error = false;
  };
  // The record, shared with the handlers of acquire().
  struct State {
    std::function<Duration()> now;  // set once, before any call
    mutable std::mutex mu;
    std::vector<Call> calls;       // guarded by mu
    std::size_t answered = 0;      // guarded by mu
    std::int64_t granted = 0;      // guarded by mu
    std::uint64_t doubleEnds = 0;  // guarded by mu
  };
  static Duration now(const State& state);
  static void endOn(State& state, Ticket ticket, const Result<AcquireAnswer>& answer);

  std::shared_ptr<State> state_;
};

}  // namespace ingrid::testing
