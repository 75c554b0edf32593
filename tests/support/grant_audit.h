// GrantAudit: a load of concurrent TokenBucketAcquire callers on buckets that never refill,
// recorded call by call, then checked against the buckets' final state: every token is one
// countable grant, so an acknowledged grant that the final state does not count was lost, and
// more acknowledged grants than a bucket's capacity means a token was granted twice.
//
// Keys: `fixedBuckets` buckets used for the whole run, plus (if freshWindow > 0) a new
// generation of `freshBuckets` full buckets every freshWindow, so that grants keep happening
// through a fault (a fixed bucket is soon empty and then only denies).
//
// Calls: each caller takes 1 token per call through its Client (TokenBucketAcquire), or through
// an AuditCaller the test gives (a gateway's protocol, say); the final state is read with the
// Client either way.
//
// Thread safety: start(), addCallers(), servedWithin() and finish() from one thread; the callers
// run on their own threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/error.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/token_bucket.h>

#include "support/eventually.h"

namespace ingrid::testing {

using FaultClock = std::chrono::steady_clock;

struct AuditOptions {
  std::string prefix = "audit";
  // Concurrent callers (threads), each calling in a loop. Default: 32.
  int callers = 32;
  // Buckets used for the whole run, and their capacity. Default: 64 of 1 token.
  std::uint32_t fixedBuckets = 64;
  std::int64_t fixedCapacity = 1;
  // Fresh buckets per generation, their capacity, and how often a generation opens (0: none).
  std::uint32_t freshBuckets = 16;
  std::int64_t freshCapacity = 2;
  std::chrono::milliseconds freshWindow{100};
  // Deadline of one call (the client's requestTimeout), and the overshoot tolerated past it.
  // Above the scenarios' failover time, as the docs ask of requestTimeout: a call on a failed
  // member's key is retried (same request id) until its successor serves it, so its outcome is
  // known. A failed leader takes longest: an election, then the failure timeout (2 s) and the
  // lease wait. Default: 6 s.
  std::chrono::milliseconds deadline{6000};
  std::chrono::milliseconds slack{500};
  // Pause between one caller's calls (pacing, so a run's record stays small). Default: 1 ms.
  std::chrono::milliseconds pacing{1};
  // Clients the callers share round robin; client i lists the seeds rotated by i, so that each
  // learns the topology from a different member, as the clients of separate hosts would (one
  // client would follow one side of a split). 0: one per seed.
  std::size_t clients = 0;
};

// The fault scenarios' audit: 1024 buckets of 1 token for the whole run, and a generation of 32
// fresh buckets of 2 tokens every 50 ms, so that grants keep happening through a fault.
inline AuditOptions scenarioAudit(std::string prefix) {
  AuditOptions a;
  a.prefix = std::move(prefix);
  a.fixedBuckets = 1024;
  a.fixedCapacity = 1;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = std::chrono::milliseconds(50);
  return a;
}

// Parameters of a bucket that never refills: 1 token per ~292 years (INT64_MAX ns).
inline BucketParams neverRefills(std::int64_t capacity) {
  return BucketParams{capacity, 1, std::numeric_limits<Nanos>::max(), std::nullopt};
}

// Errors after which the call may or may not have run.
inline bool outcomeUnknown(const Error& e) {
  return e == Errc::timeout || e == Errc::indeterminate || e == Errc::unreachable ||
         e == Errc::protocol_error || e == Errc::malformed_message;
}

inline std::string errcName(int code) {
  static const char* const kNames[] = {"0",
                                       "invalid_key",
                                       "unknown_processor",
                                       "invalid_argument",
                                       "processor_failed",
                                       "timeout",
                                       "shutting_down",
                                       "not_running",
                                       "overloaded",
                                       "malformed_message",
                                       "would_deadlock",
                                       "invalid_configuration",
                                       "not_owner",
                                       "unavailable",
                                       "unreachable",
                                       "indeterminate",
                                       "join_refused",
                                       "protocol_error",
                                       "no_quorum",
                                       "unauthenticated"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return std::to_string(code);
}

struct AuditCall {
  enum Outcome : std::uint8_t { kGranted, kDenied, kError };
  std::uint32_t key = 0;
  Outcome outcome = kError;
  bool unknown = false;  // an error after which the grant may have happened
  int code = 0;          // the Errc of an error
  FaultClock::time_point start, end;
};

// What one call answered: granted or denied, or an error (its Errc value, and whether the grant
// may have happened).
struct CallOutcome {
  AuditCall::Outcome outcome = AuditCall::kError;
  int code = 0;
  bool unknown = false;
};

// One caller's way to take 1 token from `key`, a bucket of `capacity` that never refills
// (neverRefills). Called on that caller's thread only, one call at a time, so it may keep a
// connection of its own.
using AuditCaller = std::function<CallOutcome(const std::string& key, std::int64_t capacity)>;
// Makes caller number `index`'s AuditCaller (0 <= index < AuditOptions::callers).
using AuditCallerFactory = std::function<AuditCaller(int index)>;

// One bucket's verdict.
struct KeyVerdict {
  std::string key;
  std::int64_t capacity = 0;
  std::int64_t acked = 0;     // grants acknowledged to callers
  std::int64_t unknown = 0;   // calls whose outcome is unknown
  std::int64_t consumed = 0;  // capacity - tokens in the final state (0 if no entry)
  bool readable = false;      // the final state could be read
  std::chrono::milliseconds longestUnavailable{0};  // longest run of calls that all failed
  bool unavailableAtEnd = false;                    // its last call failed
  std::int64_t doubled() const { return std::max<std::int64_t>(0, acked - capacity); }
  std::int64_t lost() const { return readable ? std::max<std::int64_t>(0, acked - consumed) : 0; }
};

struct AuditSummary {
  std::uint64_t calls = 0, acked = 0, denied = 0, errors = 0, unknown = 0;
  std::uint64_t keys = 0, unreadable = 0;
  std::uint64_t lost = 0, keysLost = 0;        // acknowledged grants the final state lacks
  std::uint64_t doubled = 0, keysDoubled = 0;  // grants beyond capacity
  std::uint64_t phantom = 0;  // consumed tokens no acknowledged or unknown call explains
  std::chrono::milliseconds maxOvershoot{0};  // longest call past its deadline (<= 0: none)
  std::uint64_t overDeadline = 0;             // calls past deadline + slack
  std::chrono::milliseconds longestUnavailable{0};
  std::string longestUnavailableKey;
  std::uint64_t keysUnavailable = 0;       // keys that saw at least one failed call
  std::uint64_t keysUnavailableAtEnd = 0;  // keys whose last call failed
  std::map<std::string, std::uint64_t> errorsByCode;

  // One line for the issue note's table.
  std::string line() const {
    std::string codes;
    for (const auto& [name, n] : errorsByCode) {
      codes += (codes.empty() ? "" : ",") + name + ":" + std::to_string(n);
    }
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "acked=%llu lost=%llu(keys=%llu) doubled=%llu(keys=%llu) unknown=%llu "
                  "phantom=%llu unreadable=%llu max_unavailable_ms=%lld(%s) keys_unavailable=%llu "
                  "at_end=%llu max_overshoot_ms=%lld over_deadline=%llu calls=%llu denied=%llu "
                  "errors=%llu{%s}",
                  u(acked), u(lost), u(keysLost), u(doubled), u(keysDoubled), u(unknown),
                  u(phantom), u(unreadable), static_cast<long long>(longestUnavailable.count()),
                  longestUnavailableKey.c_str(), u(keysUnavailable), u(keysUnavailableAtEnd),
                  static_cast<long long>(maxOvershoot.count()), u(overDeadline), u(calls),
                  u(denied), u(errors), codes.c_str());
    return buf;
  }

 private:
  static unsigned long long u(std::uint64_t v) { return static_cast<unsigned long long>(v); }
};

// Grants acknowledged in a time window, and how many of them are on keys found lost or doubled.
struct WindowStats {
  std::uint64_t acked = 0, onLostKeys = 0, onDoubledKeys = 0;
};

struct AuditResult {
  AuditSummary summary;
  std::vector<KeyVerdict> keys;  // by key index
  std::vector<AuditCall> calls;

