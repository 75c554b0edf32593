// NodeOptions: how an embedded node is configured. A plain struct; every field has its default.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ingrid/clock.h>
#include <ingrid/discovery.h>
#include <ingrid/hash.h>
#include <ingrid/log.h>
#include <ingrid/replication_mode.h>
#include <ingrid/tls_options.h>

namespace ingrid {

class FrameFaults;  // cluster/transport/frame_faults.h (internal, a test hook)

struct Topology;

struct NodeOptions {
  // Number of partitions the key space is cut into. Every member of a cluster must use the same
  // value, for the cluster's whole life. Default: 1024.
  std::uint32_t partitions = kDefaultPartitionCount;
  static_assert(kDefaultPartitionCount == 1024, "the default the comment above states");
  static_assert(kDefaultPartitionCount <= kMaxPartitionCount, "the default is a valid count");
  // Threads that own partitions and run processors; partition p belongs to worker p % threads.
  // 0 means std::thread::hardware_concurrency(). Default: 0.
  unsigned workerThreads = 0;
  // Run every partition on the network thread instead of on worker threads (workerThreads is then
  // ignored): one thread reads a request, runs it, replicates it and answers, with no handoff
  // between threads. Best when the process has one core to itself; with several, worker threads
  // run partitions in parallel. Only with a listenAddress (without one there is no network
  // thread). Default: false.
  bool partitionsOnNetworkThread = false;
  // Shard ports (with a listenAddress, and partitions on worker threads): each worker also listens
  // on a port of its own, on the listen address's host, and serves invocations there on its own
  // thread: a request is read, run, replicated and answered by the thread that owns its
  // partition. The ports are listed in the member's topology entry (MemberInfo::shardPorts); the
  // thin client sends each invocation to its partition's shard port (ClientOptions::shardAware),
  // and so do members forwarding their embedded calls. Replication goes there too: when both
  // members run shard ports, a primary's worker sends its updates and snapshots on its own link
  // to the backup's shard port that owns the partition, not through the network thread. So
  // members must reach each other's shard ports, and clients should. A shard port takes Hello,
  // Auth and Invoke from anyone, and Replicate and Snapshot from members; everything else goes to
  // the member port. An invocation for a partition another worker owns is forwarded inside the
  // node. Default: true.
  bool shardPorts = true;
  // The first shard port: worker i listens on shardPortBase + i. 0: ephemeral ports, chosen by
  // the system (they are advertised in the topology). Default: 0.
  std::uint16_t shardPortBase = 0;
  // Threads that run completions (callbacks, futures) whose handler has no associated executor.
  // Completions never run on a partition worker (invariant 9). Default: 1.
  unsigned completionThreads = 1;
  // The clock processors read "now" from. Default (nullptr): the system wall clock.
  std::shared_ptr<const Clock> clock = nullptr;
  // How often each worker sweeps its partitions for expired entries (8 times less often while its
  // partitions are empty). Default: 1 s.
  std::chrono::milliseconds expirySweepInterval{1000};
  // Entries of each partition examined per sweep; bounds the work of one sweep. Default: 256.
  std::size_t expirySweepEntries = 256;

  // --- Cluster. With an empty listenAddress the node is a single member with no network. ---

