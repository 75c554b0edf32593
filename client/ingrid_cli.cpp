// ingrid-cli: look at and exercise an ingrid cluster through the thin client. This file wires the
// command line (CLI11: one subcommand per command, each refusal naming the option and what it
// takes, exit status 2) to the commands; the status printer is cli_status.cpp, the load
// generator cli_load.cpp, the reading of answers and states cli_answers.cpp, top cli_top.cpp.
//
//   ingrid-cli status  --seed HOST:PORT [--json]
//   ingrid-cli wait cluster-safe --seed HOST:PORT [--timeout-ms N]
//   ingrid-cli top --metrics HOST:PORT[,HOST:PORT...] [--iterations N]   (or --metrics again)
//   ingrid-cli acquire KEY N --seed HOST:PORT [limiter options]
//   ingrid-cli inspect KEY --seed HOST:PORT [--limiter NAME]   (alias: get)
//   ingrid-cli release KEY LEASE --seed HOST:PORT
//   ingrid-cli extend  KEY LEASE --seed HOST:PORT [--period-ms TTL]
//   ingrid-cli load --seed HOST:PORT [load options]
//   ingrid-cli recover --seed HOST:PORT [--yes] [--force] [--json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/limiter_request.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/get_entry.h>

#include "client/cli_answers.h"
#include "client/cli_load.h"
#include "client/cli_recover.h"
#include "client/cli_status.h"
#include "client/cli_top.h"
#include "cluster/build_info.h"
#include "cluster/transport/cli_options.h"

namespace {

using ingrid::cli::kLimiterNames;
using ingrid::cli::Limiter;
using ingrid::cli::oneOf;
using ingrid::cli::wholeIn;

constexpr long long kMaxMs = INT64_MAX / 1'000'000;  // milliseconds that fit in Nanos

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "ingrid-cli: %s\n", message.c_str());
  std::exit(2);
}

// CAPACITY/PERIOD_MS of a composite bucket's band, both whole numbers in their ranges.
CLI::Validator band() {
  const auto capacity = wholeIn(1, INT64_MAX);
  const auto period = wholeIn(1, kMaxMs);
  return CLI::Validator(
      [capacity, period](std::string& text) -> std::string {
        const auto slash = text.find('/');
        if (slash == std::string::npos) return "'" + text + "' is not CAPACITY/PERIOD_MS";
        std::string c = text.substr(0, slash), p = text.substr(slash + 1);
        if (auto e = capacity(c); !e.empty()) return text + ": CAPACITY " + e;
        if (auto e = period(p); !e.empty()) return text + ": PERIOD_MS " + e;
        return {};
      },
      "");
}

// What the command line says (CLI11 writes it), and which subcommand it chose.
struct Flags {
  const CLI::App* command = nullptr;  // the subcommand parsed
  // Connection.
  std::vector<std::string> seeds;
  long long timeoutMs = 5000;  // wait cluster-safe: 60000 unless given
  std::string clientSecret;    // read from --client-secret-file
  std::string tlsCa, tlsCert, tlsKey;
  // Positionals.
  std::string key, condition;
  long long units = 0, lease = 0;
  // Limiter options.
  std::string limiter = "token-bucket";
  long long capacity = 100, periodMs = 1000, refill = 0, initial = 0, maxWaitMs = 0, warmupMs = 0,
            coldFactor = 3, configVersion = 0;
  std::vector<std::string> bands;
  std::string replacement = "proportional";
  // status, top, load.
  bool json = false;
  std::vector<std::string> metrics;
  long long iterations = 0;
  ingrid::cli::LoadOptions load;
  std::string batching = "off";
  ingrid::cli::RecoverOptions recover;

  // Whether --`name` was given to the command.
  bool has(const std::string& name) const {
    const CLI::Option* o = command ? command->get_option_no_throw("--" + name) : nullptr;
    return o != nullptr && o->count() > 0;
  }
  Limiter limiterKind() const {
    const auto* it = std::find(std::begin(kLimiterNames), std::end(kLimiterNames), limiter);
    return static_cast<Limiter>(it - std::begin(kLimiterNames));
  }
  std::int64_t rate() const { return has("refill") ? refill : capacity; }
  ingrid::Nanos period() const { return periodMs * 1'000'000; }
};

