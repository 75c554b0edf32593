// In-process invoke benchmark: token-bucket acquires through an embedded single Node.
//
// Closed loop (closed_loop.h) with `inflight` requests outstanding, for `seconds` per scenario:
// every request on one hot key; requests on `keys` keys at random; one hot key at 1 in flight.
// Prints ops/s, latency percentiles (submit -> completion callback) and peak RSS.
//
//   bench_invoke [--seconds S] [--inflight N] [--keys K] [--workers W]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

#include "closed_loop.h"
#include "report.h"

namespace {

struct Config {
  double seconds = 2.0;
  int inflight = 64;
  int keys = 10000;
  unsigned workers = 2;
};

void run(const char* name, ingrid::Node& node, int inflight, double seconds, int keyCount) {
  std::vector<std::string> keys;
  for (int i = 0; i < keyCount; ++i) keys.push_back("bench-key-" + std::to_string(i));
  // An always-granting bucket: this measures the invoke path, not denials.
  const ingrid::TokenBucketAcquire acquire{
      ingrid::BucketParams::perPeriod(1'000'000'000'000, ingrid::kNanosPerSecond), 1};
  auto op = [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
    const std::uint64_t pick =
        (static_cast<std::uint64_t>(chain) * 0x9E3779B97F4A7C15ULL) ^ (i * 0xBF58476D1CE4E5B9ULL);
    node.invokeAsync(
        keys[pick % keys.size()], acquire,
        [done = std::move(done)](ingrid::Result<ingrid::AcquireAnswer> r) { done(r.ok()); });
  };
  auto result = ingrid::bench::runClosedLoop(op, inflight, seconds);
  ingrid::bench::report(name, std::move(result.latenciesNs), result.seconds);
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
  run("acquire, 1 key", node, cfg.inflight, cfg.seconds, 1);
  run("acquire, many keys", node, cfg.inflight, cfg.seconds, cfg.keys);
  run("acquire, 1 key, 1 in flight", node, 1, cfg.seconds, 1);
  node.stop();
  return 0;
}
