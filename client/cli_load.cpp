// `ingrid-cli load`: the closed-loop load generator, for every limiter request (cli_load.h).
#include "client/cli_load.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/batcher.h>

#include "client/cli_answers.h"
#include "closed_loop.h"
#include "report.h"

namespace ingrid::cli {

template <class P>
int runLoad(Client& client, const P& request, const LoadOptions& o) {
  std::vector<std::string> names;
  for (int i = 0; i < o.keys; ++i) names.push_back("load-" + std::to_string(i));
  Batcher<Client, P> batcher(client, {});
  std::atomic<std::uint64_t> granted{0};
  auto op = [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
    // Uniform over the keys: step i of chain c draws its key from a hash of (c, i).
    const std::string& key = names[ingrid::bench::uniformIndex(chain, i, names.size())];
    auto onAnswer = [&granted, done = std::move(done)](ingrid::Result<typename P::Result> r) {
      if (r && isGranted(*r)) granted.fetch_add(1, std::memory_order_relaxed);
      done(r.ok());
    };
    if (o.batching) {
      batcher.invokeAsync(key, request, std::move(onAnswer));
    } else {
      client.invokeAsync(key, request, std::move(onAnswer));
    }
  };
  const std::uint64_t sentBefore = client.requestsSent();
  auto result = ingrid::bench::runClosedLoop(op, o.concurrency, static_cast<double>(o.seconds));
  const std::uint64_t messages = client.requestsSent() - sentBefore;
  const std::size_t ops = result.latenciesNs.size();
  std::printf(
      "load: %s, %d key(s), %d in flight, batching %s, %.1f s: %llu granted, %llu failed, "
      "%llu messages (%.1f requests per message)\n",
      o.limiter.c_str(), o.keys, o.concurrency, o.batching ? "on" : "off", result.seconds,
      static_cast<unsigned long long>(granted.load()),
      static_cast<unsigned long long>(result.failures), static_cast<unsigned long long>(messages),
      messages ? static_cast<double>(ops + result.failures) / static_cast<double>(messages) : 0.0);
  ingrid::bench::report("load", std::move(result.latenciesNs), result.seconds);
  return 0;
}

template int runLoad(Client&, const TokenBucketAcquire&, const LoadOptions&);
template int runLoad(Client&, const TokenBucketReserve&, const LoadOptions&);
template int runLoad(Client&, const WarmupAcquire&, const LoadOptions&);
template int runLoad(Client&, const GcraThrottle&, const LoadOptions&);
template int runLoad(Client&, const FixedWindowAcquire&, const LoadOptions&);
template int runLoad(Client&, const SlidingLogAcquire&, const LoadOptions&);
template int runLoad(Client&, const SlidingWindowAcquire&, const LoadOptions&);
template int runLoad(Client&, const LeakyMeterAcquire&, const LoadOptions&);
template int runLoad(Client&, const LeakyShaperAcquire&, const LoadOptions&);
template int runLoad(Client&, const ConcurrencyAcquire&, const LoadOptions&);
template int runLoad(Client&, const CompositeBucketAcquire&, const LoadOptions&);

}  // namespace ingrid::cli
