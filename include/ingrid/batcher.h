// Batcher: client-side batching of entry processors on hot keys (docs/ARCHITECTURE.md, "The thin
// client and batching").
//
// Per key, a request issued while nothing is in flight goes to the invoker at once, as a single
// P, so at low load nothing waits (there is no timer). While it is in flight, later requests for
// that key queue. When it completes, the longest prefix of the queue (at most maxBatch) whose
// requests are joinable with the first goes as one P::Batch; and so on until the queue is empty.
// A batch is thus exactly what piled up during one round trip. Each caller gets its own answer,
// in request order; a batch's error goes to every caller of that batch (the errors a batch can
// get, such as a timeout or an unreachable cluster, apply to all of them alike).
//
// Deadlines: a queued request waits at most BatcherOptions::queueTimeout for its turn; past it, it
// completes with Errc::timeout, certainly not sent (so it did not run), and the requests queued
// with it go on. One timer per batcher (on asio::system_executor) watches the oldest queued
// request. Once sent, a request waits at most the invoker's deadline (requestTimeout), so no
// caller waits longer than queueTimeout plus that.
//
// Thread safety: every member is safe from any thread, concurrently. The invoker must outlive
// the batcher and every call in flight; REQUIRES: no call in flight when the batcher is
// destroyed. The Invoker has Node's invokeAsync(std::string key, const Q&, token) for Q = P and
// Q = P::Batch, and by Asio's rule never completes inline (that would recurse once per batch).
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_executor.hpp>

#include <ingrid/limiter_policy.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>
#include <ingrid/rate_limiter.h>
#include <ingrid/result.h>
#include <ingrid/unique_function.h>

namespace ingrid {

// An entry processor with a batch form: P::Batch runs many P's on one entry in one go and answers
// with their results in order. joinable(first, other): may `other` share a batch led by `first`.
// batch(items): the batch of items, in order (REQUIRES: non-empty, all joinable with the first).
// If P::Batch declares `static constexpr std::size_t kMaxWants`, no batch is longer than that.
template <class P>
concept BatchableProcessor = EntryProcessor<P> && std::movable<P> &&
    EntryProcessor<typename P::Batch> &&
    std::same_as<typename P::Batch::Result, std::vector<typename P::Result>> &&
    requires(const P& first, const P& other, std::vector<P> items) {
  { P::joinable(first, other) } -> std::convertible_to<bool>;
  { P::batch(std::move(items)) } -> std::same_as<typename P::Batch>;
};

struct BatcherOptions {
  // Most requests one batch carries; also capped by P::Batch::kMaxWants when the batch processor
  // declares it. 0 counts as 1 (no batching). Default: 1024.
  std::size_t maxBatch = 1024;
  // Most requests queued per key behind the one in flight. A request beyond it completes at once
  // with Errc::overloaded (backpressure: the caller slows down). Default: 65536.
  std::size_t maxQueuedPerKey = 65536;
  // Longest a request waits in a key's queue before it is sent; past it, it completes with
  // Errc::timeout without having been sent. Taken within [1 ms, 1 year]. Default: 5 s.
  std::chrono::milliseconds queueTimeout{5000};
};

// What a Batcher has done so far.
struct BatcherStats {
  std::uint64_t requests = 0;         // invokeAsync calls, rejected ones included
  std::uint64_t sends = 0;            // messages handed to the invoker: singles + batches
  std::uint64_t batches = 0;          // of the sends, P::Batch messages (2 or more requests)
  std::uint64_t batchedRequests = 0;  // requests that went in a P::Batch
  std::uint64_t rejected = 0;         // requests refused with Errc::overloaded
  std::uint64_t expired = 0;          // requests that timed out in the queue, never sent
  // Sends by their number of requests: sendSizes[i] counts sends of at most kSendSizeBounds[i]
  // requests and more than the bound before it; the last counts those above every bound.
  static constexpr std::array<std::size_t, 11> kSendSizeBounds = {1,  2,   4,   8,   16,  32,
                                                                  64, 128, 256, 512, 1024};
  std::array<std::uint64_t, kSendSizeBounds.size() + 1> sendSizes{};