  // Grants whose acknowledgement arrived in [from, to).
  WindowStats window(FaultClock::time_point from, FaultClock::time_point to) const {
    WindowStats w;
    for (const auto& c : calls) {
      if (c.outcome != AuditCall::kGranted || c.end < from || c.end >= to) continue;
      ++w.acked;
      if (keys[c.key].lost() > 0) ++w.onLostKeys;
      if (keys[c.key].doubled() > 0) ++w.onDoubledKeys;
    }
    return w;
  }
  // The worst keys ("key: acked 2 > capacity 1"), at most `n`, for a failure message.
  std::string worst(std::size_t n = 5) const {
    std::string out;
    for (const auto& k : keys) {
      if (n == 0) break;
      if (k.doubled() == 0 && k.lost() == 0) continue;
      out += "  " + k.key + ": acked " + std::to_string(k.acked) + ", consumed " +
             std::to_string(k.consumed) + ", capacity " + std::to_string(k.capacity) +
             ", unknown " + std::to_string(k.unknown) + "\n";
      --n;
    }
    return out;
  }
};

class GrantAudit {
 public:
  GrantAudit(std::vector<std::string> seeds, AuditOptions options) : options_(std::move(options)) {
    const std::size_t n =
        options_.clients ? options_.clients : std::max<std::size_t>(1, seeds.size());
    for (std::size_t i = 0; i < n; ++i) {
      ClientOptions c;
      c.seeds = seeds;
      if (!seeds.empty())
        std::rotate(c.seeds.begin(),
                    c.seeds.begin() + static_cast<std::ptrdiff_t>(i % seeds.size()), c.seeds.end());
      c.requestTimeout = options_.deadline;
      clients_.push_back(std::make_unique<Client>(c));
    }
  }
  // Callers made by `makeCaller` instead of the Clients: one Client, seeded with `seeds`, only
  // reads the final state (finish(), servedWithin()).
  GrantAudit(std::vector<std::string> seeds, AuditOptions options, AuditCallerFactory makeCaller)
      : GrantAudit(std::move(seeds), oneClient(std::move(options))) {
    makeCaller_ = std::move(makeCaller);
  }
  ~GrantAudit() {
    stopCallers();
    for (auto& c : clients_) c->stop();
  }
  GrantAudit(const GrantAudit&) = delete;
  GrantAudit& operator=(const GrantAudit&) = delete;

