// ingrid-node: a standalone ingrid member, for a separate tier and for multi-process tests.
//
// Prints "ingrid-node: member ID listening on HOST:PORT" once started and one line per topology
// change (stdout), the node's log lines at --log-level and above (stderr, "ingrid: ..."), and
// leaves the cluster gracefully on SIGINT or SIGTERM. SIGHUP reloads the --rls-config file (a bad
// one is reported on stderr and the old configuration kept). Options are parsed by CLI11; each
// can also come from the environment variable INGRID_<OPTION_IN_UPPER_SNAKE> (for containers),
// and the command line wins over the environment. A refused option exits with 2.
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/node.h>

#include "cluster/build_info.h"
#include "cluster/probe_server.h"
#include "cluster/resp/resp_server.h"
#include "cluster/transport/cli_options.h"
#ifdef INGRID_HTTP_GATEWAY
#include "cluster/http_gateway/http_gateway.h"
#endif
#ifdef INGRID_RLS_GATEWAY
#include "cluster/rls_gateway/rls_gateway.h"
#endif

namespace {

enum Level { kError, kWarn, kInfo, kDebug };

using ingrid::cli::oneOf;
using ingrid::cli::secretFileInto;
using ingrid::cli::wholeIn;

// "--failure-timeout-ms" -> "INGRID_FAILURE_TIMEOUT_MS".
std::string envNameOf(const std::string& option) {
  std::string env = "INGRID_";
  for (const char c : option.substr(option.find_first_not_of('-'))) {
    env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return env;
}

// Whether `option` appears on the command line (as "--name" or "--name=VALUE").
bool onCommandLine(const std::string& option, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == option || arg.rfind(option + "=", 0) == 0) return true;
  }
  return false;
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

// The gateways' addresses and options (ingrid-node --resp ...).
struct Gateways {
  std::string resp;
  ingrid::RespOptions respOptions;
#ifdef INGRID_HTTP_GATEWAY
  std::string http;
  ingrid::HttpGatewayOptions httpOptions;
#endif
#ifdef INGRID_RLS_GATEWAY
  std::string rls;
  ingrid::RlsGatewayOptions rlsOptions;
#endif
};

// Every option of ingrid-node on `app`, writing `o`, `level`, `metrics` and `gw`; each also read
// from its INGRID_* environment variable.
void addOptions(CLI::App& app, ingrid::NodeOptions& o, std::string& level, std::string& metrics,
                Gateways& gw) {
  auto ms = [](std::chrono::milliseconds& d) {
    return [&d](const long long& n) { d = std::chrono::milliseconds(n); };
  };
  app.add_option("--listen", o.listenAddress,
                 "address to listen on for members and clients; port 0 picks a free\n"
                 "port (printed on start). Default: 127.0.0.1:0")
      ->type_name("HOST:PORT");
  app.add_option("--advertise", o.advertiseAddress,
                 "address the others reach this member at (needed with a wildcard\n"
                 "--listen such as 0.0.0.0:7400); port 0 = the port listened on.\n"
                 "Default: the --listen address")
      ->type_name("HOST:PORT");
  app.add_option("--seed", o.seeds,
                 "a member to join through; repeat for several (in the environment:\n"
                 "comma-separated). None: start a new cluster")
      ->type_name("HOST:PORT")
      ->allow_extra_args(false)  // one per --seed: a stray word is refused, not taken as a seed
      ->delimiter(',');
  app.add_option_function<std::string>(
         "--seed-dns",
         [&o](const std::string& v) {
           const auto colon = v.rfind(':');
           o.seedProvider = ingrid::dnsSeeds(
               v.substr(0, colon), static_cast<std::uint16_t>(std::stoi(v.substr(colon + 1))));
         },
         "more seeds: every address NAME resolves to (A and AAAA records,\n"
         "asked again at each round of join attempts), each with PORT; for a\n"
         "Kubernetes headless service. Tried after --seed. Default: none")
      ->type_name("NAME:PORT")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const auto colon = v.rfind(':');
            if (colon == std::string::npos || colon == 0) return "'" + v + "' is not NAME:PORT";
            std::string port = v.substr(colon + 1);
            const std::string why = wholeIn(1, 65535)(port);
            return why.empty() ? why : "'" + v + "': the port " + why;
          },
          "NAME:PORT"));
  app.add_option("--bootstrap-expect", o.bootstrapExpect,
                 "with --seed-dns: start a new cluster when this many nodes (itself\n"
                 "included) answer in one round, none in a cluster, and this one's\n"
                 "advertised address is the smallest; give every node started together\n"
                 "their number. 0: only join. Default: 0")
      ->type_name("N")
      ->check(wholeIn(0, 1000));
  app.add_option("--partitions", o.partitions,
                 "partitions of the key space; must match the cluster. Default: 1024")
      ->type_name("N")
      ->check(wholeIn(1, 1 << 20));
  app.add_option("--backups", o.backups,
                 "backups per partition (the first member's value wins). Default: 1")
      ->type_name("N")
      ->check(wholeIn(0, 8));
  app.add_option("--voters", o.voters,
                 "members that vote in the control plane at most (the others are\n"
                 "spares): 3 survive 1 loss, 5 survive 2, 7 survive 3.\n"
                 "Default: 5")
      ->type_name("N")
      ->check(oneOf({"1", "3", "5", "7"}));
  app.add_option("--zone", o.zone,
                 "this member's failure domain (rack, availability zone, host): a\n"
                 "partition's backups and the voters are spread over distinct\n"
                 "zones. Default: none")
      ->type_name("NAME");
  app.add_option("--data-dir", o.dataDir,
                 "a directory of this node's own for its control plane's Raft state:\n"
                 "restarted with it (at the same address), a voter keeps its vote,\n"
                 "so voters killed together heal the quorum when they come back.\n"
                 "Buckets stay in memory. Default: none (Raft state in memory)")
      ->type_name("DIR");
  app.add_option("--workers", o.workerThreads,
                 "partition worker threads; 0 = one per core. Default: 0")
      ->type_name("N")
      ->check(wholeIn(0, 256));
  app.add_flag("--single-thread", o.partitionsOnNetworkThread,
               "run the partitions on the network thread (no worker threads): one\n"
               "thread reads, runs, replicates and answers. Best on one core");
  app.add_option("--shard-port-base", o.shardPortBase,
                 "worker i takes invocations and members' replication on port N + i\n"
                 "(its shard port); 0 = free ports, listed in the topology. Default: 0")
      ->type_name("N")
      ->check(wholeIn(0, 65535));
  app.add_flag_callback(
      "--no-shard-ports", [&o] { o.shardPorts = false; },
      "workers open no ports of their own: clients and replication use\nthe --listen port");
  app.add_option_function<long long>("--heartbeat-ms", ms(o.heartbeatInterval),
                                     "how often a heartbeat goes to the members this one "
                                     "watches (the 2 after it by id, and the leader). "
                                     "Default: 500")
      ->type_name("N")
      ->check(wholeIn(1, 3'600'000));
  app.add_option_function<long long>(
         "--failure-timeout-ms", ms(o.failureTimeout),
         "a member silent this long is declared failed and removed; its\n"
         "backups take over its partitions. Default: 3000")
      ->type_name("N")
      ->check(wholeIn(1, 3'600'000));
  app.add_option_function<long long>(
         "--lease-ms", ms(o.leaseDuration),
         "primary lease: a member cut off from the leader stops writing within\n"
         "N ms, and a failed member's partitions move only after its lease\n"
         "expired (N * 1.1 + 10 ms). Must be below the failure timeout.\n"
         "Default: failure timeout / 2")
      ->type_name("N")
      ->check(wholeIn(1, 3'600'000));
  app.add_option_function<long long>(
         "--election-timeout-ms", ms(o.electionTimeout),
         "the control plane elects a new leader after this much silence from\n"
         "the old one (randomized up to twice it). Default: lease / 5, so that\n"
         "a new leader renews the leases before they run out")
      ->type_name("N")
      ->check(wholeIn(1, 3'600'000));
  app.add_option_function<long long>(
         "--dedup-window-ms", ms(o.dedupWindow),
         "how long a request's exactly-once record outlives it: a retry within\n"
         "it is answered, never run twice; clients cap their deadlines to half\n"
         "of it. Every member needs the same one. At least 1000. Default: 60000")
      ->type_name("N")
      ->check(wholeIn(1, 86'400'000));
  app.add_option_function<long long>(
         "--request-timeout-ms", ms(o.requestTimeout),
         "deadline of this member's own calls (at most half the dedup window).\n"
         "Default: 5000, or half the dedup window if that is shorter")
      ->type_name("N")
      ->check(wholeIn(1, 3'600'000));
  app.add_option("--min-members", o.minMembers,
                 "refuse writes while this member sees fewer than N members\n"
                 "(split-brain protection; use a majority). Default: 0 (off)")
      ->type_name("N")
      ->check(wholeIn(0, 1024));
  app.add_option("--min-insync", o.minInSyncReplicas,
                 "copies (primary and complete backups) that must hold a write for it\n"
                 "to be acknowledged; fewer: refused, nothing changed. From 1 to\n"
                 "backups + 1. Default: 1")
      ->type_name("N")
      ->check(wholeIn(1, 9));
  // A secret file is read as it is parsed: one that cannot be read is refused like a bad number.
  auto secret = [](const char* name, std::string& out) { return secretFileInto(name, out); };
  app.add_option_function<std::string>(
         "--cluster-secret-file", secret("--cluster-secret-file", o.clusterSecret),
         "the cluster secret, read from PATH (one line; a trailing newline is\n"
         "dropped): members prove it to each other before any control or\n"
         "replication message, and a joining node in its Join. Every member\n"
         "needs the same one. Default: none (members not authenticated)")
      ->type_name("PATH");
  app.add_option_function<std::string>(
         "--client-secret-file", secret("--client-secret-file", o.clientSecret),
         "the client secret, read from PATH as the cluster secret is: clients\n"
         "must prove it before their first request (ingrid-cli\n"
         "--client-secret-file). Needs --cluster-secret-file. Default: none")
      ->type_name("PATH");
  app.add_option("--tls-ca", o.tls.caFile,
                 "PEM file of the CA that members' certificates chain to: turns TLS on for\n"
                 "every connection (members and clients); needs --tls-cert and --tls-key.\n"
                 "Members verify each other's certificates against it (mutual TLS).\n"
                 "Default: none (plain TCP)")
      ->type_name("PATH");
  app.add_option("--tls-cert", o.tls.certificateChainFile,
                 "PEM file: this member's certificate, then any intermediates")
      ->type_name("PATH");
  app.add_option("--tls-key", o.tls.privateKeyFile,
                 "PEM file: that certificate's private key (unencrypted)")
      ->type_name("PATH");
  app.add_option("--metrics", metrics,
                 "serve /metrics (Prometheus), /livez, /readyz and /cluster-safe over\n"
                 "HTTP there (docs/operations.md); port 0 picks a free port (printed\n"
                 "on start). Default: none")
      ->type_name("HOST:PORT");
  app.add_option("--resp", gw.resp,
                 "serve Redis's protocol (RESP2) there: CL.THROTTLE as redis-cell\n"
                 "answers it, PING, HELLO, ... (docs/operations.md); port 0 picks a\n"
                 "free port (printed on start). Default: none")
      ->type_name("HOST:PORT");
  app.add_option("--resp-max-connections", gw.respOptions.maxConnections,
                 "RESP connections open at once; one more is answered \"-ERR max number\n"
                 "of clients reached\" and closed. Default: 1024")
      ->type_name("N")
      ->check(wholeIn(1, 1'000'000));
  app.add_option_function<long long>(
         "--resp-idle-timeout-ms",
         [&gw](long long v) { gw.respOptions.idleTimeout = std::chrono::milliseconds(v); },
         "close a RESP connection after N ms without a command (none of its\n"
         "own pending). 0 = never. Default: 600000")
      ->type_name("N")
      ->check(wholeIn(0, 86'400'000));
  app.add_option("--resp-max-command-bytes", gw.respOptions.limits.maxCommand,
                 "bytes of one RESP command as sent (all its arguments and headers);\n"
                 "a longer one is a protocol error that closes its connection.\n"
                 "Default: 1048576")
      ->type_name("N")
      ->check(wholeIn(1024, 1LL << 30));