  void countSend(std::size_t n) noexcept {
    std::size_t i = 0;
    while (i < kSendSizeBounds.size() && n > kSendSizeBounds[i]) ++i;
    ++sendSizes[i];
  }
  BatcherStats& operator+=(const BatcherStats& o) noexcept {
    requests += o.requests;
    sends += o.sends;
    batches += o.batches;
    batchedRequests += o.batchedRequests;
    rejected += o.rejected;
    expired += o.expired;
    for (std::size_t i = 0; i < sendSizes.size(); ++i) sendSizes[i] += o.sendSizes[i];
    return *this;
  }
  friend bool operator==(const BatcherStats&, const BatcherStats&) = default;
};

namespace batcher_detail {
// An invoker that completes on an I/O thread of its own, which runs a handler that has no
// associated executor (Client): it names that thread's executor and tells whether the calling
// thread is that thread. Its continuations stay on that thread (no hop), and so do its callers'
// handlers that have no executor of their own.
template <class I>
concept IoThreadInvoker = requires(const I& invoker) {
  invoker.ioExecutor().running_in_this_thread();
  { invoker.onIoThread() } -> std::convertible_to<bool>;
};

// The most requests a B accepts: B::kMaxWants if declared, else unbounded.
template <class B>
constexpr std::size_t batchLimit() {
  if constexpr (requires {
                  { B::kMaxWants } -> std::convertible_to<std::size_t>;
                }) {
    static_assert(B::kMaxWants >= 1, "a batch processor must accept at least one request");
    return B::kMaxWants;
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}
}  // namespace batcher_detail

template <class Invoker, BatchableProcessor P>
class Batcher {
 public:
  using Answer = Result<typename P::Result>;

  using Stats = BatcherStats;

  explicit Batcher(Invoker& invoker, BatcherOptions options = {})
      : invoker_(invoker),
        options_(options),
        maxBatch_(std::min(std::max<std::size_t>(options.maxBatch, 1),
                           batcher_detail::batchLimit<typename P::Batch>())),
        queueTimeout_(std::clamp(options.queueTimeout, std::chrono::milliseconds(1),
                                 std::chrono::milliseconds(std::chrono::hours(24 * 365)))) {}
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;
  // Waits until the batcher's own continuations have finished: a caller's answer is posted
  // before its batch's bookkeeping ends, so a caller that destroys the batcher right after its
  // last answer must not free it under that bookkeeping. REQUIRES: no new call after
  // destruction starts, and not called from a completion of this batcher.
  ~Batcher() {
    std::unique_lock lock(mu_);
    stopping_ = true;
    timer_.cancel();  // its handler still runs (and counts in active_)
    if constexpr (batcher_detail::IoThreadInvoker<Invoker>) {
      // A continuation still to come needs this very thread: waiting would never end.
      if (active_ > 0 && invoker_.onIoThread()) {
        std::fprintf(stderr,
                     "ingrid: Batcher destroyed on its client's I/O thread (in a completion) with "
                     "%zu calls in flight, whose answers need that thread\n",
                     active_);
        std::abort();
      }
    }
    // Every continuation ends within its invoker's deadline; one that never does is a bug
    // (an invoker that drops a completion), reported rather than hung on.
    if (!idle_.wait_for(lock, std::chrono::minutes(2), [this] { return active_ == 0; })) {
      std::fprintf(stderr, "ingrid: Batcher destroyed with %zu continuations that never ended\n",
                   active_);
      std::abort();
    }
    assert(keys_.empty() && "Batcher destroyed with calls in flight");
  }