  // Starts the clients and the callers. Empty on success, else why not.
  std::string start() {
    for (auto& c : clients_) {
      if (auto started = c->start(); !started) return started.error().message();
    }
    begin_ = FaultClock::now();
    for (int t = 0; t < options_.callers; ++t) {
      spawnCaller(makeCaller_
                      ? makeCaller_(t)
                      : clientCaller(*clients_[static_cast<std::size_t>(t) % clients_.size()]));
    }
    return {};
  }

  // Starts one more client, with `seeds`, and `callers` more callers on it, on the same keys: a
  // host that starts during the run (after a fault) and knows only these members. Empty on
  // success.
  std::string addCallers(std::vector<std::string> seeds, int callers) {
    ClientOptions c;
    c.seeds = std::move(seeds);
    c.requestTimeout = options_.deadline;
    auto client = std::make_unique<Client>(c);
    if (auto started = client->start(); !started) return started.error().message();
    clients_.push_back(std::move(client));
    for (int t = 0; t < callers; ++t) spawnCaller(clientCaller(*clients_.back()));
    return {};
  }

  // The first client (its first seed is the first member).
  Client& client() { return *clients_.front(); }
  const AuditOptions& options() const { return options_; }

  // Waits up to `limit` until the callers have `more` grants acknowledged beyond those they had
  // at this call: load that really ran, instead of a guess at how long it takes. False if not.
  bool waitForGrants(std::uint64_t more, std::chrono::milliseconds limit) {
    const std::uint64_t target = granted_.load() + more;
    return eventually([&] { return granted_.load() >= target; }, limit);
  }

  // Calls so far, counted as they end: for figures while the load runs (finish() has them all).
  struct Progress {
    std::uint64_t granted = 0;
    std::uint64_t answered = 0;  // granted or denied
    std::uint64_t failed = 0;    // an error
  };
  Progress progress() const { return Progress{granted_.load(), answered_.load(), failed_.load()}; }

