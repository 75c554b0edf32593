// kill -9 of a member while callers load the cluster through the RESP gateways of its three
// members (INGRID.ACQUIRE on token buckets that never refill; docs/gateways.md): grants are
// exact, as with the native client (kill_test.cpp). A gateway runs each call through its node's
// router, so a call whose primary was killed is retried with the same request id on the
// successor: no grant lost or doubled. Only the calls in flight on the killed member's own
// gateway end unknown (their connection closes with it); those callers reconnect to another
// member's gateway. Run alone with `fault_tests "[resp]"`; it prints one summary line.
#include "support/resp_client.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/error.h>
#include <ingrid/hash.h>

#include "support/fault_harness.h"
#include "support/grant_audit.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditCall;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::CallOutcome;
using ingrid::testing::Convergence;
using ingrid::testing::FaultClock;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::RespClient;

namespace {

constexpr auto kConvergeLimit = 15s;
// The gateways' call deadline (ingrid-node --request-timeout-ms), the kill tests' client
// deadline: above the failover of a member at a 2 s failure timeout.
constexpr auto kGatewayDeadline = 6000ms;
// A caller's own deadline on a call: the gateway's plus more than the audit's slack, so a
// gateway that never answers shows as a call past its deadline.
constexpr auto kCallerDeadline = kGatewayDeadline + 1500ms;
// INGRID.ACQUIRE's largest period-ms (INT64_MAX ns): 1 token per ~292 years, the audit's
// neverRefills() as the RESP command spells it.
constexpr const char* kNeverMs = "9223372036854";

// The Errc named by a gateway's "-ERR <name>: <message>" line, or nullopt.
std::optional<ingrid::Errc> errcOfReply(const std::string& text) {
  const auto colon = text.find(": ");
  if (text.rfind("ERR ", 0) != 0 || colon == std::string::npos) return std::nullopt;
  const std::string name = text.substr(4, colon - 4);
  for (int v = 1; v <= ingrid::kErrcMax; ++v) {
    if (ingrid::errcName(v) == name) return static_cast<ingrid::Errc>(v);
  }
  return std::nullopt;
}

// One audit caller: INGRID.ACQUIRE on one gateway's connection, starting at gateway `home`.
// A call whose connection failed ends unknown (the command may have run) and closes it; the
// next call connects to the next gateway that accepts. Its thread only; the counts are read
// once the callers stopped.
class GatewayCaller {
 public:
  GatewayCaller(std::vector<std::string> gateways, std::size_t home)
      : gateways_(std::move(gateways)), at_(home) {}

  CallOutcome operator()(const std::string& key, std::int64_t capacity) {
    const auto deadline = FaultClock::now() + kCallerDeadline;
    CallOutcome o;
    o.code = static_cast<int>(ingrid::Errc::unreachable);
    // Not connected: each gateway once at most, from the current one; nothing sent yet.
    for (std::size_t tried = 0; !conn_.connected() && tried < gateways_.size(); ++tried) {
      if (conn_.connect(gateways_[at_], deadline).empty()) {
        ++connects_;
        break;
      }
      at_ = (at_ + 1) % gateways_.size();
    }
    if (!conn_.connected()) return o;
    const std::size_t on = at_;
    ++calls_[on];
    auto reply = conn_.call({"INGRID.ACQUIRE", key, "1", "token-bucket", "capacity",
                             std::to_string(capacity), "refill", "1", "period-ms", kNeverMs},
                            deadline);
    if (!reply) {
      o.code = reply.error().code().value();
      o.unknown = true;
      ++unknown_[on];
      at_ = (at_ + 1) % gateways_.size();  // the connection is closed: reconnect elsewhere
      return o;
    }
    if (const auto granted = reply->field("granted")) {
      o.outcome = *granted == 1 ? AuditCall::kGranted : AuditCall::kDenied;
      return o;
    }
    const auto errc =
        reply->kind == ingrid::testing::RespReply::kError ? errcOfReply(reply->text) : std::nullopt;
    o.code = static_cast<int>(errc.value_or(ingrid::Errc::protocol_error));
    o.unknown = ingrid::testing::outcomeUnknown(
        ingrid::Error(errc.value_or(ingrid::Errc::protocol_error), reply->text));
    if (o.unknown) ++unknown_[on];
    return o;
  }

  std::uint64_t calls(std::size_t gateway) const { return calls_[gateway]; }
  std::uint64_t unknown(std::size_t gateway) const { return unknown_[gateway]; }
  std::uint64_t connects() const { return connects_; }

 private:
  const std::vector<std::string> gateways_;
  std::size_t at_;  // the gateway connected to, or to try first
  RespClient conn_;
  std::vector<std::uint64_t> calls_ = std::vector<std::uint64_t>(gateways_.size());
  std::vector<std::uint64_t> unknown_ = std::vector<std::uint64_t>(gateways_.size());
  std::uint64_t connects_ = 0;
};

// How many of `keys` the member `victim` is primary of, by `client`'s topology.
std::size_t primaryOf(ingrid::Client& client, ingrid::MemberId victim,
                      const std::vector<std::string>& keys) {
  const auto t = client.topology();
  std::size_t n = 0;
  for (const auto& key : keys) {
    if (t->table.primary(ingrid::partitionOf(key, t->table.partitionCount())) == victim) ++n;
  }
  return n;
}

long long msSince(FaultClock::time_point from) {
  return static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(FaultClock::now() - from).count());
}

}  // namespace

