#include <ingrid/batcher.h>

#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <any>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/clock.h>
#include <ingrid/limiter_metrics.h>
#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

constexpr Nanos kStart = 1'000'000'000;
const BucketParams kParams = BucketParams::perPeriod(1000, kNanosPerSecond);

TokenBucketAcquire acquire(std::int64_t tokens, BucketParams params = kParams) {
  return TokenBucketAcquire{params, tokens};
}

// An invoker that records what it is sent and completes nothing by itself: the test takes each
// call and completes it by hand, on the test's thread.
class FakeInvoker {
 public:
  template <class Q>
  struct Taken {
    std::string key;
    Q processor;
    std::shared_ptr<UniqueFunction<void(Result<typename Q::Result>)>> handler;
    void complete(Result<typename Q::Result> r) { (*handler)(std::move(r)); }
  };

  template <EntryProcessor Q, class Token>
  auto invokeAsync(std::string key, const Q& processor, Token&& token) {
    return asio::async_initiate<Token, void(Result<typename Q::Result>)>(
        [this](auto handler, std::string k, Q q) {
          auto h = std::make_shared<UniqueFunction<void(Result<typename Q::Result>)>>(
              std::move(handler));
          std::lock_guard lock(mu_);
          calls_.push_back(Call{std::move(k), std::move(q), std::move(h)});
        },
        token, std::move(key), processor);
  }

  std::size_t pending() const {
    std::lock_guard lock(mu_);
    return calls_.size();
  }

  // The oldest call, if there is one and it sent a Q.
  template <class Q>
  std::optional<Taken<Q>> take() {
    std::lock_guard lock(mu_);
    if (calls_.empty()) return std::nullopt;
    const Q* q = std::any_cast<Q>(&calls_.front().processor);
    if (q == nullptr) return std::nullopt;
    Taken<Q> taken{calls_.front().key, *q,
                   std::static_pointer_cast<UniqueFunction<void(Result<typename Q::Result>)>>(
                       calls_.front().handler)};
    calls_.pop_front();
    return taken;
  }

 private:
  struct Call {
    std::string key;
    std::any processor;
    std::shared_ptr<void> handler;
  };
  mutable std::mutex mu_;
  std::deque<Call> calls_;
};

// A toy batchable processor whose batch form accepts at most 3 requests.
struct AddBatch;
struct Add {
  static constexpr std::string_view kName = "test.Add";
  using Result = std::int64_t;
  using Batch = AddBatch;
  std::int64_t n = 0;
  Result process(MutableEntry&, Nanos) const { return n; }
  static bool joinable(const Add&, const Add&) { return true; }
  static AddBatch batch(std::vector<Add> items);
};
struct AddBatch {
  static constexpr std::string_view kName = "test.AddBatch";
  using Result = std::vector<std::int64_t>;
  static constexpr std::size_t kMaxWants = 3;
  std::vector<std::int64_t> ns;
  Result process(MutableEntry&, Nanos) const { return ns; }
};
AddBatch Add::batch(std::vector<Add> items) {
  AddBatch b;
  for (const Add& a : items) b.ns.push_back(a.n);
  return b;
}
static_assert(BatchableProcessor<Add>);
static_assert(BatchableProcessor<TokenBucketAcquire>);
static_assert(BatchableProcessor<TokenBucketReserve>);
static_assert(BatchableProcessor<WarmupAcquire>);

using Answer = Result<AcquireAnswer>;
using AnswerFuture = std::future<Answer>;

template <class T>
T await(std::future<T>& f) {
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  return f.get();
}

AcquireAnswer answer(std::int64_t remaining) { return AcquireAnswer{true, remaining, 0}; }

// An embedded single node whose clock never moves: no bucket ever refills.
struct FrozenNode {
  FrozenNode()
      : clock(std::make_shared<ManualClock>(kStart)),
        node(NodeOptions{.partitions = 16, .workerThreads = 2, .clock = clock}) {
    REQUIRE(node.start().ok());
  }
  std::shared_ptr<ManualClock> clock;
  Node node;
};

}  // namespace