#ifdef INGRID_HTTP_GATEWAY
  app.add_option("--http", gw.http,
                 "serve gubernator's HTTP/JSON API there: POST /v1/GetRateLimits\n"
                 "(docs/gateways.md); port 0 picks a free port (printed on start).\n"
                 "Default: none")
      ->type_name("HOST:PORT");
  app.add_option("--http-threads", gw.httpOptions.threads,
                 "HTTP connections served at once (each kept-alive connection holds\n"
                 "a thread; more wait). Default: 16")
      ->type_name("N")
      ->check(wholeIn(1, 4096));
  app.add_option("--http-max-body-bytes", gw.httpOptions.maxBodyBytes,
                 "bytes of one HTTP request body; a longer one is answered 413.\n"
                 "Default: 1048576")
      ->type_name("N")
      ->check(wholeIn(1024, 1LL << 30));
  app.add_option_function<long long>(
         "--http-idle-timeout-ms",
         [&gw](long long v) { gw.httpOptions.idleTimeout = std::chrono::milliseconds(v); },
         "close an HTTP connection idle this long, or whose request does not\n"
         "arrive within it (whole seconds, at least 1). Default: 60000")
      ->type_name("N")
      ->check(wholeIn(1000, 86'400'000));
#endif
#ifdef INGRID_RLS_GATEWAY
  app.add_option("--rls", gw.rls,
                 "serve Envoy's Rate Limit Service v3 (gRPC ShouldRateLimit) there,\n"
                 "with the limits of --rls-config (docs/gateways.md); port 0 picks a\n"
                 "free port (printed on start). Default: none")
      ->type_name("HOST:PORT");
  app.add_option("--rls-config", gw.rlsOptions.configFile,
                 "the RLS descriptor limits, in envoyproxy/ratelimit's YAML shape;\n"
                 "SIGHUP reloads it (a bad file keeps the old). Needed with --rls")
      ->type_name("PATH");
  app.add_option("--rls-max-in-flight", gw.rlsOptions.maxInFlight,
                 "RLS calls in progress at once; one more is answered\n"
                 "RESOURCE_EXHAUSTED. Default: 4096")
      ->type_name("N")
      ->check(wholeIn(1, 1'000'000));
  app.add_option("--rls-max-message-bytes", gw.rlsOptions.maxMessageBytes,
                 "bytes of one RLS request message; a longer one is refused\n"
                 "RESOURCE_EXHAUSTED. Default: 1048576")
      ->type_name("N")
      ->check(wholeIn(1024, 1LL << 30));
  app.add_option("--rls-max-concurrent-streams", gw.rlsOptions.maxConcurrentStreams,
                 "RLS calls at once on one HTTP/2 connection. Default: 100")
      ->type_name("N")
      ->check(wholeIn(1, 1'000'000));