// --seed, --timeout-ms (default `timeoutMs`, at most `maxTimeoutMs`), the secret and TLS files.
void addConnection(CLI::App* c, Flags& f, long long timeoutMs, long long maxTimeoutMs) {
  // One value per occurrence (repeat it, or list several with commas): a vector option would
  // otherwise take every word after it, the command's KEY and N too.
  c->add_option("--seed", f.seeds,
                "a member to reach the cluster through (repeat for several, or\n"
                "separate them with commas)")
      ->type_name("HOST:PORT")
      ->required()
      ->allow_extra_args(false)
      ->delimiter(',');
  c->add_option("--timeout-ms", f.timeoutMs,
                "deadline of each request. Default: " + std::to_string(timeoutMs))
      ->type_name("N")
      ->check(wholeIn(1, maxTimeoutMs));
  c->add_option_function<std::string>(
       "--client-secret-file", ingrid::cli::secretFileInto("--client-secret-file", f.clientSecret),
       "the client secret, read from PATH (one line; a trailing newline is\n"
       "dropped), for members that require clients to prove it")
      ->type_name("PATH");
  c->add_option("--tls-ca", f.tlsCa,
                "PEM file of the cluster's CA: talk TLS to the members and verify\n"
                "their certificates against it (for members started with --tls-ca)")
      ->type_name("PATH");
  c->add_option("--tls-cert", f.tlsCert, "a client certificate (optional; members do not ask)")
      ->type_name("PATH");
  c->add_option("--tls-key", f.tlsKey, "the client certificate's key")->type_name("PATH");
}

// --limiter and the options of the limiters (acquire, load).
void addLimiterOptions(CLI::App* c, Flags& f) {
  c->add_option("--limiter", f.limiter, "the limiter. Default: token-bucket")
      ->type_name("NAME")
      ->check(oneOf({std::begin(kLimiterNames), std::end(kLimiterNames)}));
  auto* capacity =
      c->add_option("--capacity", f.capacity,
                    "the limit: bucket capacity (token-bucket, leaky-meter), burst (gcra),\n"
                    "units per window (fixed-window, sliding-log: at most 4096,\n"
                    "sliding-window), queue size (leaky-shaper), units held at once\n"
                    "(concurrency: at most 4096). Default: 100")
          ->type_name("N")
          ->check(wholeIn(1, INT64_MAX));
  auto* period = c->add_option("--period-ms", f.periodMs,
                               "the period in milliseconds: of the refill, leak or drain, or the\n"
                               "window; a lease's time to live (concurrency). Default: 1000")
                     ->type_name("N")
                     ->check(wholeIn(1, kMaxMs));
  auto* refill = c->add_option("--refill", f.refill,
                               "units refilled, leaked or drained per period (token-bucket, "
                               "gcra,\nleaky-meter, leaky-shaper, composite). Default: capacity")
                     ->type_name("N")
                     ->check(wholeIn(1, INT64_MAX));
  auto* warmup = c->add_option("--warmup-ms", f.warmupMs,
                               "warm-up (token-bucket only; docs/warm-up.md, Guava's\n"
                               "SmoothWarmingUp): pace the units at --refill per --period-ms, up\n"
                               "to --cold-factor times slower after an idle period, coming down\n"
                               "to that rate over N ms of use. No burst: --capacity is unused.\n"
                               "With --max-wait-ms, go if the turn comes within it")
                     ->type_name("N")
                     ->check(wholeIn(1, kMaxMs));
  c->add_option("--initial", f.initial,
                "tokens of a new bucket, at most --capacity (token-bucket only).\n"
                "Default: capacity")
      ->type_name("N")
      ->check(wholeIn(0, INT64_MAX))
      ->excludes(warmup);
  c->add_option("--max-wait-ms", f.maxWaitMs,
                "reserve instead (token-bucket only; docs/token-bucket.md\n"
                "\"Reservations\"): take the units now if they exist within N ms,\n"
                "and print the delay before they are the caller's")
      ->type_name("N")
      ->check(wholeIn(0, kMaxMs));
  c->add_option("--cold-factor", f.coldFactor,
                "how much slower a cold permit is (with --warmup-ms). Default: 3")
      ->type_name("N")
      ->check(wholeIn(1, ingrid::WarmupParams::kMaxColdFactor))
      ->needs(warmup);
  c->add_option("--band", f.bands,
                "a bandwidth of the composite bucket (--limiter composite;\n"
                "docs/composite-bucket.md): CAPACITY units refilled over PERIOD_MS.\n"
                "Repeat for up to 8; a request takes from all or none; each band\n"
                "names its own capacity and period. Default: one band, --capacity\n"
                "per --period-ms")
      ->type_name("CAPACITY/PERIOD_MS")
      ->allow_extra_args(false)  // one band per --band: KEY and N stay positionals
      ->check(band())
      ->excludes(capacity)
      ->excludes(period)
      ->excludes(refill);
  c->add_option("--config-version", f.configVersion,
                "the composite bucket's configuration version: a higher one\n"
                "replaces the stored configuration. Default: 0")
      ->type_name("N")
      ->check(wholeIn(0, INT64_MAX));
  c->add_option("--replacement", f.replacement,
                "what a newer configuration does with the tokens already there\n"
                "(composite). Default: proportional")
      ->type_name("RULE")
      ->check(oneOf({"as-is", "proportional", "reset"}));
}