TEST_CASE("a request issued while nothing is in flight goes at once, alone", "[client][batcher]") {
  SECTION("fake invoker: handed over before invokeAsync returns") {
    FakeInvoker fake;
    Batcher<FakeInvoker, TokenBucketAcquire> batcher(fake);
    for (std::int64_t i = 0; i < 10; ++i) {
      AnswerFuture f = batcher.invokeAsync("k", acquire(1), asio::use_future);
      REQUIRE(fake.pending() == 1);
      auto call = fake.take<TokenBucketAcquire>();
      REQUIRE(call);
      CHECK(call->key == "k");
      call->complete(answer(100 + i));
      Answer r = await(f);
      REQUIRE(r.ok());
      CHECK(r->remaining == 100 + i);
    }
    const auto s = batcher.stats();
    CHECK(s.requests == 10);
    CHECK(s.sends == 10);
    CHECK(s.batches == 0);
    CHECK(s.batchedRequests == 0);
  }
  SECTION("embedded node at concurrency 1") {
    FrozenNode n;
    Batcher<Node, TokenBucketAcquire> batcher(n.node);
    for (int i = 0; i < 50; ++i) {
      AnswerFuture f = batcher.invokeAsync("solo", acquire(1), asio::use_future);
      Answer r = await(f);
      REQUIRE(r.ok());
      CHECK(r->granted);
      CHECK(r->remaining == 999 - i);
    }
    const auto s = batcher.stats();
    CHECK(s.requests == 50);
    CHECK(s.sends == 50);
    CHECK(s.batches == 0);
  }
}