#endif
  app.add_option("--max-connections", o.maxConnections,
                 "connections accepted at once; one more is refused with an error\n"
                 "naming the limit. Default: 4096")
      ->type_name("N")
      ->check(wholeIn(1, 1'000'000));
  app.add_option("--max-buffered-bytes", o.maxBufferedBytes,
                 "bytes that clients' connections may hold at once in partly received\n"
                 "frames; a frame past it is refused (overloaded) and its connection\n"
                 "closed. 0 = no limit. Default: 67108864 (64 MiB)")
      ->type_name("N")
      ->check(wholeIn(0, 1LL << 40));
  app.add_option_function<long long>(
         "--idle-timeout-ms", ms(o.idleTimeout),
         "close a client's connection after N ms without a request (members'\n"
         "links are exempt; the client redials). 0 = never. Default: 600000")
      ->type_name("N")
      ->check(wholeIn(0, 86'400'000));
  app.add_option("--log-level", level, "what to log: error, warn, info or debug. Default: info")
      ->type_name("LEVEL")
      ->check(oneOf({"error", "warn", "info", "debug"}));
  for (CLI::Option* opt : app.get_options()) {
    if (opt != app.get_help_ptr() && opt != app.get_version_ptr()) {
      opt->envname(envNameOf(opt->get_name()));
    }
  }
}

