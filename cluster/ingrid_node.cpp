// ingrid-node: a standalone ingrid member, for a separate tier and for multi-process tests.
//
// Prints "ingrid-node: member ID listening on HOST:PORT" once started, one line per topology
// change, and leaves the cluster gracefully on SIGINT or SIGTERM.
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include <ingrid/node.h>

#include "cluster/probe_server.h"

namespace {

constexpr const char* kUsage = R"(usage: ingrid-node [options]

Runs one ingrid member until SIGINT or SIGTERM, then leaves the cluster gracefully.

  --listen HOST:PORT   address to listen on for members and clients; port 0 picks a free
                       port (printed on start). Default: 127.0.0.1:0
  --advertise HOST:PORT
                       address the others reach this member at (needed with a wildcard
                       --listen such as 0.0.0.0:7400); port 0 = the port listened on.
                       Default: the --listen address
  --seed HOST:PORT     a member to join through; repeat for several. None: start a new cluster.
  --partitions N       partitions of the key space; must match the cluster. Default: 1024
  --backups N          backups per partition (the first member's value wins). Default: 1
  --workers N          partition worker threads; 0 = one per core. Default: 0
  --single-thread      run the partitions on the network thread (no worker threads): one
                       thread reads, runs, replicates and answers. Best on one core.
  --shard-port-base N  worker i takes clients' invocations on port N + i (its shard port);
                       0 = free ports, listed in the topology. Default: 0
  --no-shard-ports     workers open no ports of their own: clients send everything to
                       the --listen port
  --heartbeat-ms N     how often a heartbeat goes to every other member. Default: 500
  --failure-timeout-ms N
                       a member silent this long is declared failed and removed; its
                       backups take over its partitions. Default: 3000
  --lease-ms N         primary lease: a member cut off from the leader stops writing within
                       N ms, and a failed member's partitions move only after its lease
                       expired (N * 1.1 + 10 ms). Must be below the failure timeout.
                       Default: failure timeout / 2
  --dedup-window-ms N  how long a request's exactly-once record outlives it: a retry within
                       it is answered, never run twice; clients cap their deadlines to half
                       of it. Every member needs the same one. At least 1000. Default: 60000
  --request-timeout-ms N
                       deadline of this member's own calls (at most half the dedup window).
                       Default: 5000, or half the dedup window if that is shorter
  --min-members N      refuse writes while this member sees fewer than N members
                       (split-brain protection; use a majority). Default: 0 (off)
  --min-insync N       copies (primary and complete backups) that must hold a write for it
                       to be acknowledged; fewer: refused, nothing changed. From 1 to
                       backups + 1. Default: 1
  --cluster-secret-file PATH
                       the cluster secret, read from PATH (one line; a trailing newline is
                       dropped): members prove it to each other before any control or
                       replication message, and a joining node in its Join. Every member
                       needs the same one. Default: none (members not authenticated)
  --client-secret-file PATH
                       the client secret, read from PATH as the cluster secret is: clients
                       must prove it before their first request (ingrid-cli
                       --client-secret-file). Needs --cluster-secret-file. Default: none
  --tls-ca PATH        PEM file of the CA that members' certificates chain to: turns TLS on for
                       every connection (members and clients); needs --tls-cert and --tls-key.
                       Members verify each other's certificates against it (mutual TLS).
                       Default: none (plain TCP)
  --tls-cert PATH      PEM file: this member's certificate, then any intermediates
  --tls-key PATH       PEM file: that certificate's private key (unencrypted)
  --version            print the version and exit
  --metrics HOST:PORT  serve /metrics (Prometheus), /livez, /readyz and /cluster-safe over
                       HTTP there (docs/operations.md); port 0 picks a free port (printed
                       on start). Default: none
  --max-connections N  connections accepted at once; one more is refused with an error
                       naming the limit. Default: 4096
  --max-buffered-bytes N
                       bytes that clients' connections may hold at once in partly received
                       frames; a frame past it is refused (overloaded) and its connection
                       closed. 0 = no limit. Default: 67108864 (64 MiB)
  --idle-timeout-ms N  close a client's connection after N ms without a request (members'
                       links are exempt; the client redials). 0 = never. Default: 600000
  --log-level LEVEL    error, warn, info or debug. Default: info
  --help               this text
)";