  // Runs `p` on `key`'s entry, alone or in a batch with other requests for `key`, and completes
  // `token` (signature void(Result<P::Result>)) on the handler's associated executor; without
  // one, on the invoker's I/O thread (Client; see bindCompletion), else on the system executor.
  // Never inside this call. Errors: the invoker's, and Errc::overloaded when
  // maxQueuedPerKey requests for `key` are already queued.
  template <class CompletionToken>
  auto invokeAsync(std::string key, P p, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(Answer)>(
        [this](auto handler, std::string k, P proc) {
          submit(std::move(k), std::move(proc), bindCompletion(std::move(handler)));
        },
        token, std::move(key), std::move(p));
  }

  Stats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }
  const BatcherOptions& options() const noexcept { return options_; }

 private:
  // A caller's handler, erased. `initiating`: called inside the caller's invokeAsync (a refusal),
  // where it must not run inline.
  using Completion = UniqueFunction<void(Answer, bool initiating)>;
  using SteadyClock = std::chrono::steady_clock;
  using Timer = asio::basic_waitable_timer<SteadyClock, asio::wait_traits<SteadyClock>,
                                           asio::system_executor>;
  struct Pending {
    P p;
    Completion done;
    SteadyClock::time_point deadline;  // queued until at most then
  };

  // A caller's handler, erased. A handler with an associated executor runs there. Over an
  // invoker with an I/O thread (Client), a handler without one runs on that thread, inline when
  // its answer is handed over there, as a handler of any Asio I/O object does: a closed loop of
  // calls crosses no thread. Otherwise (over a Node; or a refusal inside the call, or a queue
  // timeout on the timer's thread) it is posted to the system executor.
  template <class Handler>
  Completion bindCompletion(Handler handler) {
    if constexpr (batcher_detail::IoThreadInvoker<Invoker> &&
                  !limiter_detail::hasOwnExecutor<Handler>) {
      return [handler = std::move(handler), io = invoker_.ioExecutor()](Answer r,
                                                                        bool initiating) mutable {
        if (!initiating && io.running_in_this_thread()) {
          std::move(handler)(std::move(r));
          return;
        }
        asio::post(asio::system_executor(),
                   [handler = std::move(handler), r = std::move(r)]() mutable {
                     std::move(handler)(std::move(r));
                   });
      };
    }
    // Counted as work of its executor from now on (a caller's io_context.run() waits for it).
    auto work =
        asio::make_work_guard(asio::get_associated_executor(handler, asio::system_executor()));
    return [handler = std::move(handler), work = std::move(work)](Answer r, bool) mutable {
      auto ex = work.get_executor();
      auto posting = asio::make_work_guard(ex);  // until post() returns (see invoke_async.h)
      asio::post(ex, [handler = std::move(handler), r = std::move(r),
                      work = std::move(work)]() mutable { std::move(handler)(std::move(r)); });
    };
  }

  // The batcher's own continuations. Over a Node they run on the system executor, not on the
  // node's completion threads, so that a caller blocked on one of those (tryAcquire) cannot stall
  // its own answer. Over a Client they run on its I/O thread, where its answers arrive (a caller
  // cannot block there: BatchingRateLimiter's blocking calls refuse with would_deadlock).
  template <class F>
  static auto continuation(F f) {
    if constexpr (batcher_detail::IoThreadInvoker<Invoker>) {
      return f;
    } else {
      return asio::bind_executor(asio::system_executor(), std::move(f));
    }
  }

  void submit(std::string key, P p, Completion done) {
    {
      std::unique_lock lock(mu_);
      ++stats_.requests;
      auto [it, idle] = keys_.try_emplace(key);
      if (!idle) {
        if (it->second.size() < options_.maxQueuedPerKey) {
          it->second.push_back(
              Pending{std::move(p), std::move(done), SteadyClock::now() + queueTimeout_});
          armTimer(it->second.back().deadline);
          return;
        }
        ++stats_.rejected;
        lock.unlock();
        done(Error(Errc::overloaded, "key '" + key +
                                         "': " + std::to_string(options_.maxQueuedPerKey) +
                                         " requests already queued behind the one in flight "
                                         "(BatcherOptions::maxQueuedPerKey); retry later"),
             /*initiating=*/true);
        return;
      }
      ++stats_.sends;
      stats_.countSend(1);
      ++active_;
    }
    sendSingle(std::move(key), std::move(p), std::move(done));
  }

