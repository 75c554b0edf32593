#include <ingrid/node.h>

#include <catch2/catch.hpp>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/processors/counter.h>
#include <ingrid/processors/token_bucket.h>

#include "cluster/shard/partition_workers.h"
#include "support/eventually.h"

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

// A processor that writes, then throws: its write must not survive.
struct WriteThenThrow {
  static constexpr std::string_view kName = "test.WriteThenThrow";
  using Result = std::int64_t;
  Result process(MutableEntry& entry, Nanos) const {
    entry.setValue(encode(std::int64_t{999}));
    throw std::runtime_error("deliberate failure after writing");
  }
  template <class A>
  void serialize(A&) {}
};

// Records whether process() ran on a partition worker thread.
struct WhereAmI {
  static constexpr std::string_view kName = "test.WhereAmI";
  using Result = bool;
  Result process(MutableEntry&, Nanos) const { return PartitionWorkers::onAnyWorkerThread(); }
  template <class A>
  void serialize(A&) {}
};

ProcessorRegistry testRegistry() {
  ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  registry.add<WriteThenThrow>();
  registry.add<WhereAmI>();
  return registry;
}

struct StartedNode {
  explicit StartedNode(unsigned workers = 2, std::shared_ptr<ManualClock> c = nullptr)
      : clock(c ? c : std::make_shared<ManualClock>(1'000'000'000)),
        node(
            NodeOptions{
                .partitions = 64, .workerThreads = workers, .completionThreads = 2, .clock = clock},
            testRegistry()) {
    REQUIRE(node.start().ok());
  }
  std::shared_ptr<ManualClock> clock;
  Node node;
};

using ingrid::testing::eventually;  // bounded waits for conditions (support/eventually.h)

}  // namespace

TEST_CASE("T threads x M invokeAsync acquires on one key grant exactly the capacity",
          "[cluster][node][atomicity]") {
  StartedNode n(2);  // the clock is frozen: no refill during the test
  constexpr int kThreads = 8, kPerThread = 500;
  constexpr std::int64_t kCapacity = 1000;
  const TokenBucketAcquire acquire{BucketParams::perPeriod(kCapacity, kNanosPerSecond), 1};
  std::atomic<std::int64_t> granted{0}, denied{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<std::future<Result<AcquireAnswer>>> pending;
      for (int i = 0; i < kPerThread; ++i) {
        pending.push_back(n.node.invokeAsync("hot", acquire, asio::use_future));
      }
      for (auto& f : pending) {
        auto r = f.get();
        if (!r) {
          ++failed;
        } else {
          (r->granted ? granted : denied)++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failed == 0);
  CHECK(granted == kCapacity);
  CHECK(denied == kThreads * kPerThread - kCapacity);
}

TEST_CASE("Concurrent acquires on many keys grant exactly each key's capacity",
          "[cluster][node][atomicity]") {
  StartedNode n(2);
  constexpr int kKeys = 50, kThreads = 4, kPerKeyPerThread = 10;
  constexpr std::int64_t kCapacity = 25;
  const TokenBucketAcquire acquire{BucketParams::perPeriod(kCapacity, kNanosPerSecond), 1};
  std::vector<std::atomic<int>> granted(kKeys);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<std::pair<int, std::future<Result<AcquireAnswer>>>> pending;
      for (int i = 0; i < kPerKeyPerThread; ++i) {
        for (int k = 0; k < kKeys; ++k) {
          pending.emplace_back(
              k, n.node.invokeAsync("key-" + std::to_string(k), acquire, asio::use_future));
        }
      }
      for (auto& [k, f] : pending) {
        auto r = f.get();
        if (!r) {
          ++failed;  // Catch2 assertions are not thread-safe: count here, check below
        } else if (r->granted) {
          ++granted[k];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failed == 0);
  for (int k = 0; k < kKeys; ++k) CHECK(granted[k] == kCapacity);
}

TEST_CASE("4 threads x 1000 increments total exactly 4000", "[cluster][node][atomicity]") {
  StartedNode n(2);
  std::atomic<int> callbacks{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        n.node.invokeAsync("counter", Increment{1}, [&](Result<std::int64_t> r) {
          if (!r) ++failed;
          ++callbacks;
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(eventually([&] { return callbacks.load() == 4000; }));
  CHECK(failed == 0);
  auto total = n.node.invoke("counter", GetCounter{});
  REQUIRE(total.ok());
  CHECK(*total == 4000);
}

TEST_CASE("A processor that throws changes nothing and its error names it",
          "[cluster][node][failure]") {
  StartedNode n;
  REQUIRE(n.node.invoke("k", Increment{41}).ok());
  auto failed = n.node.invoke("k", WriteThenThrow{});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error() == Errc::processor_failed);
  CHECK_THAT(failed.error().message(), Catch::Contains("test.WriteThenThrow") &&
                                           Catch::Contains("deliberate failure after writing"));
  auto after = n.node.invoke("k", GetCounter{});
  REQUIRE(after.ok());
  CHECK(*after == 41);  // the 999 written before the throw was discarded

  auto overflow = n.node.invoke("k", Increment{INT64_MAX});
  REQUIRE_FALSE(overflow.ok());
  CHECK_THAT(overflow.error().message(), Catch::Contains("ingrid.Increment"));
  CHECK(*n.node.invoke("k", GetCounter{}) == 41);
}

TEST_CASE("Bad requests get errors that name the thing and the reason", "[cluster][node]") {
  StartedNode n;
  SECTION("unknown processor") {
    std::promise<Result<std::string>> p;
    n.node.invokeRaw("k", "no.SuchProcessor", "",
                     [&](Result<std::string> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::unknown_processor);
    CHECK_THAT(r.error().message(), Catch::Contains("no.SuchProcessor"));
  }
  SECTION("arguments that do not decode") {
    std::promise<Result<std::string>> p;
    n.node.invokeRaw("k", Increment::kName, "\x01",
                     [&](Result<std::string> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::invalid_argument);
    CHECK_THAT(r.error().message(), Catch::Contains("ingrid.Increment"));
  }
  SECTION("invalid bucket parameters") {
    auto r = n.node.invoke("k", TokenBucketAcquire{BucketParams{}, 1});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::invalid_argument);
    CHECK_THAT(r.error().message(), Catch::Contains("capacity"));
  }
  SECTION("key too long") {
    auto r = n.node.invoke(std::string(kMaxKeyBytes + 1, 'x'), GetCounter{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::invalid_key);
  }
  // The node keeps serving after each of these.
  CHECK(n.node.invoke("k", Increment{1}).ok());
}

TEST_CASE("Completions never run on a partition worker", "[cluster][node][threads]") {
  StartedNode n;
  SECTION("callback without an associated executor") {
    std::promise<std::pair<bool, bool>> where;
    n.node.invokeAsync("k", WhereAmI{}, [&](Result<bool> r) {
      where.set_value({r.ok() && *r, PartitionWorkers::onAnyWorkerThread()});
    });
    auto [processOnWorker, completionOnWorker] = where.get_future().get();
    CHECK(processOnWorker);
    CHECK_FALSE(completionOnWorker);
  }
  SECTION("coroutine resumes on its own executor") {
    asio::io_context io;
    bool resumedOnWorker = true;
    bool processOnWorker = false;
    std::thread::id resumedOn;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto r = co_await n.node.invokeAsync("k", WhereAmI{}, asio::use_awaitable);
          processOnWorker = r.ok() && *r;
          resumedOnWorker = PartitionWorkers::onAnyWorkerThread();
          resumedOn = std::this_thread::get_id();
        },
        asio::detached);
    io.run();
    CHECK(processOnWorker);
    CHECK_FALSE(resumedOnWorker);
    CHECK(resumedOn == std::this_thread::get_id());
  }
  SECTION("blocking invoke from a worker is refused, not deadlocked") {
    std::promise<Error> refused;
    n.node.invokeRaw("k", WhereAmI::kName, encode(WhereAmI{}), [&](Result<std::string>) {
      // This completion runs on the worker (erased form); a blocking invoke here must refuse.
      auto r = n.node.invoke("other", GetCounter{});
      refused.set_value(r.ok() ? Error() : r.error());
    });
    CHECK(refused.get_future().get() == Errc::would_deadlock);
  }
}

TEST_CASE("partitionExecutor: the one thread of partitions and network, while the node runs",
          "[cluster][node][threads]") {
  {
    Node local(NodeOptions{.partitions = 16});  // no network: no network thread
    REQUIRE(local.start().ok());
    CHECK_FALSE(local.partitionExecutor());
  }
  NodeOptions o;
  o.partitions = 64;
  o.listenAddress = "127.0.0.1:0";
  SECTION("worker threads: none") {
    o.workerThreads = 2;
    Node node(o, testRegistry());
    REQUIRE(node.start().ok());
    CHECK_FALSE(node.partitionExecutor());
  }
  SECTION("partitions on the network thread: a call made there runs in place, its answer posted") {
    o.partitionsOnNetworkThread = true;
    Node node(o, testRegistry());
    CHECK_FALSE(node.partitionExecutor());  // not started
    REQUIRE(node.start().ok());
    const auto ex = node.partitionExecutor();
    REQUIRE(ex);
    REQUIRE(node.invoke("warm", WhereAmI{}).ok());  // serving: the first lease is granted
    struct Seen {
      bool returned = false;
      bool onWorker = false;
      Error blocking;
      bool ranInPlace = false;
      bool answeredAfterReturn = false;
      bool answeredThere = false;
      bool processOnWorker = false;
    } seen;
    std::promise<void> done;
    asio::post(*ex, [&] {
      seen.onWorker = PartitionWorkers::onAnyWorkerThread();
      const auto blocking = node.invoke("b", GetCounter{});
      seen.blocking = blocking.ok() ? Error() : blocking.error();
      const std::uint64_t before = node.TEST_executed();
      node.invokeAsync("k", WhereAmI{}, asio::bind_executor(*ex, [&](Result<bool> r) {
                         seen.answeredAfterReturn = seen.returned;
                         seen.answeredThere = ex->running_in_this_thread();
                         seen.processOnWorker = r.ok() && *r;
                         done.set_value();
                       }));
      seen.ranInPlace = node.TEST_executed() == before + 1;
      seen.returned = true;
    });
    done.get_future().wait();
    CHECK(seen.onWorker);
    CHECK(seen.blocking == Errc::would_deadlock);
    CHECK(seen.ranInPlace);
    CHECK(seen.answeredAfterReturn);
    CHECK(seen.answeredThere);
    CHECK(seen.processOnWorker);
    node.stop();
    CHECK_FALSE(node.partitionExecutor());
  }
}

TEST_CASE("Idle entries expire: invisible at once, reclaimed by the sweep",
          "[cluster][node][expiry]") {
  auto clock = std::make_shared<ManualClock>(1'000'000'000);
  Node node(NodeOptions{.partitions = 16,
                        .workerThreads = 2,
                        .clock = clock,
                        .expirySweepInterval = 1ms,
                        .expirySweepEntries = 1024});
  REQUIRE(node.start().ok());
  const BucketParams params = BucketParams::perPeriod(10, kNanosPerSecond);  // 10 per second
  for (int k = 0; k < 20; ++k) {
    auto r = node.invoke("bucket-" + std::to_string(k), TokenBucketAcquire{params, 5});
    REQUIRE(r.ok());
    REQUIRE(r->granted);
  }
  CHECK(node.TEST_entryCount() == 20);
  // Each bucket has 5 left, so it is full again (and expires) 500 ms later.
  clock->advance(kNanosPerSecond * 4 / 10);  // 9 tokens: still there
  CHECK(node.invoke("bucket-0", TokenBucketAcquire{params, 10})->granted == false);
  CHECK(node.TEST_entryCount() == 20);
  clock->advance(kNanosPerSecond * 2 / 10);  // every bucket is full again: all expired
  CHECK(eventually([&] { return node.TEST_entryCount() == 0; }));
  CHECK(node.reclaimedCount() == 20);
  // A fresh bucket is created on next use.
  CHECK(node.invoke("bucket-1", TokenBucketAcquire{params, 10})->granted);
}

TEST_CASE("Start and stop: refused before start and after stop, drained in between",
          "[cluster][node][lifecycle]") {
  Node node(NodeOptions{.partitions = 8, .workerThreads = 2});
  auto early = node.invoke("k", Increment{1});
  REQUIRE_FALSE(early.ok());
  CHECK(early.error() == Errc::not_running);
  REQUIRE(node.start().ok());
  CHECK_FALSE(node.start().ok());  // started once

  // Everything admitted before stop() completes; nothing is dropped.
  std::atomic<int> ok{0}, refused{0};
  std::vector<std::future<Result<std::int64_t>>> pending;
  for (int i = 0; i < 2000; ++i)
    pending.push_back(node.invokeAsync("c", Increment{1}, asio::use_future));
  node.stop();
  for (auto& f : pending) (f.get().ok() ? ok : refused)++;
  CHECK(ok == 2000);
  auto late = node.invoke("k", Increment{1});
  REQUIRE_FALSE(late.ok());
  CHECK(late.error() == Errc::shutting_down);
  // The completion threads are gone, yet an asynchronous call still completes (refused).
  auto lateAsync = node.invokeAsync("k", Increment{1}, asio::use_future);
  REQUIRE(lateAsync.wait_for(10s) == std::future_status::ready);
  CHECK(lateAsync.get().error() == Errc::shutting_down);
  node.stop();  // idempotent
}

TEST_CASE("Nodes start and stop many times under load", "[cluster][node][lifecycle]") {
  for (int round = 0; round < 20; ++round) {
    Node node(NodeOptions{.partitions = 32, .workerThreads = 2});
    REQUIRE(node.start().ok());
    std::atomic<int> done{0};
    std::thread caller([&] {
      for (int i = 0; i < 200; ++i) {
        node.invokeAsync("k" + std::to_string(i % 7), Increment{1},
                         [&](Result<std::int64_t>) { ++done; });
      }
    });
    caller.join();
    node.stop();
    CHECK(done == 200);  // every admitted or refused call completed exactly once
  }
}

TEST_CASE("Invalid options are refused with a reason", "[cluster][node]") {
  Node node(NodeOptions{.partitions = 0});
  auto started = node.start();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error() == Errc::invalid_configuration);
  CHECK_THAT(started.error().message(), Catch::Contains("partitions"));

  auto refused = [](NodeOptions o, const std::string& says) {
    Node n(std::move(o));
    auto r = n.start();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::invalid_configuration);
    CHECK_THAT(r.error().message(), Catch::Contains(says));
  };
  using std::chrono::milliseconds;
  refused(NodeOptions{.heartbeatInterval = milliseconds(0)}, "heartbeatInterval (0 ms)");
  refused(NodeOptions{.heartbeatInterval = milliseconds(500), .failureTimeout = milliseconds(400)},
          "below failureTimeout (400 ms)");
  // The default lease is failureTimeout / 2: 300 ms, not above the 300 ms heartbeat.
  refused(NodeOptions{.heartbeatInterval = milliseconds(300), .failureTimeout = milliseconds(600)},
          "leaseDuration (300 ms, failureTimeout / 2) must be above heartbeatInterval (300 ms)");
  refused(NodeOptions{.failureTimeout = milliseconds(3000), .leaseDuration = milliseconds(3000)},
          "leaseDuration (3000 ms) must be above");
}