enum Level { kError, kWarn, kInfo, kDebug };

bool parseUnsigned(const char* text, unsigned long max, unsigned long& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v > max) return false;
  out = v;
  return true;
}

void describe(const ingrid::Topology& t, ingrid::MemberId self, Level level) {
  std::map<ingrid::MemberId, int> primaries;
  for (ingrid::PartitionId p = 0; p < t.table.partitionCount(); ++p)
    ++primaries[t.table.primary(p)];
  std::string members;
  for (const auto& m : t.members) {
    members += (members.empty() ? "" : ", ") + std::to_string(m.id) + "@" + m.address;
    if (level >= kDebug) members += " (" + std::to_string(primaries[m.id]) + " primaries)";
  }
  std::printf(
      "ingrid-node: topology v%llu: %zu members [%s], leader %llu (term %llu), member %llu is "
      "primary of %d partitions\n",
      static_cast<unsigned long long>(t.version), t.members.size(), members.c_str(),
      static_cast<unsigned long long>(t.leader), static_cast<unsigned long long>(t.term),
      static_cast<unsigned long long>(self), primaries[self]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ingrid::NodeOptions options;
  options.listenAddress = "127.0.0.1:0";
  Level level = kInfo;
  std::string metricsAddress;
  bool requestTimeoutSet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ingrid-node: %s needs a value\n%s", name, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    unsigned long n = 0;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("ingrid-node %s (commit %s)\n", INGRID_VERSION, INGRID_COMMIT);
      return 0;
    } else if (arg == "--listen") {
      options.listenAddress = value("--listen");
    } else if (arg == "--metrics") {
      metricsAddress = value("--metrics");
    } else if (arg == "--advertise") {
      options.advertiseAddress = value("--advertise");
    } else if (arg == "--seed") {
      options.seeds.emplace_back(value("--seed"));
    } else if (arg == "--partitions" && parseUnsigned(value("--partitions"), 1u << 20, n) &&
               n > 0) {
      options.partitions = static_cast<std::uint32_t>(n);
    } else if (arg == "--backups" && parseUnsigned(value("--backups"), 8, n)) {
      options.backups = static_cast<std::uint32_t>(n);
    } else if (arg == "--workers" && parseUnsigned(value("--workers"), 256, n)) {
      options.workerThreads = static_cast<unsigned>(n);
    } else if (arg == "--single-thread") {
      options.partitionsOnNetworkThread = true;
    } else if (arg == "--shard-port-base" && parseUnsigned(value("--shard-port-base"), 65535, n)) {
      options.shardPortBase = static_cast<std::uint16_t>(n);
    } else if (arg == "--no-shard-ports") {
      options.shardPorts = false;
    } else if (arg == "--heartbeat-ms" && parseUnsigned(value("--heartbeat-ms"), 3600000, n) &&
               n > 0) {
      options.heartbeatInterval = std::chrono::milliseconds(n);
    } else if (arg == "--failure-timeout-ms" &&
               parseUnsigned(value("--failure-timeout-ms"), 3600000, n) && n > 0) {
      options.failureTimeout = std::chrono::milliseconds(n);
    } else if (arg == "--dedup-window-ms" &&
               parseUnsigned(value("--dedup-window-ms"), 86400000, n) && n > 0) {
      options.dedupWindow = std::chrono::milliseconds(n);
    } else if (arg == "--request-timeout-ms" &&
               parseUnsigned(value("--request-timeout-ms"), 3600000, n) && n > 0) {
      options.requestTimeout = std::chrono::milliseconds(n);
      requestTimeoutSet = true;
    } else if (arg == "--lease-ms" && parseUnsigned(value("--lease-ms"), 3600000, n) && n > 0) {
      options.leaseDuration = std::chrono::milliseconds(n);
    } else if (arg == "--min-members" && parseUnsigned(value("--min-members"), 1024, n)) {
      options.minMembers = static_cast<std::uint32_t>(n);
    } else if (arg == "--min-insync" && parseUnsigned(value("--min-insync"), 9, n) && n > 0) {
      options.minInSyncReplicas = static_cast<std::uint32_t>(n);
    } else if (arg == "--cluster-secret-file" || arg == "--client-secret-file") {
      const char* path = value(arg.c_str());
      std::ifstream in(path, std::ios::binary);
      std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
        secret.pop_back();
      }
      if (!in.good() && !in.eof()) secret.clear();
      if (secret.empty()) {
        std::fprintf(stderr, "ingrid-node: %s %s: cannot read it, or it is empty\n", arg.c_str(),
                     path);
        return 2;
      }
      (arg == "--cluster-secret-file" ? options.clusterSecret : options.clientSecret) =
          std::move(secret);
    } else if (arg == "--tls-ca") {
      options.tls.caFile = value("--tls-ca");
    } else if (arg == "--tls-cert") {
      options.tls.certificateChainFile = value("--tls-cert");
    } else if (arg == "--tls-key") {
      options.tls.privateKeyFile = value("--tls-key");
    } else if (arg == "--max-connections" &&
               parseUnsigned(value("--max-connections"), 1000000, n) && n > 0) {
      options.maxConnections = n;
    } else if (arg == "--max-buffered-bytes" &&
               parseUnsigned(value("--max-buffered-bytes"), std::size_t{1} << 40, n)) {
      options.maxBufferedBytes = n;
    } else if (arg == "--idle-timeout-ms" &&
               parseUnsigned(value("--idle-timeout-ms"), 86400000, n)) {
      options.idleTimeout = std::chrono::milliseconds(n);
    } else if (arg == "--log-level") {
      const std::string l = value("--log-level");
      const std::map<std::string, Level> levels{
          {"error", kError}, {"warn", kWarn}, {"info", kInfo}, {"debug", kDebug}};
      if (!levels.count(l)) {
        std::fprintf(stderr, "ingrid-node: unknown log level '%s'\n%s", l.c_str(), kUsage);
        return 2;
      }
      level = levels.at(l);
    } else {
      std::fprintf(stderr, "ingrid-node: bad or unknown argument '%s'\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }

  if (!requestTimeoutSet) {
    options.requestTimeout = std::min(options.requestTimeout, options.dedupWindow / 2);
  }
  ingrid::Node* self = nullptr;
  options.onTopology = [&self, level](const ingrid::Topology& t) {
    if (level >= kInfo) describe(t, self ? self->memberId() : 0, level);
  };
  ingrid::Node node(options);
  self = &node;
  if (auto started = node.start(); !started) {
    std::fprintf(stderr, "ingrid-node: cannot start: %s\n", started.error().message().c_str());
    return 1;
  }
  ingrid::ProbeServer probes(node);
  if (!metricsAddress.empty()) {
    const auto port = probes.start(metricsAddress);
    if (!port) {
      std::fprintf(stderr, "ingrid-node: --metrics: %s\n", port.error().message().c_str());
      node.stop();
      return 2;
    }
    std::printf("ingrid-node: metrics on %s:%u\n",
                metricsAddress.substr(0, metricsAddress.rfind(':')).c_str(), unsigned{*port});
  }
  std::string shardPorts;
  // Held while `me` is read: the network thread may install a newer topology meanwhile.
  const ingrid::TopologyPtr topology = node.topology();
  if (const ingrid::MemberInfo* me = topology->member(node.memberId())) {
    for (std::uint16_t port : me->shardPorts) {
      shardPorts += (shardPorts.empty() ? "" : ",") + std::to_string(port);
    }
  }
  // On a line of its own, before the one that scripts read the address from (its last word).
  if (!shardPorts.empty()) std::printf("ingrid-node: shard ports %s\n", shardPorts.c_str());
  std::printf("ingrid-node: member %llu listening on %s\n",
              static_cast<unsigned long long>(node.memberId()), node.listenAddress().c_str());
  std::fflush(stdout);

  asio::io_context signals;
  asio::signal_set set(signals, SIGINT, SIGTERM);
  int received = 0;
  set.async_wait([&](std::error_code, int sig) { received = sig; });
  signals.run();
  if (level >= kInfo) {
    std::printf("ingrid-node: signal %d, leaving the cluster\n", received);
    std::fflush(stdout);
  }
  node.stop();  // the probes answer meanwhile: /readyz 503 "leaving"
  probes.stop();
  if (level >= kInfo) std::printf("ingrid-node: stopped\n");
  return 0;
}
