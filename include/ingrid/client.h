// Client: a thin, partition-aware client of an ingrid cluster. Holds no data.
//
// start() reaches any seed and learns the topology (members and partition table); each
// invocation then goes straight to its key's primary in one round trip over a connection kept to
// each member. Redirects carry a newer topology, which the client adopts; when a route looks
// stale it also asks a member for the current topology. Connections reconnect with backoff,
// every request has a deadline (ClientOptions.requestTimeout), and retries are bounded (see
// CallRouter). The invoke surface is the embedded Node's: code written against one works
// against the other.
//
// Thread safety: every member is safe from any thread, except that start() and stop() must not
// race, and that stop() (or the destructor) must not run inside a completion.
//
// Completions run on the handler's associated executor; a handler without one runs on the
// client's I/O thread, as a handler of any Asio I/O object does. So a completion that starts the
// next invocation sends it with no thread hop; it must not block (a blocking invoke() there
// fails with would_deadlock), and long work belongs on an executor of the caller's own
// (asio::bind_executor).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/system_executor.hpp>

#include <ingrid/invoke_async.h>
#include <ingrid/result.h>
#include <ingrid/tls_options.h>
#include <ingrid/topology.h>

namespace ingrid {

struct ClientOptions {
  // Members to learn the cluster from, "host:port" each, tried in order. Required.
  std::vector<std::string> seeds = {};
  // Deadline of one invocation, including redirects and retries. Default: 5 s.
  std::chrono::milliseconds requestTimeout{5000};
  // The client secret that members ask for (NodeOptions::clientSecret): when set, every
  // connection proves it (HMAC over fresh nonces, in Hello and Auth) before its first request.
  // A member that requires it refuses a client without it, or with another one, with an
  // `unauthenticated` error naming the reason. Empty: none. Default: empty.
  std::string clientSecret = {};
  // TLS to the members (include/ingrid/tls_options.h): with a caFile, every connection is TLS and
  // the member's certificate must chain to that CA, or the call fails naming why. A certificate and
  // key of the client's own are optional (members do not ask clients for one). Default: off.
  TlsOptions tls = {};
  // How long start() may try the seeds before giving up. Default: 5 s.
  std::chrono::milliseconds connectTimeout{5000};
  // A member whose link owes an answer and has heard nothing this long (counted from the first
  // request still unanswered, across its retries) is suspected (paused, cut off, dead):
  // the client then asks every member it knows, and the seeds, at once for a newer topology,
  // and again every half of this while a request stays unanswered (never more often, whatever
  // the number of calls), so that new calls go to the member that took over as soon as the
  // cluster has moved on. Calls sent to a member that the new topology no longer lists, and left
  // unanswered this long, are sent again (same id: they run at most once) to the new primaries.
  // Must be > 0. Default: 500 ms.
  std::chrono::milliseconds suspectAfter{500};
  // Keep a watch (a GetTopology long poll) at two members, chosen for this client by rendezvous
  // hashing, so that a committed topology change (a failed member removed, a member added)
  // reaches the client as soon as either installs it, not at the next refresh. false: the client
  // learns changes only by refreshing when a route looks stale. Default: true.
  bool watchTopology = true;
  // Send each invocation to the shard port that serves its partition, when the member lists
  // shard ports (MemberInfo::shardPorts, NodeOptions::shardPorts): one connection per (member,
  // shard) used, so a request is read, run and answered on the member's thread that owns the
  // partition. A shard port that refuses a dial is left alone for a second, and the member port
  // serves meanwhile. false: every call goes to the member port. Default: true.
  bool shardAware = true;
};

// A member's own view of itself, as Client::statusOf() reports it (what `ingrid-cli status` shows).
struct MemberStatus {
  MemberId memberId = 0;  // 0: not a member (joining, or rejoining after it was removed)
  std::uint64_t topologyVersion = 0;  // the topology it has installed
  std::uint64_t term = 0;             // the control plane's current term there
  MemberId leader = 0;                // the control plane's leader as it knows it; 0 if none
  bool isLeader = false;
  std::vector<MemberId> voters;     // the Raft configuration as it knows it
  std::vector<MemberId> standbys;   // (and spares)
  std::int64_t leaseLeftMs = 0;     // how long its primary lease still runs; 0: none
  std::vector<PartitionId> fenced;  // partitions it leads that refuse writes (they are moving)
  bool rejoining = false;           // removed while alive, joining again as a new member
  // Partitions it owns whose replica there is not complete (never synced, or resyncing after a
  // missed update): a partition whose every owner is so has no complete replica.
  std::vector<PartitionId> incomplete;
  // Partitions it leads with a backup that lacks an update made there: a replication attempt
  // failed, and none since reached every backup (a link to a backup is down).
  std::vector<PartitionId> behind;
  // Times its primary lease ran out before a renewal came: it refused writes in between (a
  // control plane without a leader for longer than the lease, or a member cut off from it).
  std::uint64_t leaseLapses = 0;
  // On the control plane's leader: the members it may be about to remove (declared failed, not
  // heard from, or named in a member's report of a link it cannot use, as the reporter or the far
  // end). Empty on the other members.
  std::vector<MemberId> suspects;
  // On the control plane's leader: the voters it wants for its topology; `voters` differs while a
  // promotion or a dead voter's removal is under way. Empty on the other members.
  std::vector<MemberId> wantedVoters;
};
class ClientImpl;

class Client {
  // Defined before the templates below use it: its return type is deduced, and clang deduces it
  // where a template names it (clang refused every use of invokeAsync before).
  auto rawInvoker() {
    return [this](std::string k, std::string_view name, std::string args, RawCompletion done) {
      invokeRaw(std::move(k), name, std::move(args), std::move(done));
    };
  }