TEST_CASE(
    "Kill -9 under load through the RESP gateways: grants are exact, as with the native "
    "client",
    "[fault][kill][resp]") {
  // Both ways a gateway is served: on a thread of its own, and (--single-thread) on the node's
  // one thread, where its throttles on local partitions run in place.
  const bool singleThread = GENERATE(false, true);
  INFO("--single-thread: " << singleThread);
  const auto begin = FaultClock::now();
  FaultClusterOptions o;  // three members, --backups 1, 2 s failure timeout
  o.args.insert(o.args.end(), {"--resp", "127.0.0.1:0", "--request-timeout-ms",
                               std::to_string(kGatewayDeadline.count())});
  if (singleThread) o.args.push_back("--single-thread");
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  std::vector<std::string> gateways;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const auto line = cluster[i].waitForLine("RESP on", 5s);
    REQUIRE(line);
    gateways.push_back(line->substr(line->rfind(' ') + 1));
  }

  // Not the control plane's leader: its keys fail over within the failure timeout, without an
  // election first.
  const int leader = cluster.leaderIndex();
  REQUIRE(leader >= 0);
  const std::size_t victimAt = leader == 2 ? 1 : 2;

  AuditOptions a = ingrid::testing::scenarioAudit("resp-kill");
  a.callers = 24;  // 8 per gateway
  a.deadline = kGatewayDeadline;
  std::vector<std::shared_ptr<GatewayCaller>> callers;
  for (int i = 0; i < a.callers; ++i) {
    callers.push_back(
        std::make_shared<GatewayCaller>(gateways, static_cast<std::size_t>(i) % gateways.size()));
  }
  GrantAudit audit(cluster.addresses(), a, [&callers](int i) -> ingrid::testing::AuditCaller {
    return [c = callers[static_cast<std::size_t>(i)]](
               const std::string& key, std::int64_t capacity) { return (*c)(key, capacity); };
  });
  REQUIRE(audit.start().empty());
  std::vector<std::string> fixedKeys;
  for (std::uint32_t k = 0; k < a.fixedBuckets; ++k) fixedKeys.push_back(audit.keyName(k));
  const std::size_t victimKeys = primaryOf(audit.client(), cluster[victimAt].memberId, fixedKeys);

  // Load that really ran before the kill, and after the cluster settled without the victim.
  const bool ranBefore = audit.waitForGrants(1000, 10s);
  const auto killedAt = FaultClock::now();
  cluster[victimAt].kill9();
  const Convergence converged = cluster.waitConverged(2, kConvergeLimit);
  const auto servedAt = FaultClock::now();
  const bool ranAfter = audit.waitForGrants(1000, 10s);
  const AuditResult r = audit.finish(5s);
  const auto crashes = cluster.crashes();

  std::uint64_t unknownOnVictim = 0, unknownOnSurvivors = 0, reconnects = 0;
  for (const auto& c : callers) {
    for (std::size_t g = 0; g < gateways.size(); ++g) {
      (g == victimAt ? unknownOnVictim : unknownOnSurvivors) += c->unknown(g);
    }
    reconnects += c->connects() > 0 ? c->connects() - 1 : 0;
  }
  const auto before = r.window(begin, killedAt);
  const auto after = r.window(servedAt, FaultClock::now());
  // Calls answered (granted or denied) that took over a second: those that waited on the
  // surviving gateways through the failover of their key's primary and were retried there.
  std::uint64_t rodeThrough = 0;
  for (const auto& c : r.calls) {
    if (c.outcome != AuditCall::kError && c.end - c.start > 1s) ++rodeThrough;
  }
  std::printf(
      "[fault] resp-kill%s: %s converged=%s converge_ms=%lld crashes=%zu "
      "victim_primary_keys=%zu/%u "
      "acked_before_kill=%llu acked_after_converged=%llu unknown_on_victim_gateway=%llu "
      "unknown_on_other_gateways=%llu answered_after_1s=%llu reconnects=%llu took_ms=%lld\n",
      singleThread ? " (single-thread)" : "", r.summary.line().c_str(),
      converged.converged ? "yes" : "no", static_cast<long long>(converged.took.count()),
      crashes.size(), victimKeys, a.fixedBuckets, static_cast<unsigned long long>(before.acked),
      static_cast<unsigned long long>(after.acked),
      static_cast<unsigned long long>(unknownOnVictim),
      static_cast<unsigned long long>(unknownOnSurvivors),
      static_cast<unsigned long long>(rodeThrough), static_cast<unsigned long long>(reconnects),
      msSince(begin));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(converged.detail);
  INFO(r.worst());
  for (const auto& c : crashes) INFO(c);
  CHECK(victimKeys > 0);
  CHECK(ranBefore);
  CHECK(ranAfter);
  CHECK(before.acked > 0);
  CHECK(after.acked > 0);
  CHECK(crashes.empty());
  CHECK(converged.converged);
  CHECK(r.summary.unreadable == 0);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.phantom == 0);  // no token consumed that no acknowledged or unknown call explains
  CHECK(r.summary.overDeadline == 0);
  CHECK(reconnects >= 1);   // the victim's callers moved to another gateway
  CHECK(rodeThrough >= 1);  // some calls did wait for the failover (the case under test)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Exactly-once retries inside the gateways' nodes: a call on a surviving gateway whose primary
  // was killed is sent again, with its id, to the successor within the 6 s deadline; none ends
  // unknown. (Sanitizer builds run too slowly for that budget: there it is only reported.)
  CHECK(unknownOnSurvivors == 0);
#endif
}