TEST_CASE("64 callers on one hot key: exactly the capacity is granted, in few sends",
          "[client][batcher]") {
  constexpr int kCallers = 64;
  constexpr int kPerCaller = 20;
  constexpr int kTotal = kCallers * kPerCaller;
  constexpr std::int64_t kCapacity = 500;
  FrozenNode n;
  Batcher<Node, TokenBucketAcquire> batcher(n.node);
  const TokenBucketAcquire want{BucketParams::perPeriod(kCapacity, kNanosPerSecond), 1};

  std::vector<std::atomic<int>> answers(kTotal);
  std::atomic<int> granted{0}, denied{0}, errors{0}, timedOut{0};
  std::latch go(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      go.arrive_and_wait();
      for (int j = 0; j < kPerCaller; ++j) {
        const int idx = c * kPerCaller + j;
        std::promise<void> got;
        auto done = got.get_future();
        batcher.invokeAsync("hot", want, [&, idx, got = std::move(got)](Answer r) mutable {
          answers[idx].fetch_add(1);
          if (!r) {
            errors.fetch_add(1);
          } else if (r->granted) {
            granted.fetch_add(1);
          } else {
            denied.fetch_add(1);
          }
          got.set_value();
        });
        if (done.wait_for(10s) != std::future_status::ready) {
          timedOut.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& t : callers) t.join();

  REQUIRE(timedOut.load() == 0);
  CHECK(errors.load() == 0);
  CHECK(granted.load() == kCapacity);
  CHECK(granted.load() + denied.load() == kTotal);
  int notOnce = 0;
  for (auto& a : answers) notOnce += a.load() != 1 ? 1 : 0;
  CHECK(notOnce == 0);

  const auto s = batcher.stats();
  const double mean = static_cast<double>(s.requests) / static_cast<double>(s.sends);
  std::printf("batcher: %d callers, %llu requests in %llu sends (%llu batches): mean batch %.1f\n",
              kCallers, static_cast<unsigned long long>(s.requests),
              static_cast<unsigned long long>(s.sends), static_cast<unsigned long long>(s.batches),
              mean);
  INFO("requests " << s.requests << ", sends " << s.sends << ", mean batch " << mean);
  CHECK(s.requests == static_cast<std::uint64_t>(kTotal));
  CHECK(s.rejected == 0);
  CHECK(s.sends * 4 <= s.requests);
}

TEST_CASE("a batch carries the queued requests in order and answers each its own",
          "[client][batcher]") {
  FakeInvoker fake;
  Batcher<FakeInvoker, TokenBucketAcquire> batcher(fake);
  AnswerFuture first = batcher.invokeAsync("k", acquire(7), asio::use_future);
  std::vector<AnswerFuture> queued;
  for (std::int64_t t = 1; t <= 5; ++t) {
    queued.push_back(batcher.invokeAsync("k", acquire(t), asio::use_future));
  }
  REQUIRE(fake.pending() == 1);  // the five wait behind the one in flight

  auto inFlight = fake.take<TokenBucketAcquire>();
  REQUIRE(inFlight);
  CHECK(inFlight->processor.tokens == 7);
  inFlight->complete(answer(42));
  CHECK(await(first)->remaining == 42);

  auto batch = fake.take<TokenBucketBatchAcquire>();
  REQUIRE(batch);
  CHECK(batch->key == "k");
  CHECK(batch->processor.bucket == kParams);
  CHECK(batch->processor.tokens == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  batch->complete(
      std::vector<AcquireAnswer>{answer(101), answer(102), answer(103), answer(104), answer(105)});
  for (std::size_t i = 0; i < queued.size(); ++i) {
    Answer r = await(queued[i]);
    REQUIRE(r.ok());
    CHECK(r->remaining == 101 + static_cast<std::int64_t>(i));
  }
  CHECK(fake.pending() == 0);
  const auto s = batcher.stats();
  CHECK(s.requests == 6);
  CHECK(s.sends == 2);
  CHECK(s.batches == 1);
  CHECK(s.batchedRequests == 5);
}

TEST_CASE("requests with other params end the batch (longest joinable prefix)",
          "[client][batcher]") {
  const BucketParams a = BucketParams::perPeriod(10, kNanosPerSecond);
  const BucketParams b = BucketParams::perPeriod(20, kNanosPerSecond);
  FakeInvoker fake;
  Batcher<FakeInvoker, TokenBucketAcquire> batcher(fake);
  AnswerFuture f0 = batcher.invokeAsync("k", acquire(1, a), asio::use_future);
  AnswerFuture f1 = batcher.invokeAsync("k", acquire(1, a), asio::use_future);
  AnswerFuture f2 = batcher.invokeAsync("k", acquire(2, a), asio::use_future);
  AnswerFuture f3 = batcher.invokeAsync("k", acquire(3, b), asio::use_future);
  AnswerFuture f4 = batcher.invokeAsync("k", acquire(4, a), asio::use_future);

  auto c0 = fake.take<TokenBucketAcquire>();
  REQUIRE(c0);
  c0->complete(answer(0));
  auto c12 = fake.take<TokenBucketBatchAcquire>();
  REQUIRE(c12);
  CHECK(c12->processor.bucket == a);
  CHECK(c12->processor.tokens == std::vector<std::int64_t>{1, 2});
  c12->complete(std::vector<AcquireAnswer>{answer(1), answer(2)});
  auto c3 = fake.take<TokenBucketAcquire>();  // a prefix of one goes as a single
  REQUIRE(c3);
  CHECK(c3->processor.bucket == b);
  CHECK(c3->processor.tokens == 3);
  c3->complete(answer(3));
  auto c4 = fake.take<TokenBucketAcquire>();
  REQUIRE(c4);
  CHECK(c4->processor.tokens == 4);
  c4->complete(answer(4));

  CHECK(await(f0)->remaining == 0);
  CHECK(await(f1)->remaining == 1);
  CHECK(await(f2)->remaining == 2);
  CHECK(await(f3)->remaining == 3);
  CHECK(await(f4)->remaining == 4);
  const auto s = batcher.stats();
  CHECK(s.sends == 4);
  CHECK(s.batches == 1);
  CHECK(s.batchedRequests == 2);
}

TEST_CASE("a full per-key queue refuses with overloaded, naming the key and the bound",
          "[client][batcher]") {
  FakeInvoker fake;
  Batcher<FakeInvoker, TokenBucketAcquire> batcher(
      fake, BatcherOptions{.maxBatch = 1024, .maxQueuedPerKey = 3});
  std::vector<AnswerFuture> accepted;
  for (int i = 0; i < 4; ++i) {
    accepted.push_back(batcher.invokeAsync("busy-key", acquire(1), asio::use_future));
  }
  // Not inline: the refusal is posted, so it runs on another thread than this caller's (a check
  // of "still inside invokeAsync" would race with the posted handler on a second core).
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> ranInline{-1};
  std::promise<Answer> refused;
  auto refusedAnswer = refused.get_future();
  batcher.invokeAsync("busy-key", acquire(1), [&](Answer r) {
    ranInline.store(std::this_thread::get_id() == caller ? 1 : 0);
    refused.set_value(std::move(r));
  });
  Answer r = await(refusedAnswer);
  CHECK(ranInline.load() == 0);
  REQUIRE(!r.ok());
  CHECK(r.error() == Errc::overloaded);
  CHECK_THAT(r.error().detail(), Catch::Contains("busy-key") && Catch::Contains("3"));

  // Another key is not held back.
  AnswerFuture other = batcher.invokeAsync("other-key", acquire(1), asio::use_future);
  CHECK(fake.pending() == 2);
  CHECK(batcher.stats().rejected == 1);

  auto c0 = fake.take<TokenBucketAcquire>();
  REQUIRE(c0);
  c0->complete(answer(0));
  auto cOther = fake.take<TokenBucketAcquire>();
  REQUIRE(cOther);
  CHECK(cOther->key == "other-key");
  cOther->complete(answer(9));
  auto c123 = fake.take<TokenBucketBatchAcquire>();
  REQUIRE(c123);
  CHECK(c123->processor.tokens.size() == 3);
  c123->complete(std::vector<AcquireAnswer>{answer(1), answer(2), answer(3)});
  for (auto& f : accepted) CHECK(await(f).ok());
  CHECK(await(other)->remaining == 9);
}

TEST_CASE("a queued request times out at its own deadline, however long the queue ahead of it",
          "[client][batcher]") {
  FakeInvoker fake;
  Batcher<FakeInvoker, TokenBucketAcquire> batcher(
      fake, BatcherOptions{.maxBatch = 2, .queueTimeout = 200ms});
  // One in flight that never completes by itself (a stuck member), and 5 queued behind it.
  AnswerFuture head = batcher.invokeAsync("stuck-key", acquire(1), asio::use_future);
  const auto queuedAt = std::chrono::steady_clock::now();
  std::vector<AnswerFuture> queued;
  for (int i = 0; i < 5; ++i) {
    queued.push_back(batcher.invokeAsync("stuck-key", acquire(1), asio::use_future));
  }
  // Another key's caller is not touched by their expiry.
  AnswerFuture other = batcher.invokeAsync("other-key", acquire(1), asio::use_future);
  for (auto& f : queued) {
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    const Answer r = f.get();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::timeout);
    CHECK_THAT(r.error().detail(), Catch::Contains("stuck-key") && Catch::Contains("not sent"));
  }
  // Never before their deadline (a lower bound: it holds however slow the machine).
  CHECK(std::chrono::steady_clock::now() - queuedAt >= 200ms);
  CHECK(batcher.stats().expired == 5);
  CHECK(fake.pending() == 2);  // only the two heads were ever sent
  auto c0 = fake.take<TokenBucketAcquire>();
  REQUIRE(c0);
  c0->complete(answer(7));
  CHECK(await(head)->remaining == 7);
  auto cOther = fake.take<TokenBucketAcquire>();
  REQUIRE(cOther);
  cOther->complete(answer(8));
  CHECK(await(other)->remaining == 8);
  CHECK(fake.pending() == 0);  // the expired ones are not sent once the head completes
  CHECK(batcher.stats().expired == 5);
}

TEST_CASE("batches never exceed maxBatch nor the batch processor's limit", "[client][batcher]") {
  SECTION("maxBatch") {
    FakeInvoker fake;
    Batcher<FakeInvoker, TokenBucketAcquire> batcher(
        fake, BatcherOptions{.maxBatch = 4, .maxQueuedPerKey = 100});
    std::vector<AnswerFuture> fs;
    for (int i = 0; i < 11; ++i)
      fs.push_back(batcher.invokeAsync("k", acquire(1), asio::use_future));
    auto c0 = fake.take<TokenBucketAcquire>();
    REQUIRE(c0);
    c0->complete(answer(0));
    for (std::size_t expected : {4u, 4u, 2u}) {
      auto b = fake.take<TokenBucketBatchAcquire>();
      REQUIRE(b);
      CHECK(b->processor.tokens.size() == expected);
      b->complete(std::vector<AcquireAnswer>(expected, answer(1)));
    }
    CHECK(fake.pending() == 0);
    for (auto& f : fs) CHECK(await(f).ok());
    CHECK(batcher.stats().batches == 3);
    CHECK(batcher.stats().batchedRequests == 10);
    // Sends of 1, 4, 4 and 2 requests, by size bucket (1, 2, 4, ...) and as Prometheus text.
    const auto sizes = batcher.stats().sendSizes;
    CHECK(sizes[0] == 1);
    CHECK(sizes[1] == 1);
    CHECK(sizes[2] == 2);
    CHECK(std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}) == 4);
    const std::string text = batcherMetricsText("hot", batcher.stats());
    CHECK_THAT(text, Catch::Contains("# TYPE ingrid_client_batch_size histogram"));
    CHECK_THAT(text,
               Catch::Contains("ingrid_client_batch_size_bucket{batcher=\"hot\",le=\"1\"} 1"));
    CHECK_THAT(text,
               Catch::Contains("ingrid_client_batch_size_bucket{batcher=\"hot\",le=\"4\"} 4"));
    CHECK_THAT(text,
               Catch::Contains("ingrid_client_batch_size_bucket{batcher=\"hot\",le=\"+Inf\"} 4"));
    CHECK_THAT(text, Catch::Contains("ingrid_client_batch_size_count{batcher=\"hot\"} 4"));
    CHECK_THAT(text, Catch::Contains("ingrid_client_batch_size_sum{batcher=\"hot\"} 11"));
    CHECK_THAT(text, Catch::Contains("ingrid_client_batcher_rejected_total{batcher=\"hot\"} 0"));
  }
  SECTION("P::Batch::kMaxWants caps a larger maxBatch") {
    FakeInvoker fake;
    Batcher<FakeInvoker, Add> batcher(fake);
    std::vector<std::future<Result<std::int64_t>>> fs;
    for (std::int64_t i = 0; i < 8; ++i) {
      fs.push_back(batcher.invokeAsync("k", Add{i}, asio::use_future));
    }
    auto c0 = fake.take<Add>();
    REQUIRE(c0);
    c0->complete(std::int64_t{0});
    for (std::vector<std::int64_t> expected : {std::vector<std::int64_t>{1, 2, 3}, {4, 5, 6}}) {
      auto b = fake.take<AddBatch>();
      REQUIRE(b);
      CHECK(b->processor.ns == expected);
      b->complete(b->processor.ns);
    }
    auto last = fake.take<Add>();
    REQUIRE(last);
    CHECK(last->processor.n == 7);
    last->complete(std::int64_t{7});
    for (std::int64_t i = 0; i < 8; ++i) {
      auto r = await(fs[static_cast<std::size_t>(i)]);
      REQUIRE(r.ok());
      CHECK(*r == i);
    }
  }
}