  // Waits up to `limit` until every fixed bucket can be read (GetEntry succeeds); returns the
  // keys that still cannot, each with its last error.
  std::vector<std::string> servedWithin(std::chrono::milliseconds limit) {
    std::vector<std::uint32_t> keys(options_.fixedBuckets);
    for (std::uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
    std::vector<std::string> out;
    for (const auto& r : readAll(keys, limit)) {
      if (!r.second.empty()) out.push_back(r.second);
    }
    return out;
  }

  // Stops the callers, reads every touched bucket's final state (retrying up to `readLimit`)
  // and checks the calls against it.
  AuditResult finish(std::chrono::milliseconds readLimit = std::chrono::seconds(10)) {
    stopCallers();
    AuditResult r;
    for (auto& v : perCaller_) r.calls.insert(r.calls.end(), v.begin(), v.end());
    perCaller_.clear();
    std::uint32_t maxKey = 0;
    for (const auto& c : r.calls) maxKey = std::max(maxKey, c.key + 1);
    r.keys.resize(maxKey);
    std::vector<std::vector<const AuditCall*>> byKey(maxKey);
    for (const auto& c : r.calls) byKey[c.key].push_back(&c);
    std::vector<std::uint32_t> touched;
    for (std::uint32_t k = 0; k < maxKey; ++k) {
      r.keys[k].key = keyName(k);
      r.keys[k].capacity = capacityOf(k);
      if (!byKey[k].empty()) touched.push_back(k);
    }
    const auto finals = readAll(touched, readLimit);
    for (std::size_t i = 0; i < touched.size(); ++i) {
      KeyVerdict& v = r.keys[touched[i]];
      v.readable = finals[i].second.empty();
      if (v.readable && finals[i].first.exists) {
        v.consumed = v.capacity - decode<BucketState>(finals[i].first.value).tokens;
      }
    }
    AuditSummary& s = r.summary;
    for (std::uint32_t k = 0; k < maxKey; ++k) {
      if (byKey[k].empty()) continue;
      KeyVerdict& v = r.keys[k];
      auto& calls = byKey[k];
      std::sort(calls.begin(), calls.end(),
                [](const AuditCall* a, const AuditCall* b) { return a->start < b->start; });
      std::optional<FaultClock::time_point> runStart;
      for (const AuditCall* c : calls) {
        if (c->outcome == AuditCall::kGranted) ++v.acked;
        if (c->unknown) ++v.unknown;
        if (c->outcome != AuditCall::kError) {
          runStart.reset();
          continue;
        }
        if (!runStart) runStart = c->start;
        v.longestUnavailable =
            std::max(v.longestUnavailable,
                     std::chrono::duration_cast<std::chrono::milliseconds>(c->end - *runStart));
      }
      v.unavailableAtEnd = calls.back()->outcome == AuditCall::kError;
      ++s.keys;
      if (!v.readable) ++s.unreadable;
      if (v.lost() > 0) ++s.keysLost;
      if (v.doubled() > 0) ++s.keysDoubled;
      s.lost += static_cast<std::uint64_t>(v.lost());
      s.doubled += static_cast<std::uint64_t>(v.doubled());
      if (v.readable && v.consumed > v.acked + v.unknown) {
        s.phantom += static_cast<std::uint64_t>(v.consumed - v.acked - v.unknown);
      }
      if (v.longestUnavailable.count() > 0 || v.unavailableAtEnd) ++s.keysUnavailable;
      if (v.unavailableAtEnd) ++s.keysUnavailableAtEnd;
      if (v.longestUnavailable > s.longestUnavailable) {
        s.longestUnavailable = v.longestUnavailable;
        s.longestUnavailableKey = v.key;
      }
    }
    s.maxOvershoot = -options_.deadline;
    for (const auto& c : r.calls) {
      ++s.calls;
      if (c.outcome == AuditCall::kGranted) ++s.acked;
      if (c.outcome == AuditCall::kDenied) ++s.denied;
      if (c.outcome == AuditCall::kError) {
        ++s.errors;
        ++s.errorsByCode[errcName(c.code)];
      }
      if (c.unknown) ++s.unknown;
      const auto over = std::chrono::duration_cast<std::chrono::milliseconds>(c.end - c.start) -
                        options_.deadline;
      s.maxOvershoot = std::max(s.maxOvershoot, over);
      if (over > options_.slack) ++s.overDeadline;
    }
    return r;
  }

  std::string keyName(std::uint32_t k) const {
    if (k < options_.fixedBuckets) return options_.prefix + "-f" + std::to_string(k);
    const std::uint32_t f = k - options_.fixedBuckets;
    return options_.prefix + "-g" + std::to_string(f / options_.freshBuckets) + "-" +
           std::to_string(f % options_.freshBuckets);
  }
  std::int64_t capacityOf(std::uint32_t k) const {
    return k < options_.fixedBuckets ? options_.fixedCapacity : options_.freshCapacity;
  }

 private:
  bool freshEnabled() const { return options_.freshWindow.count() > 0 && options_.freshBuckets; }

  static AuditOptions oneClient(AuditOptions o) {
    o.clients = 1;
    return o;
  }

  // Takes the token with `client`'s TokenBucketAcquire.
  static AuditCaller clientCaller(Client& client) {
    return [&client](const std::string& key, std::int64_t capacity) {
      CallOutcome o;
      auto r = client.invoke(key, TokenBucketAcquire{neverRefills(capacity)});
      if (r) {
        o.outcome = r->granted ? AuditCall::kGranted : AuditCall::kDenied;
      } else {
        o.code = r.error().code().value();
        o.unknown = outcomeUnknown(r.error());
      }
      return o;
    };
  }

  void callLoop(const AuditCaller& call, std::vector<AuditCall>& out) {
    for (std::uint64_t i = 0; !stop_.load(std::memory_order_relaxed); ++i) {
      AuditCall c;
      c.start = FaultClock::now();
      if (freshEnabled() && (i % 2 == 1 || options_.fixedBuckets == 0)) {
        const auto gen = static_cast<std::uint32_t>((c.start - begin_) / options_.freshWindow);
        c.key = options_.fixedBuckets + gen * options_.freshBuckets +
                static_cast<std::uint32_t>(freshCursor_++ % options_.freshBuckets);
      } else {
        c.key = static_cast<std::uint32_t>(fixedCursor_++ % options_.fixedBuckets);
      }
      const CallOutcome o = call(keyName(c.key), capacityOf(c.key));
      c.end = FaultClock::now();
      c.outcome = o.outcome;
      if (o.outcome != AuditCall::kError) {
        if (o.outcome == AuditCall::kGranted) granted_.fetch_add(1, std::memory_order_relaxed);
        answered_.fetch_add(1, std::memory_order_relaxed);
      } else {
        c.code = o.code;
        c.unknown = o.unknown;
        failed_.fetch_add(1, std::memory_order_relaxed);
      }
      out.push_back(c);
      std::this_thread::sleep_for(options_.pacing);
    }
  }

  void spawnCaller(AuditCaller call) {
    std::vector<AuditCall>& record = perCaller_.emplace_back();
    threads_.emplace_back([this, call = std::move(call), &record] { callLoop(call, record); });
  }

  void stopCallers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  // GetEntry of each key through the first client, at most kReadWindow in flight; the keys that
  // failed are read again, round after round, until none fails or `limit` passes. Takes at most
  // `limit` plus one deadline. For each key: the snapshot, and "" or "key: its last error".
  std::vector<std::pair<EntrySnapshot, std::string>> readAll(const std::vector<std::uint32_t>& keys,
                                                             std::chrono::milliseconds limit) {
    static constexpr std::size_t kReadWindow = 256;
    struct Round {
      std::mutex mu;
      std::condition_variable cv;
      std::size_t inflight = 0;
      std::vector<std::size_t> failed;
      std::vector<std::pair<EntrySnapshot, std::string>> out;
    };
    auto round = std::make_shared<Round>();  // outlives a completion that notifies late
    round->out.resize(keys.size());
    std::vector<std::size_t> pending(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) pending[i] = i;
    const auto deadline = FaultClock::now() + limit;
    for (;;) {
      for (std::size_t i : pending) {
        {
          std::unique_lock lock(round->mu);
          round->cv.wait(lock, [&] { return round->inflight < kReadWindow; });
          ++round->inflight;
        }
        std::string name = keyName(keys[i]);
        client().invokeAsync(name, GetEntry{}, [round, i, name](Result<EntrySnapshot> r) {
          std::lock_guard lock(round->mu);
          if (r) {
            round->out[i] = {*r, {}};
          } else {
            round->out[i].second = name + ": " + r.error().message();
            round->failed.push_back(i);
          }
          --round->inflight;
          round->cv.notify_all();
        });
      }
      std::unique_lock lock(round->mu);
      round->cv.wait(lock, [&] { return round->inflight == 0; });
      if (round->failed.empty() || FaultClock::now() >= deadline) break;
      pending = std::exchange(round->failed, {});
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // retry interval
    }
    std::lock_guard lock(round->mu);
    return round->out;
  }

  AuditOptions options_;
  std::vector<std::unique_ptr<Client>> clients_;
  AuditCallerFactory makeCaller_;  // empty: the callers use clients_
  FaultClock::time_point begin_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> granted_{0};               // grants acknowledged to the callers so far
  std::atomic<std::uint64_t> answered_{0}, failed_{0};  // calls answered, calls failed so far
  std::atomic<std::uint64_t> fixedCursor_{0}, freshCursor_{0};
  std::vector<std::thread> threads_;
  // Each caller's record, merged by finish(); a deque, so that adding callers moves none.
  std::deque<std::vector<AuditCall>> perCaller_;
};

}  // namespace ingrid::testing
