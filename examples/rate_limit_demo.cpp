// Embeds an ingrid node and rate-limits a stream of simulated requests across a few API keys.
//
// Each client key gets a token bucket of 5 requests per second. Requests arrive on a simulated
// clock (every 10 ms, round-robin over the clients, the noisy one sending three times as often);
// each is checked with invokeAsync and a callback, and the demo prints what was granted/refused.
#include <asio/use_future.hpp>

#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

int main(int argc, char** argv) {
  int requests = 300;
  if (argc == 3 && std::strcmp(argv[1], "--requests") == 0) requests = std::atoi(argv[2]);
  if (requests <= 0) {
    std::cerr << "usage: rate_limit_demo [--requests N]  (N > 0)\n";
    return 2;
  }

  // A manual clock makes the run reproducible; a real service leaves NodeOptions.clock unset.
  auto clock = std::make_shared<ingrid::ManualClock>(0);
  ingrid::Node node(ingrid::NodeOptions{.workerThreads = 2, .clock = clock});
  if (auto started = node.start(); !started) {
    std::cerr << "cannot start node: " << started.error().message() << "\n";
    return 1;
  }

  const ingrid::BucketParams limit = ingrid::BucketParams::perPeriod(5, ingrid::kNanosPerSecond);
  const std::vector<std::string> clients = {"noisy", "noisy", "noisy", "alice", "bob"};
  std::map<std::string, std::pair<int, int>> tally;  // client -> granted, refused

  for (int i = 0; i < requests; ++i) {
    const std::string& client = clients[i % clients.size()];
    std::promise<void> answered;
    // invokeAsync runs the acquire on the key's partition; the callback runs on the node's
    // completion thread. Here we wait for it so the simulated clock can advance in step.
    node.invokeAsync("api-key:" + client, ingrid::TokenBucketAcquire{limit, 1},
                     [&](ingrid::Result<ingrid::AcquireAnswer> r) {
                       if (!r) {
                         std::cerr << "error: " << r.error().message() << "\n";
                       } else if (r->granted) {
                         ++tally[client].first;
                       } else {
                         ++tally[client].second;
                       }
                       answered.set_value();
                     });
    answered.get_future().wait();
    clock->advance(10'000'000);  // 10 ms between requests
  }

  int granted = 0, refused = 0;
  std::cout << "simulated " << requests << " requests over " << requests * 10
            << " ms, limit 5/s per client\n";
  for (const auto& [client, counts] : tally) {
    std::cout << "  " << client << ": granted " << counts.first << ", refused " << counts.second
              << "\n";
    granted += counts.first;
    refused += counts.second;
  }
  std::cout << "total: granted " << granted << ", refused " << refused << "\n";
  node.stop();
  return granted + refused == requests ? 0 : 1;
}