// Refuses the limiter options that do not apply to --limiter (or to each other).
void checkLimiterOptions(const Flags& f) {
  const Limiter limiter = f.limiterKind();
  const std::string& name = f.limiter;
  for (const char* option : {"initial", "max-wait-ms", "warmup-ms", "cold-factor"}) {
    if (f.has(option) && limiter != Limiter::kTokenBucket) {
      throw CLI::ValidationError("--" + std::string(option),
                                 "applies only to --limiter token-bucket, not " + name);
    }
  }
  for (const char* option : {"band", "config-version", "replacement"}) {
    if (f.has(option) && limiter != Limiter::kComposite) {
      throw CLI::ValidationError("--" + std::string(option),
                                 "applies only to --limiter composite, not " + name);
    }
  }
  const bool hasRate = limiter == Limiter::kTokenBucket || limiter == Limiter::kGcra ||
                       limiter == Limiter::kLeakyMeter || limiter == Limiter::kLeakyShaper ||
                       limiter == Limiter::kComposite;
  if (f.has("refill") && !hasRate) {
    throw CLI::ValidationError("--refill", "does not apply to --limiter " + name +
                                               (limiter == Limiter::kConcurrency
                                                    ? " (its lease time to live is --period-ms)"
                                                    : " (its window is --period-ms)"));
  }
  if ((limiter == Limiter::kSlidingLog || limiter == Limiter::kConcurrency) &&
      f.capacity > ingrid::SlidingLogParams::kMaxLimit) {
    static_assert(ingrid::SlidingLogParams::kMaxLimit == ingrid::ConcurrencyParams::kMaxLimit);
    throw CLI::ValidationError("--capacity",
                               std::to_string(f.capacity) + " is not in [1, " +
                                   std::to_string(ingrid::SlidingLogParams::kMaxLimit) +
                                   "] (the most --limiter " + name + " holds)");
  }
  if (f.has("initial") && f.initial > f.capacity) {
    throw CLI::ValidationError("--initial", std::to_string(f.initial) + " is not in [0, " +
                                                std::to_string(f.capacity) + "] (the capacity)");
  }
  if (f.bands.size() > ingrid::CompositeParams::kMaxBandwidths) {
    throw CLI::ValidationError(
        "--band", "at most " + std::to_string(ingrid::CompositeParams::kMaxBandwidths) +
                      " bands, got " + std::to_string(f.bands.size()));
  }
}

// The limiter --limiter names with its options (include/ingrid/limiter_request.h).
ingrid::LimiterSpec specOf(const Flags& f) {
  ingrid::LimiterSpec s;
  s.kind = f.limiterKind();
  s.capacity = f.capacity;
  s.period = f.period();
  if (f.has("refill")) s.refill = f.refill;
  if (f.has("initial")) s.initial = f.initial;
  if (f.has("warmup-ms")) s.warmup = f.warmupMs * 1'000'000;
  s.coldFactor = f.coldFactor;
  if (f.has("max-wait-ms")) s.maxWait = f.maxWaitMs * 1'000'000;
  for (const std::string& b : f.bands) {  // checked by band(): two whole numbers
    const auto slash = b.find('/');
    s.bands.push_back(ingrid::BucketParams::perPeriod(std::stoll(b.substr(0, slash)),
                                                      std::stoll(b.substr(slash + 1)) * 1'000'000));
  }
  s.configVersion = f.configVersion;
  s.replacement = f.replacement == "as-is"   ? ingrid::Replacement::kAsIs
                  : f.replacement == "reset" ? ingrid::Replacement::kReset
                                             : ingrid::Replacement::kProportional;
  return s;
}