 public:
  explicit Client(ClientOptions options);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Reaches a seed and learns the topology. Errors: invalid_configuration (no seeds, a seed that
  // is not host:port), unreachable (naming every seed tried and the last error), not_running
  // (a Client is started once).
  Result<bool> start();
  // Fails nothing admitted: waits for in-flight invocations, then closes. Idempotent.
  void stop();

  template <EntryProcessor P, class CompletionToken>
  auto invokeAsync(std::string key, const P& processor, CompletionToken&& token) {
    if (completionsClosed_.load(std::memory_order_acquire)) {
      // Stopped: the completion threads are gone; the refusal still completes the token.
      return asyncInvoke<P>(rawInvoker(), asio::system_executor(), std::move(key), processor,
                            std::forward<CompletionToken>(token));
    }
    return asyncInvoke<P>(rawInvoker(), ioExecutor(), std::move(key), processor,
                          std::forward<CompletionToken>(token));
  }
  // Blocks until the answer. Fails with would_deadlock inside a completion (on the I/O thread).
  template <EntryProcessor P>
  Result<typename P::Result> invoke(std::string key, const P& processor) {
    if (onIoThread()) {
      return Error(Errc::would_deadlock, "Client::invoke() of processor '" + std::string(P::kName) +
                                             "' inside a completion, on the client's I/O thread, "
                                             "would wait for that thread: use invokeAsync");
    }
    return blockingInvoke<P>(rawInvoker(), std::move(key), processor);
  }
  void invokeRaw(std::string key, std::string_view processor, std::string args, RawCompletion done);

  // The topology the client routes by (nullptr before start()).
  TopologyPtr topology() const;
  // This client's metrics in Prometheus's text format: ingrid_client_requests_total{outcome},
  // ingrid_client_retries_total, ingrid_client_topology_refreshes_total (docs/operations.md),
  // for the application to serve with its own. Any thread.
  std::string metricsText();
  // Asks the member at `address` for its topology (blocking, within requestTimeout).
  Result<Topology> topologyOf(const std::string& address);
  // Asks the member at `address` for its own view: control plane, lease, fenced partitions.
  Result<MemberStatus> statusOf(const std::string& address);
  // Sends `request`, an encoded RecoverRequest (kRecover, docs/wire-format.md), to the member at
  // `address` (blocking, within `timeout`): what `ingrid-cli recover` does. The encoded
  // RecoverReply, or the member's error naming why it refused.
  Result<std::string> recoverRaw(const std::string& address, std::string request,
                                 std::chrono::milliseconds timeout);
  // The executor of the client's I/O thread, where completions without an executor of their
  // own run (Batcher keeps its continuations there), and whether the calling thread is it.
  asio::io_context::executor_type ioExecutor() const noexcept;
  bool onIoThread() const noexcept;
  // Invoke requests written to members so far (each single or batch processor is one).
  std::uint64_t requestsSent() const noexcept;
  const ClientOptions& options() const noexcept;

 private:
  std::unique_ptr<ClientImpl> impl_;
  // Set when stop() begins: later refusals complete on the system executor, not the I/O thread.
  std::atomic<bool> completionsClosed_{false};
};

}  // namespace ingrid