  // The end of a continuation: nothing of `this` is touched after it.
  void sendFinished() {
    std::lock_guard lock(mu_);
    if (--active_ == 0) idle_.notify_all();
  }

  void sendSingle(std::string key, P p, Completion done) {
    std::string target = key;
    invoker_.invokeAsync(
        std::move(target), p,
        continuation([this, key = std::move(key), done = std::move(done)](Answer r) mutable {
          done(std::move(r), false);
          sendNext(std::move(key));
          sendFinished();
        }));
  }

  void sendBatch(std::string key, std::vector<P> items, std::vector<Completion> dones) {
    std::string target = key;
    invoker_.invokeAsync(std::move(target), P::batch(std::move(items)),
                         continuation([this, key = std::move(key), dones = std::move(dones)](
                                          Result<typename P::Batch::Result> r) mutable {
                           distribute(std::move(r), dones);
                           sendNext(std::move(key));
                           sendFinished();
                         }));
  }

  // Hands each caller of a batch its own result, or the batch's error.
  static void distribute(Result<typename P::Batch::Result> r, std::vector<Completion>& dones) {
    if (r && r->size() != dones.size()) {
      Error wrongLength(Errc::malformed_message, "batch processor '" +
                                                     std::string(P::Batch::kName) + "' answered " +
                                                     std::to_string(r->size()) + " results to " +
                                                     std::to_string(dones.size()) + " requests");
      r = std::move(wrongLength);
    }
    for (std::size_t i = 0; i < dones.size(); ++i) {
      if (r) {
        dones[i](Answer(std::move(r.value()[i])), false);
      } else {
        dones[i](Answer(r.error()), false);
      }
    }
  }

  // Makes the timer fire by `deadline` (under mu_): armed for the oldest queued request.
  void armTimer(SteadyClock::time_point deadline) {
    if (timerArmed_) return;  // armed for an older request, whose deadline comes first
    timerArmed_ = true;
    ++active_;
    timer_.expires_at(deadline);
    timer_.async_wait([this](std::error_code) { expireQueued(); });
  }

  // The timer fired: every queued request past its deadline completes with a timeout (queues are
  // in deadline order, so they are at the fronts); then the timer is armed for the next oldest.
  void expireQueued() {
    std::vector<Completion> expired;
    std::vector<std::string> keys;
    {
      std::lock_guard lock(mu_);
      timerArmed_ = false;
      const auto now = SteadyClock::now();
      auto next = SteadyClock::time_point::max();
      for (auto& [key, queue] : keys_) {
        while (!queue.empty() && queue.front().deadline <= now) {
          expired.push_back(std::move(queue.front().done));
          keys.push_back(key);
          queue.pop_front();
        }
        if (!queue.empty()) next = std::min(next, queue.front().deadline);
      }
      stats_.expired += expired.size();
      if (next != SteadyClock::time_point::max() && !stopping_) armTimer(next);
    }
    for (std::size_t i = 0; i < expired.size(); ++i) {
      expired[i](Error(Errc::timeout, "key '" + keys[i] + "': waited " +
                                          std::to_string(queueTimeout_.count()) +
                                          " ms in the batcher's queue "
                                          "(BatcherOptions::queueTimeout); not sent"),
                 false);
    }
    sendFinished();
  }

