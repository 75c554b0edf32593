// runClosedLoop: `inflight` chains each keep one asynchronous operation outstanding and start
// the next from its completion, until `seconds` pass. Returns the latency of every operation
// that succeeded (start -> completion) and the elapsed time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <vector>

namespace ingrid::bench {

// A key index drawn uniformly from [0, n) for step i of chain `chain`: splitmix64 of the pair, so
// every chain walks its own random sequence (not a sliding window of neighbouring keys).
inline std::size_t uniformIndex(int chain, std::uint64_t i, std::size_t n) {
  std::uint64_t z = (static_cast<std::uint64_t>(chain) << 40) ^ i;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::size_t>(z % n);  // bias below n / 2^64: nothing measurable
}

// op(chain, i, done): start operation i of `chain`; call done(ok) exactly once when it completes.
using Operation = std::function<void(int chain, std::uint64_t i, std::function<void(bool)> done)>;

struct LoopResult {
  std::vector<std::int64_t> latenciesNs;
  double seconds = 0;
  std::uint64_t failures = 0;
};

inline LoopResult runClosedLoop(const Operation& op, int inflight, double seconds) {
  using Clock = std::chrono::steady_clock;
  struct Chain {
    int id = 0;
    std::uint64_t next = 0;
    std::uint64_t failures = 0;
    std::vector<std::int64_t> latencies;
    std::promise<void> finished;
  };
  const auto begin = Clock::now();
  const auto deadline =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::unique_ptr<Chain>> chains;
  for (int i = 0; i < inflight; ++i) {
    chains.push_back(std::make_unique<Chain>());
    chains.back()->id = i;
    chains.back()->latencies.reserve(1 << 16);
  }
  std::function<void(Chain*)> step = [&](Chain* c) {
    const auto start = Clock::now();
    op(c->id, c->next++, [&, c, start](bool ok) {
      const auto end = Clock::now();
      if (ok) {
        c->latencies.push_back((end - start).count());
      } else {
        ++c->failures;
      }
      if (end >= deadline) {
        c->finished.set_value();
      } else {
        step(c);
      }
    });
  };
  for (auto& c : chains) step(c.get());
  LoopResult out;
  for (auto& c : chains) {
    c->finished.get_future().wait();
    out.latenciesNs.insert(out.latenciesNs.end(), c->latencies.begin(), c->latencies.end());
    out.failures += c->failures;
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  return out;
}

}  // namespace ingrid::bench
