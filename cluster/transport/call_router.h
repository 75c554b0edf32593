// CallRouter: sends an invocation to its key's primary and sees it through redirects and retries.
//
// Shared by the embedded Node (which may run a call locally) and the thin Client (never local).
// Routing is by the host's topology, or by a newer one a redirect carried (kept on the call).
// Retried: redirects, and answers that say the request did not run (partition moving, member
// stopping, no connection made) — with a short backoff, at most kMaxAttempts times and within
// the call's deadline.
// Exactly-once retries: a call sent to a member carries a request id (this router's
// random client id and a number of its own, kept across its retries) and `doneBelow`, the lowest
// number still awaiting an answer here. So a request whose attempt went unanswered (the member
// froze, the link dropped, or the attempt timeout passed) is sent again with the same id until the
// call's deadline: the primary that has it in its dedup table (grid/dedup_table.h) answers with
// the original result instead of running it twice. Every other error ends the call.
// Each attempt waits at most the attempt timeout (setAttemptTimeout), and the request carries the
// time left of the call's deadline, which the primary honours.
//
// Thread safety: route() and retryLater() from any thread; everything else runs on the network
// io_context given at construction. Called on that thread, route() sends at once (no re-post),
// so a call may also finish inside it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <absl/container/btree_set.h>

#include <asio/io_context.hpp>

#include <ingrid/result.h>
#include <ingrid/string_pool.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/transport/call_metrics.h"
#include "cluster/transport/peer.h"
#include "grid/block_cache.h"
#include "grid/dedup_table.h"
#include "grid/inline_bytes.h"

namespace ingrid {

// Made per call: its blocks are reused per thread (grid/block_cache.h).
struct RoutedCall : CachedBlocks {
  RoutedCall() = default;
  RoutedCall(const RoutedCall&) = delete;
  RoutedCall& operator=(const RoutedCall&) = delete;
  // Its encoded arguments (encode()'s pooled string) go back to this thread's StringPool.
  ~RoutedCall() { StringPool::give(std::move(args)); }
  std::string key;
  InlineBytes processor;  // every built-in processor's name is held inline
  std::string args;
  UniqueFunction<void(Result<std::string>)> done;
  PartitionId partition = 0;
  std::chrono::steady_clock::time_point deadline;
  int attempts = 0;
  std::uint64_t seq = 0;    // its request number, from its first send to a member (0: not yet)
  std::string retriedFor;   // why it was last retried (a reason over a timeout): the end names it
  bool mayHaveRun = false;  // an attempt went unanswered: giving up must not say "not run"
  TopologyPtr hint;         // a newer topology learned from a redirect; routes this call only
};
using RoutedCallPtr = std::unique_ptr<RoutedCall>;

class CallRouter {
 public:
  static constexpr int kMaxAttempts = 256;

  class Host {
   public:
    // The topology to route by.
    virtual TopologyPtr routingTopology() const = 0;
    // Network thread: the link to send a call on partition p to member `primary` (nullptr if
    // there is none): its member port, or the shard port that serves p.
    virtual std::shared_ptr<Peer> peerForCall(const MemberInfo& primary, PartitionId p) = 0;
    // Any thread: if this host is `primary`, take the call and run it here (calling the
    // router's retryLater() or finish() when done) and return true.
    virtual bool runLocally(RoutedCallPtr& call, MemberId primary) = 0;
    // Network thread: a redirect carried a topology newer than the host's.
    virtual void learnTopology(const TopologyPtr& topology) = 0;
    // A call is about to be retried because its route looked stale.
    virtual void routeLooksStale() {}
    // Network thread: an invocation request is being written to a member.
    virtual void requestSent() noexcept {}
    // After a call's completion ran.
    virtual void callFinished() noexcept = 0;
    // Network thread: an attempt on member `id` went unanswered (timed out, or its link is down).
    virtual void memberUnanswered(MemberId /*id*/) {}

   protected:
    ~Host() = default;
  };

  CallRouter(Host& host, asio::io_context& net);

  // How long one attempt on a member waits for its answer before it is sent again (same id, and
  // to the primary of the newest topology then). Before any call. Default: 1 s.
  void setAttemptTimeout(std::chrono::milliseconds timeout) noexcept { attemptTimeout_ = timeout; }
  std::uint64_t clientId() const noexcept { return clientId_; }
  // The id to run `call` under (any thread): invalid if it was never sent to a member.
  RequestId requestId(const RoutedCall& call) const noexcept {
    return RequestId{clientId_, call.seq, doneBelow_.load(std::memory_order_acquire)};
  }

  // Starts a call: its partition among `partitions`, its deadline `timeout` from now.
  void start(std::string key, std::string_view processor, std::string args,
             UniqueFunction<void(Result<std::string>)> done, std::uint32_t partitions,
             std::chrono::milliseconds timeout);
  void route(RoutedCallPtr call);
  void retryLater(RoutedCallPtr call, const Error& why);
  void finish(RoutedCallPtr call, Result<std::string> result);
  // What it counted of the calls it saw through (any thread).
  CallMetrics& metrics() noexcept { return metrics_; }

 private:
  void sendRemote(RoutedCallPtr call, TopologyPtr routing);
  // Network thread: `seq` is answered (or given up); doneBelow may move.
  void settled(std::uint64_t seq);

  Host& host_;
  asio::io_context& net_;
  const std::uint64_t clientId_;
  std::chrono::milliseconds attemptTimeout_{1000};
  std::uint64_t lastSeq_ = 0;                  // network thread
  absl::btree_set<std::uint64_t> unanswered_;  // network thread: numbers sent, not settled
  std::atomic<std::uint64_t> doneBelow_{1};    // the smallest of them, or lastSeq_ + 1
  CallMetrics metrics_;
};

}  // namespace ingrid