// Calls fn with the request for `units` on the limiter --limiter names; returns what fn returns.
// Throws CLI::ValidationError if the limiter would refuse its parameters: nothing is sent.
template <class F>
int withRequest(const Flags& f, std::int64_t units, F&& fn) {
  auto request = ingrid::limiterRequest(specOf(f), units);
  if (!request) {
    throw CLI::ValidationError("--limiter " + f.limiter,
                               "the options are invalid: " + request.error().detail());
  }
  return std::visit(std::forward<F>(fn), *request);
}

// A started client for `f`'s seeds and options, or why it could not start.
ingrid::Result<std::unique_ptr<ingrid::Client>> tryConnect(const Flags& f) {
  ingrid::ClientOptions o;
  o.seeds = f.seeds;
  o.requestTimeout = std::chrono::milliseconds(f.timeoutMs);
  o.connectTimeout = o.requestTimeout;
  o.clientSecret = f.clientSecret;
  o.tls.caFile = f.tlsCa;
  o.tls.certificateChainFile = f.tlsCert;
  o.tls.privateKeyFile = f.tlsKey;
  auto client = std::make_unique<ingrid::Client>(o);
  if (auto started = client->start(); !started) return started.error();
  return client;
}

std::unique_ptr<ingrid::Client> connect(const Flags& f) {
  auto client = tryConnect(f);
  if (!client) fail(client.error().message());
  return std::move(*client);
}

int status(const Flags& f) {
  auto client = connect(f);
  const ingrid::cli::ClusterView v = ingrid::cli::gatherStatus(*client);
  if (f.json) {
    ingrid::cli::printStatusJson(v);
  } else {
    ingrid::cli::printStatusText(v);
  }
  return v.problems.empty() ? 0 : 3;
}

