// A program that rate-limits through a thin client: it holds no data and sends each acquire
// straight to the bucket's primary in the cluster (start one with ingrid-node first).
//
//   thin_client --seed 127.0.0.1:7400 [--requests 50]
// Checks one bucket (10 per minute) request by request, then a hot bucket through the batching
// limiter with many requests in flight at once, and prints what was granted.
#include <asio/use_future.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/client.h>
#include <ingrid/rate_limiter.h>

int main(int argc, char** argv) {
  ingrid::ClientOptions options;
  int requests = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seed"))
      options.seeds.emplace_back(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--requests"))
      requests = std::atoi(argv[i + 1]);
  }
  if (options.seeds.empty() || requests <= 0) {
    std::fprintf(stderr, "usage: thin_client --seed HOST:PORT [--requests N>0]\n");
    return 2;
  }
  ingrid::Client client(options);
  if (auto started = client.start(); !started) {
    std::fprintf(stderr, "cannot reach the cluster: %s\n", started.error().message().c_str());
    return 1;
  }
  const auto perMinute = ingrid::BucketParams::perPeriod(10, 60 * ingrid::kNanosPerSecond);

  // One request at a time, as a server checks each request it handles.
  ingrid::RateLimiter limiter(client, "thin-client:alice", perMinute);
  int granted = 0, refused = 0;
  for (int i = 0; i < requests; ++i) {
    auto answer = limiter.tryAcquire(1);
    if (!answer) {
      std::fprintf(stderr, "error: %s\n", answer.error().message().c_str());
      return 1;
    }
    (answer->granted ? granted : refused)++;
  }
  std::printf("one at a time: granted %d, refused %d\n", granted, refused);

  // Many at once on a hot key: the batching limiter sends them in a few batch messages.
  ingrid::BatchingRateLimiter hot(client, "thin-client:hot", perMinute);
  std::vector<std::future<ingrid::Result<ingrid::AcquireAnswer>>> pending;
  for (int i = 0; i < requests; ++i) pending.push_back(hot.tryAcquireAsync(1, asio::use_future));
  int hotGranted = 0;
  for (auto& f : pending) {
    auto answer = f.get();
    if (answer && answer->granted) ++hotGranted;
  }
  const auto stats = hot.stats();
  std::printf("batched: granted %d of %d in %llu messages\n", hotGranted, requests,
              static_cast<unsigned long long>(stats.sends));
  return 0;
}