TEST_CASE("a batch's error reaches every caller of that batch", "[client][batcher]") {
  FakeInvoker fake;
  Batcher<FakeInvoker, TokenBucketAcquire> batcher(fake);
  AnswerFuture f0 = batcher.invokeAsync("k", acquire(1), asio::use_future);
  std::vector<AnswerFuture> fs;
  for (int i = 0; i < 3; ++i) fs.push_back(batcher.invokeAsync("k", acquire(1), asio::use_future));

  SECTION("an error") {
    auto c0 = fake.take<TokenBucketAcquire>();
    REQUIRE(c0);
    c0->complete(Error(Errc::unavailable, "only the first"));
    Answer r0 = await(f0);
    REQUIRE(!r0.ok());
    CHECK(r0.error().detail() == "only the first");
    auto b = fake.take<TokenBucketBatchAcquire>();
    REQUIRE(b);
    b->complete(Error(Errc::processor_failed, "boom"));
    for (auto& f : fs) {
      Answer r = await(f);
      REQUIRE(!r.ok());
      CHECK(r.error() == Errc::processor_failed);
      CHECK(r.error().detail() == "boom");
    }
  }
  SECTION("a result vector of the wrong length") {
    auto c0 = fake.take<TokenBucketAcquire>();
    REQUIRE(c0);
    c0->complete(answer(0));
    CHECK(await(f0).ok());
    auto b = fake.take<TokenBucketBatchAcquire>();
    REQUIRE(b);
    b->complete(std::vector<AcquireAnswer>{answer(1), answer(2)});
    for (auto& f : fs) {
      Answer r = await(f);
      REQUIRE(!r.ok());
      CHECK(r.error() == Errc::malformed_message);
      CHECK_THAT(r.error().detail(), Catch::Contains("2 results to 3 requests"));
    }
  }
  CHECK(fake.pending() == 0);
}

