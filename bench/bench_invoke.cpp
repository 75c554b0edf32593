// In-process invoke benchmark: token-bucket acquires through an embedded Node.
//
// Closed loop: `inflight` chains each keep one invokeAsync outstanding and issue the next from its
// completion, for `seconds`. Scenarios: every chain on one hot key; chains on `keys` keys chosen at
// random. Prints ops/s, latency percentiles (submit -> completion callback) and peak RSS.
//
//   bench_invoke [--seconds S] [--inflight N] [--keys K] [--workers W]
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ingrid/cluster/node.h>
#include <ingrid/processors/token_bucket.h>

#include "bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  double seconds = 2.0;
  int inflight = 64;
  int keys = 10000;
  unsigned workers = 2;
};

// One closed-loop chain of requests.
struct Chain {
  ingrid::Node* node = nullptr;
  const std::vector<std::string>* keys = nullptr;
  Clock::time_point deadline;
  std::mt19937_64 rng;
  std::vector<std::int64_t> latencies;
  std::promise<void> finished;

  void next() {
    const std::string& key = (*keys)[rng() % keys->size()];
    const auto start = Clock::now();
    // Always-granting bucket: we measure the invoke path, not denials.
    const ingrid::TokenBucketAcquire acquire{
        ingrid::BucketParams::perPeriod(1'000'000'000'000, ingrid::kNanosPerSecond), 1};
    node->invokeAsync(key, acquire, [this, start](ingrid::Result<ingrid::AcquireAnswer> r) {
      const auto end = Clock::now();
      if (r.ok()) latencies.push_back((end - start).count());
      if (end >= deadline || !r.ok()) {
        finished.set_value();
      } else {
        next();
      }
    });
  }
};

void run(const char* name, ingrid::Node& node, const Config& cfg, int keyCount) {
  std::vector<std::string> keys;
  for (int i = 0; i < keyCount; ++i) keys.push_back("bench-key-" + std::to_string(i));
  std::vector<std::unique_ptr<Chain>> chains;
  const auto begin = Clock::now();
  const auto deadline = begin + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(cfg.seconds));
  for (int i = 0; i < cfg.inflight; ++i) {
    auto c = std::make_unique<Chain>();
    c->node = &node;
    c->keys = &keys;
    c->deadline = deadline;
    c->rng.seed(static_cast<std::uint64_t>(i) + 1);
    c->latencies.reserve(1 << 16);
    chains.push_back(std::move(c));
  }
  for (auto& c : chains) c->next();
  std::vector<std::int64_t> all;
  for (auto& c : chains) {
    c->finished.get_future().wait();
    all.insert(all.end(), c->latencies.begin(), c->latencies.end());
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  ingrid::bench::report(name, std::move(all), elapsed);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds"))
      cfg.seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight"))
      cfg.inflight = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--keys"))
      cfg.keys = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workers"))
      cfg.workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  if (cfg.seconds <= 0 || cfg.seconds > 600 || cfg.inflight <= 0 || cfg.keys <= 0 ||
      cfg.workers == 0) {
    std::fprintf(stderr,
                 "usage: bench_invoke [--seconds 0<S<=600] [--inflight N>0] [--keys K>0] "
                 "[--workers W>0]\n");
    return 2;
  }
  ingrid::Node node(ingrid::NodeOptions{.workerThreads = cfg.workers, .completionThreads = 1});
  if (!node.start()) return 1;
  std::printf("bench_invoke: %.1f s per scenario, %d in flight, %u workers\n", cfg.seconds,
              cfg.inflight, cfg.workers);
  run("acquire, 1 key", node, cfg, 1);
  run("acquire, many keys", node, cfg, cfg.keys);
  Config one = cfg;
  one.inflight = 1;
  run("acquire, 1 key, 1 in flight", node, one, 1);
  node.stop();
  return 0;
}