  // After a completion on `key`: sends the next joinable prefix of its queue, or forgets `key`.
  void sendNext(std::string key) {
    std::vector<P> items;
    std::vector<Completion> dones;
    {
      std::lock_guard lock(mu_);
      auto it = keys_.find(key);
      assert(it != keys_.end());
      std::deque<Pending>& queue = it->second;
      if (queue.empty()) {
        keys_.erase(it);
        return;
      }
      std::size_t n = 1;
      while (n < queue.size() && n < maxBatch_ && P::joinable(queue.front().p, queue[n].p)) ++n;
      items.reserve(n);
      dones.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        items.push_back(std::move(queue.front().p));
        dones.push_back(std::move(queue.front().done));
        queue.pop_front();
      }
      ++stats_.sends;
      stats_.countSend(n);
      ++active_;
      if (n > 1) {
        ++stats_.batches;
        stats_.batchedRequests += n;
      }
    }
    if (items.size() == 1) {
      sendSingle(std::move(key), std::move(items.front()), std::move(dones.front()));
    } else {
      sendBatch(std::move(key), std::move(items), std::move(dones));
    }
  }

  Invoker& invoker_;
  const BatcherOptions options_;
  const std::size_t maxBatch_;
  const std::chrono::milliseconds queueTimeout_;
  mutable std::mutex mu_;
  Timer timer_{asio::system_executor()};  // guarded by mu_
  bool timerArmed_ = false;               // guarded by mu_
  bool stopping_ = false;                 // guarded by mu_
  // Keys with a request in flight, each with the requests queued behind it. Guarded by mu_.
  std::unordered_map<std::string, std::deque<Pending>> keys_;
  Stats stats_;  // guarded by mu_
  // Sends whose continuation has not finished yet; the destructor waits for 0. Guarded by mu_.
  std::size_t active_ = 0;
  std::condition_variable idle_;
};

// RateLimiter (include/ingrid/rate_limiter.h) over Batchers, for hot keys: while one call on the
// key is in flight, later ones of the same kind queue and go as one batch when it completes:
// tryAcquire as TokenBucketBatchAcquire, acquire as TokenBucketBatchReserve (joined while they
// share maxWait) and, with LimiterOptions::warmup, both as WarmupBatchAcquire (joined while they
// share maxWait). A batch is its requests in order at one `now`, so the answers are those of
// RateLimiter's calls in that order. The options (dry-run, fail-open / fail-closed, counts()),
// the checks and the waits of reservations are RateLimiter's own code (limiter_detail): a batch's
// error reaches each of its callers, and each is counted once.
//
// Thread safety: every member is safe from any thread. The invoker must outlive the limiter;
// REQUIRES: no call in flight when the limiter is destroyed (a reservation whose answer has
// arrived and that only waits its delay no longer counts).
template <class Invoker>
class BatchingRateLimiter {
 public:
  using Stats = BatcherStats;

  // `options`: as RateLimiter's. `batching`: bounds of each kind's queue and batches (one
  // Batcher per kind of request). Defaults: none of the options; BatcherOptions' defaults.
  BatchingRateLimiter(Invoker& invoker, std::string key, BucketParams params,
                      LimiterOptions options = {}, BatcherOptions batching = {})
      : invoker_(invoker),
        acquires_(invoker, batching),
        reserves_(invoker, batching),
        warmups_(invoker, batching),
        key_(std::move(key)),
        params_(params),
        policy_(std::make_shared<LimiterPolicy>(options)) {}

  // Blocks until the answer arrives. Not from a partition worker (a processor), which would
  // stall the partition: unlike Node::invoke this is not checked (would_deadlock), because
  // client/ does not link cluster/. Safe from a Node's completion threads; on a Client's I/O thread
  // (inside a completion) it refuses with would_deadlock.
  Result<AcquireAnswer> tryAcquire(std::int64_t tokens = 1) {
    return await<AcquireAnswer>([&](auto handler) { tryAcquireAsync(tokens, std::move(handler)); });
  }