TEST_CASE("BatchingRateLimiter refuses bad use at once, naming the problem", "[client][batcher]") {
  FakeInvoker fake;
  struct Case {
    std::string key;
    BucketParams params;
    std::int64_t tokens;
    Errc code;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"k", kParams, 0, Errc::invalid_argument, "tokens must be > 0, got 0"},
      {"k", kParams, -3, Errc::invalid_argument, "tokens must be > 0, got -3"},
      {"k", BucketParams::perPeriod(0, kNanosPerSecond), 1, Errc::invalid_argument, "capacity"},
      {"", kParams, 1, Errc::invalid_key, "empty"},
  };
  for (const Case& c : cases) {
    INFO("key '" << c.key << "', tokens " << c.tokens);
    BatchingRateLimiter<FakeInvoker> limiter(fake, c.key, c.params);
    Answer blocking = limiter.tryAcquire(c.tokens);
    REQUIRE(!blocking.ok());
    CHECK(blocking.error() == c.code);
    CHECK_THAT(blocking.error().detail(), Catch::Contains(c.named));
    AnswerFuture f = limiter.tryAcquireAsync(c.tokens, asio::use_future);
    Answer async = await(f);
    REQUIRE(!async.ok());
    CHECK(async.error() == c.code);
    CHECK_THAT(async.error().detail(), Catch::Contains(c.named));
    auto reserving = limiter.acquireAsync(c.tokens, 1s, asio::use_future);
    Result<ReserveAnswer> reserve = await(reserving);
    REQUIRE(!reserve.ok());
    CHECK(reserve.error() == c.code);
    CHECK_THAT(reserve.error().detail(), Catch::Contains(c.named));
    CHECK(limiter.stats().requests == 0);
    CHECK(limiter.counts() == LimiterCounts{0, 0, 0, 0, 0, 3});
  }
  // A maxWait < 0, and unusable warm-up options; bad use is reported even when failing open.
  BatchingRateLimiter<FakeInvoker> limiter(fake, "k", kParams,
                                           {.onUnavailable = OnUnavailable::kGrant});
  auto negative = limiter.acquireAsync(1, -1ns, asio::use_future);
  Result<ReserveAnswer> r = await(negative);
  REQUIRE(!r.ok());
  CHECK(r.error() == Errc::invalid_argument);
  CHECK_THAT(r.error().detail(), Catch::Contains("bucket 'k': maxWait must be >= 0, got -1 ns"));
  BatchingRateLimiter<FakeInvoker> cold(fake, "k", kParams,
                                        {.warmup = WarmupOption{std::chrono::nanoseconds(0), 3}});
  AnswerFuture warming = cold.tryAcquireAsync(1, asio::use_future);
  Answer w = await(warming);
  REQUIRE(!w.ok());
  CHECK(w.error() == Errc::invalid_argument);
  CHECK_THAT(w.error().detail(), Catch::Contains("warm-up 'k': warmup must be > 0, got 0"));
  CHECK(limiter.counts().errors == 1);
  CHECK(cold.stats().requests == 0);
  CHECK(fake.pending() == 0);
}