  // "host:port" to listen on for members and clients; port 0 picks an ephemeral port (see
  // Node::listenAddress()). Default: empty (no network).
  std::string listenAddress = {};
  // "host:port" the other members and the clients reach this member at, when it is not the
  // listen address (listening on 0.0.0.0, or behind a NAT or a container's port mapping); port 0
  // means the port listened on. A wildcard listen address (0.0.0.0, ::) needs one: a wildcard is
  // never advertised. Shard ports are advertised by number on this host: behind a port mapping,
  // map them one to one (shardPortBase) or turn them off. Default: empty (the listen address).
  std::string advertiseAddress = {};
  // Members to join through, "host:port" each, tried in order. Empty (with a listenAddress)
  // starts a new cluster. Default: empty.
  std::vector<std::string> seeds = {};
  // More seeds, found at each round of join attempts (include/ingrid/discovery.h): dnsSeeds() for
  // a DNS name with one record per member, or the embedder's own source. Tried after `seeds`;
  // this member's own advertised address is skipped. With a provider, a node that finds no
  // cluster never starts one on its own: see bootstrapExpect. Default: none.
  SeedProvider seedProvider = {};
  // With a seedProvider: the node starts a new cluster when, in one round, at least this many
  // nodes (itself included) answered, none of them a member of a cluster, and its own advertised
  // address is the smallest of theirs (in byte order). So nodes started at once with the same
  // discovery form one cluster, as Consul's bootstrap_expect: set it to the number started
  // together, on each. A node whose provider does not list it, and any node once a cluster
  // exists, joins. 0: never start one (join only). Default: 0.
  std::uint32_t bootstrapExpect = 0;
  // Backups of each partition; the cluster's value is the first member's. Default: 1.
  std::uint32_t backups = 1;
  // When the primary answers relative to replication. Default: kSync.
  ReplicationMode replication = ReplicationMode::kSync;
  // The cluster secret. When set, members prove to each other that they know it (HMAC-SHA256
  // over fresh nonces, in Hello and Auth) before any control-plane or replication message is
  // accepted from them, and a joining node proves it in its Join. Every member must have the same
  // one. Empty: members are not authenticated. Default: empty.
  std::string clusterSecret = {};
  // The client secret. When set, a connection that is not a member's link must prove it (HMAC
  // over fresh nonces, in Hello and Auth; ClientOptions::clientSecret) before anything but
  // Hello, Auth and Join is taken from it; one that sends anything else first is refused with an
  // `unauthenticated` error naming the reason, and closed. Needs a clusterSecret (else a client
  // could say it is a member). Every member must have the same one. Empty: clients are not
  // authenticated. Default: empty.
  std::string clientSecret = {};
  // TLS for every connection this node accepts and dials (include/ingrid/tls_options.h). With a
  // caFile, a node needs its certificate chain and private key too: members verify each other's
  // certificates against the CA (mutual TLS), and a connection that says Hello as a member
  // without a verified certificate is refused. Clients verify the node's certificate and need
  // none of their own. A peer without TLS is refused with an error naming the reason. Default:
  // off.
  TlsOptions tls = {};
  // Connections from clients and tools this node accepts at once; one more is refused with an
  // `overloaded` error naming the limit. Members' links may go past it (into a reserve of 1024),
  // so that clients cannot crowd them out. Default: 4096.
  std::size_t maxConnections = 4096;
  // Bytes queued for a client or tool that does not read its replies before it is disconnected.
  // Default: 64 MiB.
  std::size_t maxQueuedBytes = std::size_t{64} << 20;
  // Bytes that all connections from clients and tools (not members) may hold at once in partly
  // received frames. A frame that would take the total past it is answered with an `overloaded`
  // error naming the limit and its connection is closed; the node keeps serving the others. Each
  // connection's first 16 KiB of read buffer is not counted (maxConnections bounds those), nor
  // are members' links. 0: no limit. Default: 64 MiB.
  std::size_t maxBufferedBytes = std::size_t{64} << 20;
  // An accepted connection that sends no complete frame within this is closed. Default: 10 s.
  std::chrono::milliseconds handshakeTimeout{10000};
  // An accepted connection from a client or tool (not a member) that sends nothing for this long
  // is closed; the thin client redials on its next request. 0: never. Default: 10 min.
  std::chrono::milliseconds idleTimeout{600000};
  // Deadline of one invocation, redirects and retries included (then Errc::timeout). Default: 5 s.
  std::chrono::milliseconds requestTimeout{5000};
  // Exactly-once retries (grid/dedup_table.h): a partition keeps the answers of the requests that
  // changed it until their client has them, or until the client sent it nothing for this long.
  // A request's deadline is capped at half of it, so no retry can outlive its record. Default: 60
  // s.
  std::chrono::milliseconds dedupWindow{60000};
  // How long start() waits for an answer from its seeds while joining: it keeps trying while
  // they answer (a busy leader, a member's address still leased), until it is admitted, refused
  // (a wrong secret, other processors or timing) or stopped, and gives up once no seed has
  // answered for this long. Default: 10 s.
  std::chrono::milliseconds joinTimeout{10000};
  // After leaving, how long stop() keeps answering requests (redirects to the new owners) before
  // closing its connections, so that clients and members with a stale topology learn the new
  // one instead of losing a request to a closed socket. Default: 250 ms.
  std::chrono::milliseconds drainPeriod{250};
  // How often a member sends a heartbeat to the members it watches (the 2 after it in id order,
  // and the control plane's leader unless its lease grants answer for it): at each multiple of it
  // on the wall clock, so that the members' heartbeats coincide and wake each member once per
  // interval. Lease renewals go on the same ticks: once per interval, or n times per interval
  // when a third of the lease is shorter (at least three renewals per lease). Default: 500 ms.
  std::chrono::milliseconds heartbeatInterval{500};
  // A member not heard from for this long is declared failed by the coordinator (the control
  // plane's leader), which removes it: backups of its partitions take over and new backups are
  // filled by migration. If the leader itself falls silent, the control plane elects another
  // (see electionTimeout), which then judges the old one. Shorter detects crashes sooner; too short
  // declares members failed that are only slow (a starved VM, a stopped process). Keep it below
  // requestTimeout so that callers ride through a failover instead of timing out. Default: 3 s.
  std::chrono::milliseconds failureTimeout{3000};
  // Members that vote in the control plane (Raft), at most: the ones with the smallest ids; the
  // others follow the log as standbys. Topology changes need a majority of the voters, so 3
  // voters survive the loss of 1, 5 the loss of 2 and 7 the loss of 3. With fewer members than
  // this, every member votes, rounded down to an odd number from 3 up (4 members: 3 voters; a
  // 2-member cluster has 2 and survives no loss). A voter that fails or leaves is removed from
  // the configuration before the next member is promoted. 1, 3, 5 or 7; give all members the
  // same. Default: 5 (as etcd and Consul recommend for production).
  std::uint32_t voters = 5;
  // This member's failure domain: a rack, an availability zone, a host (up to 64 printable
  // bytes). A partition's backups go in zones other than its primary's, and the voters are
  // spread over the zones (round robin, smallest ids first), wherever the members allow: so a
  // zone lost whole loses no partition and, with three zones or more, leaves a majority of the
  // voters. Empty: none (all members count as one zone). Default: empty.
  std::string zone = {};
  // A directory of this node's own for the control plane's Raft state (term, vote, log,
  // snapshots) and the identity of the member that state belongs to; locked while the node runs.
  // The buckets are never written there: a node restarted with its directory comes back empty,
  // but votes as the member it was until the others have removed that member, then joins as a new
  // one. So voters killed together and restarted with their directories restore the quorum they
  // belong to, and the cluster heals without `ingrid-cli recover`. Restart a node with its
  // directory at the address it advertised before (or with an empty directory). Empty: none, the
  // Raft state is in memory only (a lost quorum then needs `ingrid-cli recover`). Default: empty.
  std::string dataDir = {};
  // The control plane's election timeout: a leader silent this long (randomized up to twice
  // it) is replaced. 0 means leaseDuration / 5 (at least 50 ms): a successor is elected while
  // the leases the dead leader granted still run, and the members renew theirs with it at once,
  // so that keys whose owners live see no refusal across a leader's crash. A longer timeout
  // rides out longer stalls of a leader (a paused VM) but lets leases lapse when it dies: an
  // election may start 2 1/2 timeouts after the leader's last heartbeat (a randomized timeout
  // seen up to a tick late; the leader's Raft heartbeats and the ticks go every half of it), and
  // a member's last renewal may be a third of the lease old, so keep it below about
  // leaseDuration / 4.5. Default: 0.
  std::chrono::milliseconds electionTimeout{0};
  // Primary lease: a member serves writes only while its lease, renewed through the control
  // plane's leader every heartbeatInterval (or more often: at least three times per lease), is
  // valid; a failed member's partitions are promoted
  // only once its lease has surely expired (leaseDuration * 1.1 + 10 ms after the last grant:
  // clock rates are assumed to differ by less than 10%). So a member cut off from the majority,
  // or paused, stops writing within leaseDuration of its last renewal. 0 means failureTimeout / 2.
  // Must be below failureTimeout. Default: 0.
  std::chrono::milliseconds leaseDuration{0};
  // (A process restarted at a member's address is admitted only once that member's lease has
  // expired, about leaseDuration * 1.1 after its last renewal: its joinTimeout must be longer.)
  // Split-brain protection: a member that sees fewer members than this refuses every
  // invocation that would write (Errc::no_quorum; reads still run), so the two sides of a
  // network partition cannot both grant tokens. Set it to a majority of the intended cluster
  // size; 0 turns it off. The cluster's own value is each member's: give all the same. Default: 0.
  std::uint32_t minMembers = 0;
  // Copies of a partition that must hold a write for it to be acknowledged: the primary's and
  // its complete backups' (a backup still receiving its snapshot holds nothing yet). While fewer
  // are complete (after a failure, until the replacement backup has its snapshot), a write is
  // refused before it runs (Errc::unavailable, naming the count; the client retries, and nothing
  // changed); a write that ends up held by fewer (a backup dropped while it replicated) is
  // answered Errc::indeterminate. 1 acknowledges a write the primary alone holds: it survives
  // any single failure that does not overlap a re-sync (docs/ARCHITECTURE.md, "Durability"). 2
  // survives a second failure during a re-sync, at the price of refusing the writes of a
  // partition during its re-sync, and of every write in a one-member cluster. From 1 to
  // backups + 1; give all members the same. Default: 1 (as Kafka's min.insync.replicas; writes
  // acknowledged with fewer copies than backups + 1 are counted: Node::degradedWrites()).
  std::uint32_t minInSyncReplicas = 1;
  // A migration (a join, a leave, a failover's resyncs) in which no new owner finished its
  // snapshot for this long is planned again, and its outstanding snapshots restart from scratch:
  // a change never waits forever on a sync that stalled. Default: 60 s.
  std::chrono::milliseconds migrationStallTimeout{60000};
  // How long stop() waits for this member's partitions to move away. Default: 15 s.
  std::chrono::milliseconds leaveTimeout{15000};
  // Called with each topology this node installs (its first, then every change), on the
  // node's network thread: keep it short and never block or call back into the node there.
  // Default: none.
  std::function<void(const Topology&)> onTopology = nullptr;
  // Where this node's log lines go (include/ingrid/log.h): called on any of its threads,
  // concurrently. A library does not write to its host's stderr: without a sink nothing is logged
  // (ingrid-node installs one that prints each line to stderr). Default: none.
  LogSink logSink = nullptr;
  // The least severe level handed to logSink; a line below it is not even formatted. Default:
  // LogLevel::kInfo.
  LogLevel logLevel = LogLevel::kInfo;
  // Test hook: faults injected into the frames this node's connections write (drop, delay,
  // duplicate, reorder; cluster/transport/frame_faults.h), shared by the nodes of an in-process
  // test. Default: none.
  std::shared_ptr<FrameFaults> frameFaults = nullptr;
};

}  // namespace ingrid
