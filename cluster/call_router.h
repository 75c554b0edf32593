// CallRouter: sends an invocation to its key's primary and sees it through redirects and retries.
//
// Shared by the embedded Node (which may run a call locally) and the thin Client (never local).
// Routing is by the host's topology, or by a newer one a redirect carried (kept on the call).
// Retried: redirects, and answers that say the request did not run (partition moving, member
// stopping, no connection made) — with a short backoff, at most kMaxAttempts times and within
// the call's deadline. Not retried: a request that reached a primary and then lost its
// connection (it may have run; running it twice would grant twice), and every other error.
//
// Thread safety: route() and retryLater() from any thread; everything else runs on the network
// io_context given at construction. Called on that thread, route() sends at once (no re-post),
// so a call may also finish inside it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <asio/io_context.hpp>

#include <ingrid/cluster/peer.h>
#include <ingrid/cluster/topology.h>
#include <ingrid/grid/result.h>
#include <ingrid/grid/unique_function.h>

namespace ingrid {

struct RoutedCall {
  std::string key;
  std::string processor;
  std::string args;
  UniqueFunction<void(Result<std::string>)> done;
  PartitionId partition = 0;
  std::chrono::steady_clock::time_point deadline;
  int attempts = 0;
  TopologyPtr hint;  // a newer topology learned from a redirect; routes this call only
};
using RoutedCallPtr = std::unique_ptr<RoutedCall>;

class CallRouter {
 public:
  static constexpr int kMaxAttempts = 256;

  class Host {
   public:
    // The topology to route by.
    virtual TopologyPtr routingTopology() const = 0;
    // Network thread: the link to a member (nullptr if there is none).
    virtual std::shared_ptr<Peer> peerFor(MemberId id, const std::string& address) = 0;
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

   protected:
    ~Host() = default;
  };

  CallRouter(Host& host, asio::io_context& net) : host_(host), net_(net) {}

  // Starts a call: its partition among `partitions`, its deadline `timeout` from now.
  void start(std::string key, std::string_view processor, std::string args,
             UniqueFunction<void(Result<std::string>)> done, std::uint32_t partitions,
             std::chrono::milliseconds timeout);
  void route(RoutedCallPtr call);
  void retryLater(RoutedCallPtr call, const Error& why);
  void finish(RoutedCallPtr call, Result<std::string> result);

 private:
  void sendRemote(RoutedCallPtr call, TopologyPtr routing);

  Host& host_;
  asio::io_context& net_;
};

}  // namespace ingrid