  // Completion signature void(Result<AcquireAnswer>), on the handler's associated executor
  // (without one: as Batcher::invokeAsync says), never inline. Errors: the invoker's, and the
  // Batcher's (Errc::overloaded past maxQueuedPerKey, Errc::timeout past queueTimeout), after the
  // policy.
  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    return limiter_detail::withRequest<false>(
        key_, params_, options(), tokens, std::chrono::nanoseconds(0),
        [&](auto request, std::optional<Error> bad) {
          return limiter_detail::initiateAcquire(batcherFor(request), policy_, key_,
                                                 std::move(request), std::move(bad),
                                                 std::forward<CompletionToken>(token));
        });
  }

  // RateLimiter::acquire: reserves `tokens` if they will exist within `maxWait` and returns
  // once they are the caller's (a refusal, an error or a dry-run answer at once). This thread
  // blocks; the delay itself is acquireAsync's timer. For plain threads: never call it where
  // blocking stalls others (an executor's thread), nor from a partition worker.
  Result<ReserveAnswer> acquire(std::int64_t tokens, std::chrono::nanoseconds maxWait) {
    return await<ReserveAnswer>(
        [&](auto handler) { acquireAsync(tokens, maxWait, std::move(handler)); });
  }

  // RateLimiter::acquireAsync: completion signature void(Result<ReserveAnswer>), completing
  // once the reservation's delay has passed, on an asio::steady_timer of the handler's associated
  // executor (else the system executor's), never on a partition's thread.
  template <class CompletionToken>
  auto acquireAsync(std::int64_t tokens, std::chrono::nanoseconds maxWait,
                    CompletionToken&& token) {
    return limiter_detail::withRequest<true>(
        key_, params_, options(), tokens, maxWait, [&](auto request, std::optional<Error> bad) {
          return limiter_detail::initiateReserve(batcherFor(request), policy_, key_,
                                                 std::move(request), std::move(bad),
                                                 std::forward<CompletionToken>(token));
        });
  }

  const std::string& key() const noexcept { return key_; }
  const BucketParams& params() const noexcept { return params_; }
  const LimiterOptions& options() const noexcept { return policy_->options(); }
  // What this limiter has answered so far (include/ingrid/limiter_policy.h).
  LimiterCounts counts() const noexcept { return policy_->counts(); }
  // Summed over the kinds of request (each call goes through one Batcher).
  Stats stats() const {
    Stats s = acquires_.stats();
    s += reserves_.stats();
    s += warmups_.stats();
    return s;
  }

 private:
  Batcher<Invoker, TokenBucketAcquire>& batcherFor(const TokenBucketAcquire&) { return acquires_; }
  Batcher<Invoker, TokenBucketReserve>& batcherFor(const TokenBucketReserve&) { return reserves_; }
  Batcher<Invoker, WarmupAcquire>& batcherFor(const WarmupAcquire&) { return warmups_; }

  // The answer of an asynchronous call, initiated by start(handler), waited for on this thread.
  template <class T, class Start>
  Result<T> await(Start start) {
    if constexpr (batcher_detail::IoThreadInvoker<Invoker>) {
      if (invoker_.onIoThread()) {  // the answer would need this very thread
        return Error(Errc::would_deadlock,
                     "a blocking call of the BatchingRateLimiter on '" + key_ +
                         "' inside a completion, on the client's I/O thread, would wait for that "
                         "thread: use tryAcquireAsync or acquireAsync");
      }
    }
    std::promise<Result<T>> done;
    auto answer = done.get_future();
    start([done = std::move(done)](Result<T> r) mutable { done.set_value(std::move(r)); });
    return answer.get();
  }

  Invoker& invoker_;
  Batcher<Invoker, TokenBucketAcquire> acquires_;
  Batcher<Invoker, TokenBucketReserve> reserves_;
  Batcher<Invoker, WarmupAcquire> warmups_;
  std::string key_;
  BucketParams params_;
  // Shared with pending completions, which count into it.
  std::shared_ptr<LimiterPolicy> policy_;
};

}  // namespace ingrid
