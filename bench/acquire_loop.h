// AcquireLoop: `inflight` chains each keep one token-bucket acquire outstanding on a Node or a
// Client until `ops` have completed in all, each chain issuing its next call from the handler of
// its last (so on a Client the loop runs on its I/O thread). The driver allocates nothing per
// call: its handler is one pointer, and keys of up to 15 bytes fit std::string's small buffer.
// Used by bench/bench_allocs and tests/cluster/steady_allocs_test.
// Thread safety: run() is called from one thread; the chains run on the invoker's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include <ingrid/processors/token_bucket.h>

namespace ingrid::bench {

// `count` keys of 11-12 bytes: within libstdc++'s 15-byte small-string buffer, so copying one to
// pass it by value allocates nothing in the caller.
inline std::vector<std::string> smallKeys(int count) {
  std::vector<std::string> keys;
  for (int i = 0; i < count; ++i) keys.push_back("alloc-" + std::to_string(100000 + i));
  return keys;
}

template <class Invoker>
struct AcquireLoop {
  struct Chain {
    AcquireLoop* loop = nullptr;
    std::uint64_t step = 0;
    int id = 0;
  };
  AcquireLoop(Invoker& i, const std::vector<std::string>& k) : invoker(i), keys(k) {}

  Invoker& invoker;
  const std::vector<std::string>& keys;
  TokenBucketAcquire acquire{BucketParams::perPeriod(1'000'000'000'000, kNanosPerSecond), 1};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<int> running{0};
  std::uint64_t ops = 0;
  std::vector<Chain> chains;
  std::promise<void> finished;

  void issue(Chain* c) {
    const std::size_t k =
        (static_cast<std::size_t>(c->id) * 7919 + c->step++ * 104729) % keys.size();
    invoker.invokeAsync(keys[k], acquire, [c](Result<AcquireAnswer> r) {
      AcquireLoop& l = *c->loop;
      if (!r.ok()) l.failed.fetch_add(1, std::memory_order_relaxed);
      if (l.started.fetch_add(1, std::memory_order_relaxed) < l.ops) {
        l.issue(c);
      } else if (l.running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        l.finished.set_value();
      }
    });
  }

  // Runs `n` acquires; false if they did not finish within `limit`.
  bool run(std::uint64_t n, int inflight, std::chrono::seconds limit = std::chrono::minutes(1)) {
    ops = n;
    started = static_cast<std::uint64_t>(inflight);
    running = inflight;
    chains.assign(static_cast<std::size_t>(inflight), Chain{});
    for (int i = 0; i < inflight; ++i) chains[static_cast<std::size_t>(i)] = Chain{this, 0, i};
    auto done = finished.get_future();
    for (auto& c : chains) issue(&c);
    return done.wait_for(limit) == std::future_status::ready;
  }

  // The acquires completed (those started past `ops` by the last chains are not counted).
  std::uint64_t completed(int inflight) const {
    return started.load() - static_cast<std::uint64_t>(inflight);
  }
};

}  // namespace ingrid::bench