// wait cluster-safe: polls the cluster's status (a fresh client each time, so a restarted seed or
// a new topology is learnt) until it is healthy, within --timeout-ms.
int waitFor(const Flags& f) {
  const long long timeoutMs = f.has("timeout-ms") ? f.timeoutMs : 60000;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  std::string last = "no status yet";
  Flags once = f;
  once.timeoutMs = 2000;  // each status request's deadline
  for (int round = 0; std::chrono::steady_clock::now() < until && round < 1'000'000; ++round) {
    auto client = tryConnect(once);
    if (!client) {
      last = client.error().message();
    } else {
      const ingrid::cli::ClusterView v = ingrid::cli::gatherStatus(**client);
      if (v.problems.empty()) {
        std::printf("cluster-safe: topology v%llu, %zu members, every replica complete\n",
                    static_cast<unsigned long long>(v.topology->version),
                    v.topology->members.size());
        return 0;
      }
      last = v.problems.front();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the polling interval
  }
  std::fprintf(stderr, "ingrid-cli: the cluster was not safe within %lld ms: %s\n", timeoutMs,
               last.c_str());
  return 1;
}

int recover(const Flags& f) {
  auto client = connect(f);
  return ingrid::cli::recover(*client, f.seeds, f.recover, std::chrono::milliseconds(f.timeoutMs));
}

int acquire(const Flags& f) {
  return withRequest(f, f.units, [&](const auto& request) {
    auto client = connect(f);
    auto r = client->invoke(f.key, request);
    if (!r) fail(r.error().message());
    std::printf("%s\n", ingrid::cli::describe(*r).c_str());
    return ingrid::cli::isGranted(*r) ? 0 : 1;
  });
}

// release KEY LEASE, extend KEY LEASE: a concurrency lease's end or extension.
int leaseCommand(const Flags& f, bool isRelease) {
  auto client = connect(f);
  auto r = isRelease ? client->invoke(f.key, ingrid::ConcurrencyRelease{f.lease})
                     : client->invoke(f.key, ingrid::ConcurrencyExtend{f.lease, f.period()});
  if (!r) fail(r.error().message());
  std::printf("%s\n", ingrid::cli::describe(*r).c_str());
  return r->granted ? 0 : 1;
}

int inspect(const Flags& f) {
  auto client = connect(f);
  auto r = client->invoke(f.key, ingrid::GetEntry{});
  if (!r) fail(r.error().message());
  const ingrid::TopologyPtr t = client->topology();
  const ingrid::PartitionId p = ingrid::partitionOf(f.key, t->table.partitionCount());
  std::string holders;
  for (ingrid::MemberId m : t->table.owners(p)) {
    const auto* info = t->member(m);
    holders += (holders.empty() ? "primary " : ", backup ") + std::to_string(m) + " (" +
               (info ? info->address : "?") + ")";
  }
  std::printf("key '%s': partition %u, held by %s\n", f.key.c_str(), p, holders.c_str());
  if (!r->exists) {
    std::printf("no entry (never used, or expired)\n");
    return 0;
  }
  std::printf("expires %s\n", r->expiresAt == ingrid::kNever
                                  ? "never"
                                  : ("at " + std::to_string(r->expiresAt) + " ns").c_str());
  if (f.has("limiter")) {
    return ingrid::cli::describeState(f.limiterKind(), f.has("warmup-ms"), r->value);
  }
  try {  // a token bucket?
    const auto s = ingrid::decode<ingrid::BucketState>(r->value);
    std::printf("token bucket: %lld tokens, remainder %lld, refilled up to %lld ns\n",
                static_cast<long long>(s.tokens), static_cast<long long>(s.remainder),
                static_cast<long long>(s.lastRefill));
    return 0;
  } catch (const std::exception&) {
  }
  try {  // a counter?
    std::printf("counter: %lld\n", static_cast<long long>(ingrid::decode<std::int64_t>(r->value)));
    return 0;
  } catch (const std::exception&) {
  }
  std::printf("%zu bytes of state\n", r->value.size());
  return 0;
}

int load(const Flags& f) {
  ingrid::cli::LoadOptions o = f.load;
  o.limiter = f.limiter;
  o.batching = f.batching == "on";
  return withRequest(f, 1, [&](const auto& request) {
    auto client = connect(f);
    return ingrid::cli::runLoad(*client, request, o);
  });
}

// Every subcommand and its options on `app`, writing `f`.
void addCommands(CLI::App& app, Flags& f) {
  auto* status =
      app.add_subcommand("status",
                         "members, topology, each member's view (term, leader, lease, fenced\n"
                         "partitions), replica health; exit status 3 if the cluster is degraded");
  addConnection(status, f, 5000, 3'600'000);
  status->add_flag("--json", f.json, "print it as one JSON object (docs/operations.md)");

  auto* wait =
      app.add_subcommand("wait",
                         "wait cluster-safe: wait until status is healthy (every member reachable\n"
                         "and leased, every replica complete, nothing migrating), within\n"
                         "--timeout-ms (each status request then waits at most 2 s); exit\n"
                         "status 1 if it was not");
  wait->add_option("CONDITION", f.condition, "what to wait for: cluster-safe")
      ->required()
      ->check(oneOf({"cluster-safe"}));
  addConnection(wait, f, 60000, 86'400'000);
  wait->get_option("--timeout-ms")->description("how long to wait. Default: 60000");

  auto* top =
      app.add_subcommand("top",
                         "a view of the cluster refreshed every second, read from each\n"
                         "member's metrics (ingrid-node --metrics): requests/s, denials/s,\n"
                         "p50 and p99, partitions, leader, lease");
  top->add_option("--metrics", f.metrics,
                  "a member's --metrics address (repeat for each, or separate them\n"
                  "with commas)")
      ->type_name("HOST:PORT")
      ->required()
      ->allow_extra_args(false)
      ->delimiter(',');
  top->add_option("--iterations", f.iterations,
                  "stop after N refreshes. Default: 0 (until interrupted)")
      ->type_name("N")
      ->check(wholeIn(0, 1'000'000));

  auto* acquire =
      app.add_subcommand("acquire",
                         "take N units from the limiter KEY; prints granted yes|no, then the\n"
                         "answer's fields; exit status 1 if refused. With --limiter\n"
                         "concurrency the answer names a lease, held for --period-ms");
  acquire->add_option("KEY", f.key, "the limiter's key")->required();
  acquire->add_option("N", f.units, "units to take")->required()->check(wholeIn(1, INT64_MAX));
  addConnection(acquire, f, 5000, 3'600'000);
  addLimiterOptions(acquire, f);

  auto* inspect =
      app.add_subcommand("inspect",
                         "the entry's state and the members that hold it; with --limiter,\n"
                         "the state is read as that limiter's");
  inspect->alias("get");
  inspect->add_option("KEY", f.key, "the entry's key")->required();
  addConnection(inspect, f, 5000, 3'600'000);
  inspect->add_option("--limiter", f.limiter, "read the state as this limiter's")
      ->type_name("NAME")
      ->check(oneOf({std::begin(kLimiterNames), std::end(kLimiterNames)}));
  inspect
      ->add_option("--warmup-ms", f.warmupMs,
                   "with --limiter token-bucket: the bucket is a warm-up limiter")
      ->type_name("N")
      ->check(wholeIn(1, kMaxMs));

  auto* recover = app.add_subcommand(
      "recover",
      "after a majority of the voters is lost: the members that answer form a new\n"
      "control plane from the newest topology they hold; prints what is lost,\n"
      "and acts only with --yes (docs/operations.md); exit status 1 if refused");
  addConnection(recover, f, 5000, 3'600'000);
  ingrid::cli::addRecoverOptions(recover, f.recover);

  auto* release = app.add_subcommand(
      "release", "release a concurrency lease; exit status 1 if it was not live");
  auto* extend =
      app.add_subcommand("extend",
                         "extend a live concurrency lease to --period-ms from now (never\n"
                         "shortens it); exit status 1 if it was not live");
  for (auto* lease : {release, extend}) {
    lease->add_option("KEY", f.key, "the concurrency limiter's key")->required();
    lease->add_option("LEASE", f.lease, "the lease's id, as acquire printed it")
        ->required()
        ->check(wholeIn(INT64_MIN, INT64_MAX));
    addConnection(lease, f, 5000, 3'600'000);
    lease->add_option("--limiter", f.limiter, "concurrency (the only one with leases)")
        ->type_name("NAME")
        ->check(oneOf({"concurrency"}));
  }
  extend->add_option("--period-ms", f.periodMs, "the lease's time to live from now. Default: 1000")
      ->type_name("N")
      ->check(wholeIn(1, kMaxMs));

  auto* load =
      app.add_subcommand("load", "a bounded load test; prints ops/s and latency percentiles");
  addConnection(load, f, 5000, 3'600'000);
  addLimiterOptions(load, f);
  load->add_option("--keys", f.load.keys,
                   "distinct bucket keys, each request picks one uniformly at\n"
                   "random (1 = one hot key). Default: 1")
      ->type_name("N")
      ->check(wholeIn(1, 1'000'000));
  load->add_option("--concurrency", f.load.concurrency, "requests in flight. Default: 16")
      ->type_name("N")
      ->check(wholeIn(1, 100'000));
  load->add_option("--seconds", f.load.seconds, "duration. Default: 5")
      ->type_name("S")
      ->check(wholeIn(1, 600));
  load->add_option("--batching", f.batching, "client-side batching of hot keys. Default: off")
      ->check(oneOf({"on", "off"}));

  // The limiter options that apply only to some limiters are refused for the others, and the
  // parameters a limiter would refuse are refused, before anything is sent.
  for (auto* command : {acquire, load}) {
    command->callback([&f, command] {
      f.command = command;
      checkLimiterOptions(f);
      withRequest(f, 1, [](const auto&) { return 0; });
    });
  }
  inspect->callback([&f, inspect] {
    f.command = inspect;
    if (f.has("warmup-ms") && f.limiter != "token-bucket") {
      throw CLI::ValidationError("--warmup-ms",
                                 "applies only to --limiter token-bucket, not " + f.limiter);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Looks at and exercises an ingrid cluster through the thin client.", "ingrid-cli");
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version",
                       std::string("ingrid-cli ") + ingrid::buildVersion() + " (commit " +
                           ingrid::buildCommit() + ")",
                       "print the version and exit");
  app.footer("Run 'ingrid-cli COMMAND --help' for a command's options.");
  app.require_subcommand(0, 1);
  app.failure_message([argc, argv](const CLI::App* a, const CLI::Error& e) {
    std::string message = e.what();
    // A first word that names no command: say so, rather than list every word as unexpected.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && a->get_subcommands().empty() &&
        argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const CLI::App* c : a->get_subcommands({})) {
        names += (names.empty() ? "" : ", ") + c->get_name();
      }
      message = "unknown command '" + std::string(argv[1]) + "' (commands: " + names + ")";
    }
    return "ingrid-cli: " + message + "\nRun with --help for the options.\n";
  });
  Flags f;
  addCommands(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const auto chosen = app.get_subcommands();
  if (chosen.empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  f.command = chosen.front();
  const std::string command = f.command->get_name();
  if (command == "status") return status(f);
  if (command == "wait") return waitFor(f);
  if (command == "top") {
    return ingrid::cli::top(f.metrics, static_cast<int>(f.iterations),
                            std::chrono::milliseconds(1000));
  }
  if (command == "acquire") return acquire(f);
  if (command == "inspect") return inspect(f);
  if (command == "release") return leaseCommand(f, true);
  if (command == "extend") return leaseCommand(f, false);
  if (command == "load") return load(f);
  if (command == "recover") return recover(f);
  fail("unknown command '" + command + "'");
}