TEST_CASE("BatchingRateLimiter grants exactly the capacity under concurrency",
          "[client][batcher]") {
  constexpr int kCallers = 64;
  constexpr int kPerCaller = 8;
  constexpr std::int64_t kCapacity = 200;
  FrozenNode n;
  BatchingRateLimiter<Node> limiter(n.node, "api:hot",
                                    BucketParams::perPeriod(kCapacity, kNanosPerSecond));
  CHECK(limiter.key() == "api:hot");
  CHECK(limiter.params().capacity == kCapacity);

  std::atomic<int> granted{0}, denied{0}, errors{0};
  std::latch go(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      go.arrive_and_wait();
      for (int j = 0; j < kPerCaller; ++j) {
        // Half the callers block, half go through the async form.
        Answer r = Answer(AcquireAnswer{});
        if (c % 2 == 0) {
          r = limiter.tryAcquire(1);
        } else {
          auto f = limiter.tryAcquireAsync(1, asio::use_future);
          if (f.wait_for(10s) != std::future_status::ready) {
            errors.fetch_add(1);
            return;
          }
          r = f.get();
        }
        if (!r) {
          errors.fetch_add(1);
        } else if (r->granted) {
          granted.fetch_add(1);
        } else {
          denied.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(errors.load() == 0);
  CHECK(granted.load() == kCapacity);
  CHECK(granted.load() + denied.load() == kCallers * kPerCaller);
  const auto s = limiter.stats();
  CHECK(s.requests == static_cast<std::uint64_t>(kCallers * kPerCaller));
  CHECK(s.sends < s.requests);
}

using ReserveFuture = std::future<Result<ReserveAnswer>>;

TEST_CASE("BatchingRateLimiter batches reservations as TokenBucketBatchReserve per maxWait",
          "[client][batcher]") {
  FakeInvoker fake;
  BatchingRateLimiter<FakeInvoker> limiter(fake, "k", kParams);
  const auto start = std::chrono::steady_clock::now();
  ReserveFuture first = limiter.acquireAsync(5, 1s, asio::use_future);
  std::vector<ReserveFuture> queued;
  for (std::int64_t t = 1; t <= 3; ++t) {
    queued.push_back(limiter.acquireAsync(t, 1s, asio::use_future));
  }
  ReserveFuture other = limiter.acquireAsync(4, 2s, asio::use_future);  // another maxWait
  REQUIRE(fake.pending() == 1);

  auto single = fake.take<TokenBucketReserve>();
  REQUIRE(single);
  CHECK(single->key == "k");
  CHECK(single->processor.bucket == kParams);
  CHECK(single->processor.tokens == 5);
  CHECK(single->processor.maxWait == kNanosPerSecond);
  single->complete(ReserveAnswer{true, 0, 995});
  CHECK(await(first).value() == ReserveAnswer{true, 0, 995});

  auto batch = fake.take<TokenBucketBatchReserve>();
  REQUIRE(batch);
  CHECK(batch->processor.bucket == kParams);
  CHECK(batch->processor.tokens == std::vector<std::int64_t>{1, 2, 3});
  CHECK(batch->processor.maxWait == kNanosPerSecond);
  // The second waits 50 ms; the third is refused (its wait would pass maxWait).
  batch->complete(
      std::vector<ReserveAnswer>{{true, 0, 0}, {true, 50'000'000, 0}, {false, 1'500'000'000, 0}});
  CHECK(await(queued[0]).value() == ReserveAnswer{true, 0, 0});
  CHECK(await(queued[1]).value() == ReserveAnswer{true, 50'000'000, 0});
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  CHECK(await(queued[2]).value() == ReserveAnswer{false, 1'500'000'000, 0});

  auto last = fake.take<TokenBucketReserve>();
  REQUIRE(last);
  CHECK(last->processor.tokens == 4);
  CHECK(last->processor.maxWait == 2 * kNanosPerSecond);
  last->complete(Error(Errc::unreachable, "no member reachable"));
  Result<ReserveAnswer> failed = await(other);
  REQUIRE(!failed.ok());
  CHECK(failed.error() == Errc::unreachable);

  CHECK(fake.pending() == 0);
  CHECK(limiter.counts() == LimiterCounts{3, 1, 0, 0, 0, 1});
  const auto s = limiter.stats();
  CHECK(s.requests == 5);
  CHECK(s.sends == 3);
  CHECK(s.batches == 1);
  CHECK(s.batchedRequests == 3);
}

TEST_CASE("BatchingRateLimiter with warm-up batches as WarmupBatchAcquire, answering as a bucket",
          "[client][batcher][warmup]") {
  FakeInvoker fake;
  const LimiterOptions warm{.warmup = WarmupOption{2s, 3}};
  BatchingRateLimiter<FakeInvoker> limiter(fake, "w", kParams, warm);
  const WarmupParams now = WarmupParams::of(kParams, 2 * kNanosPerSecond, 3, 0);

  AnswerFuture first = limiter.tryAcquireAsync(1, asio::use_future);
  std::vector<AnswerFuture> queued;
  for (std::int64_t q = 1; q <= 3; ++q)
    queued.push_back(limiter.tryAcquireAsync(q, asio::use_future));
  ReserveFuture reserve = limiter.acquireAsync(2, 1s, asio::use_future);  // joins no acquire

  auto single = fake.take<WarmupAcquire>();
  REQUIRE(single);
  CHECK(single->key == "w");
  CHECK(single->processor.params == now);
  CHECK(single->processor.quantity == 1);
  single->complete(WarmupAnswer{true, 0, 290'000'000, 19});
  CHECK(await(first).value() == AcquireAnswer{true, 0, 0});

  auto batch = fake.take<WarmupBatchAcquire>();
  REQUIRE(batch);
  CHECK(batch->processor.params == now);
  CHECK(batch->processor.quantities == std::vector<std::int64_t>{1, 2, 3});
  batch->complete(std::vector<WarmupAnswer>{{false, 290'000'000, 270'000'000, 19},
                                            {false, 290'000'000, 520'000'000, 19},
                                            {false, 290'000'000, 750'000'000, 19}});
  for (auto& f : queued) CHECK(await(f).value() == AcquireAnswer{false, 0, 290'000'000});

  auto reservation = fake.take<WarmupAcquire>();
  REQUIRE(reservation);
  CHECK(reservation->processor.params ==
        WarmupParams::of(kParams, 2 * kNanosPerSecond, 3, kNanosPerSecond));
  CHECK(reservation->processor.quantity == 2);
  reservation->complete(WarmupAnswer{true, 20'000'000, 520'000'000, 17});
  CHECK(await(reserve).value() == ReserveAnswer{true, 20'000'000, 0});

  CHECK(fake.pending() == 0);
  CHECK(limiter.counts() == LimiterCounts{2, 3, 0, 0, 0, 0});
  CHECK(limiter.stats().batches == 1);
}

TEST_CASE("BatchingRateLimiter: a batch's answers and error go through the policy, each counted",
          "[client][batcher][limiter_policy]") {
  FakeInvoker fake;
  SECTION("dry-run: the batch's denials come back granted, a reservation is not waited for") {
    BatchingRateLimiter<FakeInvoker> shadow(fake, "k", kParams, {.dryRun = true});
    AnswerFuture head = shadow.tryAcquireAsync(1, asio::use_future);
    AnswerFuture a = shadow.tryAcquireAsync(1, asio::use_future);
    AnswerFuture b = shadow.tryAcquireAsync(1, asio::use_future);
    auto c0 = fake.take<TokenBucketAcquire>();
    REQUIRE(c0);
    c0->complete(AcquireAnswer{false, 0, 7});
    CHECK(await(head).value() == AcquireAnswer{true, 0, 7});
    auto batch = fake.take<TokenBucketBatchAcquire>();
    REQUIRE(batch);
    batch->complete(std::vector<AcquireAnswer>{{true, 1, 0}, {false, 0, 9}});
    CHECK(await(a).value() == AcquireAnswer{true, 1, 0});
    CHECK(await(b).value() == AcquireAnswer{true, 0, 9});

    ReserveFuture hour = shadow.acquireAsync(1, 3600s, asio::use_future);
    auto r = fake.take<TokenBucketReserve>();
    REQUIRE(r);
    r->complete(ReserveAnswer{true, 3600 * kNanosPerSecond, 0});
    // Completes at once: a wait of an hour would not be ready in this test's 5 s.
    CHECK(await(hour).value() == ReserveAnswer{true, 3600 * kNanosPerSecond, 0});
    CHECK(shadow.counts() == LimiterCounts{2, 0, 2, 0, 0, 0});
  }
  SECTION("fail-open and fail-closed: a batch's timeout reaches each caller as the option says") {
    const OnUnavailable option = GENERATE(OnUnavailable::kGrant, OnUnavailable::kDeny);
    BatchingRateLimiter<FakeInvoker> limiter(fake, "k", kParams, {.onUnavailable = option});
    AnswerFuture head = limiter.tryAcquireAsync(1, asio::use_future);
    std::vector<AnswerFuture> queued;
    for (int i = 0; i < 3; ++i) queued.push_back(limiter.tryAcquireAsync(1, asio::use_future));
    auto c0 = fake.take<TokenBucketAcquire>();
    REQUIRE(c0);
    c0->complete(AcquireAnswer{true, 999, 0});
    CHECK(await(head).value() == AcquireAnswer{true, 999, 0});
    auto batch = fake.take<TokenBucketBatchAcquire>();
    REQUIRE(batch);
    batch->complete(Error(Errc::timeout, "no answer before the deadline"));
    const bool open = option == OnUnavailable::kGrant;
    for (auto& f : queued) CHECK(await(f).value() == AcquireAnswer{open, 0, 0});
    CHECK(limiter.counts() == LimiterCounts{1, 0, 0, open ? 3u : 0u, open ? 0u : 3u, 0});
  }
  CHECK(fake.pending() == 0);
}