// Parses the command line and the environment into `o`, `level`, `metrics` and `gw`. Returns
// nothing to go on, or the exit status: 0 after --help or --version, 2 after a refusal (printed to
// stderr, naming the option and what it takes).
std::optional<int> parse(int argc, char** argv, ingrid::NodeOptions& o, std::string& level,
                         std::string& metrics, Gateways& gw) {
  CLI::App app(
      "Runs one ingrid member until SIGINT or SIGTERM, then leaves the cluster "
      "gracefully.",
      "ingrid-node");
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version",
                       std::string("ingrid-node ") + ingrid::buildVersion() + " (commit " +
                           ingrid::buildCommit() + ")",
                       "print the version and exit");
  app.footer(
      "Every option can also come from the environment: --NAME-OF-IT from INGRID_NAME_OF_IT\n"
      "(for example --failure-timeout-ms from INGRID_FAILURE_TIMEOUT_MS, a flag from =1 or =0,\n"
      "seeds comma-separated); an option on the command line wins over the environment.");
  addOptions(app, o, level, metrics, gw);
  // A refusal names the option, what it takes, and where the value came from when that was not
  // the command line.
  app.failure_message([argc, argv](const CLI::App* a, const CLI::Error& e) {
    std::string message = e.what();
    for (const CLI::Option* opt : a->get_options()) {
      const std::string& env = opt->get_envname();
      if (!env.empty() && message.rfind(opt->get_name() + ":", 0) == 0 &&
          std::getenv(env.c_str()) != nullptr && !onCommandLine(opt->get_name(), argc, argv)) {
        message += " (from " + env + ")";
      }
    }
    return "ingrid-node: " + message + "\nRun with --help for the options.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
#ifdef INGRID_RLS_GATEWAY
  if (!gw.rls.empty() && gw.rlsOptions.configFile.empty()) {
    std::fprintf(stderr,
                 "ingrid-node: --rls needs --rls-config\nRun with --help for the options.\n");
    return 2;
  }
#endif
  if (app.get_option("--request-timeout-ms")->count() == 0) {
    o.requestTimeout = std::min(o.requestTimeout, o.dedupWindow / 2);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  ingrid::NodeOptions options;
  options.listenAddress = "127.0.0.1:0";
  std::string levelName = "info";
  std::string metricsAddress;
  Gateways gateways;
  if (auto exitStatus = parse(argc, argv, options, levelName, metricsAddress, gateways)) {
    return *exitStatus;
  }
  const std::map<std::string, Level> levels{
      {"error", kError}, {"warn", kWarn}, {"info", kInfo}, {"debug", kDebug}};
  const Level level = levels.at(levelName);
  // The library logs to its sink only: this program's sink prints each line it is given on stderr,
  // one call per line (lines from the node's threads do not interleave).
  constexpr ingrid::LogLevel kLogLevels[] = {ingrid::LogLevel::kError, ingrid::LogLevel::kWarn,
                                             ingrid::LogLevel::kInfo, ingrid::LogLevel::kDebug};
  options.logLevel = kLogLevels[level];
  options.logSink = [](const ingrid::LogLine& r) {
    std::fprintf(stderr, "%s\n", ingrid::formatLogLine(r).c_str());
  };
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
  const std::string& respAddress = gateways.resp;
  ingrid::RespServer resp(node, gateways.respOptions);
  if (!respAddress.empty()) probes.appendMetrics([&resp] { return resp.metricsText(); });
#ifdef INGRID_HTTP_GATEWAY
  ingrid::HttpGateway http(node, gateways.httpOptions);
  if (!gateways.http.empty()) probes.appendMetrics([&http] { return http.metricsText(); });
#endif
#ifdef INGRID_RLS_GATEWAY
  ingrid::RlsGateway rls(node, gateways.rlsOptions);
  if (!gateways.rls.empty()) probes.appendMetrics([&rls] { return rls.metricsText(); });
#endif
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
  if (!respAddress.empty()) {
    const auto port = resp.start(respAddress);
    if (!port) {
      std::fprintf(stderr, "ingrid-node: --resp: %s\n", port.error().message().c_str());
      probes.stop();
      node.stop();
      return 2;
    }
    std::printf("ingrid-node: RESP on %s:%u\n",
                respAddress.substr(0, respAddress.rfind(':')).c_str(), unsigned{*port});
  }
#ifdef INGRID_HTTP_GATEWAY
  if (!gateways.http.empty()) {
    const auto port = http.start(gateways.http);
    if (!port) {
      std::fprintf(stderr, "ingrid-node: --http: %s\n", port.error().message().c_str());
      resp.stop();
      probes.stop();
      node.stop();
      return 2;
    }
    std::printf("ingrid-node: HTTP on %s:%u\n",
                gateways.http.substr(0, gateways.http.rfind(':')).c_str(), unsigned{*port});
  }
#endif
#ifdef INGRID_RLS_GATEWAY
  if (!gateways.rls.empty()) {
    const auto port = rls.start(gateways.rls);
    if (!port) {
      std::fprintf(stderr, "ingrid-node: --rls: %s\n", port.error().message().c_str());
#ifdef INGRID_HTTP_GATEWAY
      http.stop();
#endif
      resp.stop();
      probes.stop();
      node.stop();
      return 2;
    }
    std::printf("ingrid-node: RLS on %s:%u\n",
                gateways.rls.substr(0, gateways.rls.rfind(':')).c_str(), unsigned{*port});
  }
#endif
  // Registered before the "listening on" line, which scripts and tests wait for before they
  // signal: SIGHUP must not find its default action (ending the process).
  asio::io_context signals;
  asio::signal_set set(signals, SIGINT, SIGTERM, SIGHUP);
  int received = 0;
  // SIGHUP reloads the RLS configuration and waits again; SIGINT and SIGTERM end the wait.
  std::function<void(std::error_code, int)> onSignal = [&](std::error_code ec, int sig) {
    if (ec) return;
    if (sig != SIGHUP) {
      received = sig;
      return;
    }
#ifdef INGRID_RLS_GATEWAY
    if (!gateways.rls.empty()) {
      const std::string& file = gateways.rlsOptions.configFile;
      if (auto rules = rls.reload()) {
        std::printf("ingrid-node: SIGHUP: RLS config reloaded from %s (%zu descriptors)\n",
                    file.c_str(), *rules);
      } else {
        std::fprintf(stderr, "ingrid-node: SIGHUP: RLS config not reloaded, keeping the old: %s\n",
                     rules.error().message().c_str());
        std::printf("ingrid-node: SIGHUP: RLS config kept (reload of %s failed)\n", file.c_str());
      }
      std::fflush(stdout);
    }
#endif
    set.async_wait(onSignal);
  };
  set.async_wait(onSignal);
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

  signals.run();
  if (level >= kInfo) {
    std::printf("ingrid-node: signal %d, leaving the cluster\n", received);
    std::fflush(stdout);
  }
  // The gateways first, while the node still answers what they have in flight (RLS: GOAWAY, so
  // Envoy moves to other hosts, and the calls in progress are answered). Then the node leaves
  // (the probes answer meanwhile: /readyz 503 "leaving"), then the probes.
  resp.stop();
#ifdef INGRID_HTTP_GATEWAY
  http.stop();
#endif
#ifdef INGRID_RLS_GATEWAY
  rls.stop();
#endif
  node.stop();
  probes.stop();
  if (level >= kInfo) std::printf("ingrid-node: stopped\n");
  return 0;
}
