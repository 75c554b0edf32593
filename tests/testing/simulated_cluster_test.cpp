#include <ingrid/testing/cluster.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/testing/grant_audit.h>

#include "testing/scenario.h"
#include "testing/test_keys.h"

namespace ingrid::testing {
namespace {

using namespace std::chrono_literals;

ClusterOptions simulated(std::size_t nodes = 3, std::uint64_t seed = 1) {
  ClusterOptions o;
  o.nodes = nodes;
  o.network = Network::kSimulated;
  o.seed = seed;
  return o;
}

TokenBucketAcquire takeOne(std::int64_t capacity) {
  return TokenBucketAcquire{neverRefills(capacity), 1};
}

// A directory removed when the test ends, even when a REQUIRE fails.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The log lines of a node that contain `needle` (a sink may run on any thread).
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  std::string needle;
  std::vector<std::string> get() {
    std::lock_guard lock(mu);
    return lines;
  }
};
LogSink collect(const std::shared_ptr<LogLines>& into) {
  return [into](const LogLine& line) {
    if (line.message.find(into->needle) == std::string_view::npos) return;
    std::lock_guard lock(into->mu);
    into->lines.emplace_back(line.message);
  };
}

TEST_CASE("Simulated: three nodes start, form one cluster and answer", "[testing][simulated]") {
  Cluster c(simulated());
  const auto wall = std::chrono::steady_clock::now();
  REQUIRE_OK(c.start());
  std::printf("[testing] 3 simulated nodes safe after %.3f simulated s, %.3f wall s\n",
              std::chrono::duration<double>(c.elapsed()).count(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count());
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(c.up(i));
    CHECK(c.node(i).topology()->members.size() == 3);
    CHECK(c.address(i) == "10.0.0." + std::to_string(i + 1) + ":7000");
  }
  auto first = c.invoke(1, "key", takeOne(2));
  REQUIRE(first);
  CHECK(first->granted);
  CHECK(c.invoke(2, "key", takeOne(2))->granted);
  CHECK_FALSE(c.invoke(0, "key", takeOne(2))->granted);  // the bucket held 2
}

TEST_CASE("Simulated: crash: the backups take over, then restart rejoins", "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 2, 0);
  REQUIRE(!key.empty());
  REQUIRE(c.invoke(0, key, takeOne(3))->granted);
  const MemberId crashed = c.node(2).memberId();
  const auto before = c.elapsed();
  REQUIRE_OK(c.crash(2));
  CHECK_FALSE(c.up(2));
  CHECK_FALSE(c.node(2).running());
  // The call waits out the failure timeout (3 s) and is served by the promoted backup, which
  // holds the grant made before the crash.
  auto after = c.invoke(0, key, takeOne(3));
  REQUIRE(after);
  CHECK(after->granted);
  CHECK(after->remaining == 1);
  CHECK(c.elapsed() - before >= 3s);
  CHECK(ownersOf(c, key)[0] == c.node(0).memberId());
  REQUIRE_OK(c.waitClusterSafe());
  CHECK_FALSE(c.node(0).topology()->hasMember(crashed));
  CHECK(c.node(0).topology()->members.size() == 2);

  REQUIRE_OK(c.restart(2));
  CHECK(c.up(2));
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(0).topology()->members.size() == 3);
  CHECK(c.node(2).memberId() != crashed);  // a new member, at the same address
  CHECK(c.invoke(2, key, takeOne(3))->granted);
  CHECK_FALSE(c.invoke(1, key, takeOne(3))->granted);
}

TEST_CASE(
    "Simulated: a pause past the failure timeout removes the member, which rejoins once resumed",
    "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const MemberId paused = c.node(1).memberId();
  REQUIRE_OK(c.pause(1));
  CHECK(c.paused(1));
  // Shorter than the failure timeout (3 s): still a member.
  c.advance(1s);
  CHECK(c.node(0).topology()->hasMember(paused));
  // Past it: removed by the others.
  CHECK(c.runUntil(
      [&] {
        return !c.node(0).topology()->hasMember(paused) && !c.node(2).topology()->hasMember(paused);
      },
      10s));
  // Not safe while a node is paused.
  CHECK_FALSE(c.waitClusterSafe(2s));
  REQUIRE_OK(c.resume(1));
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(1).memberId() != paused);  // it learned it was removed and joined anew
  CHECK(c.node(0).topology()->members.size() == 3);
}

TEST_CASE("Simulated: a cut link stops replication until healed", "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 0, 1);
  REQUIRE(!key.empty());
  REQUIRE_OK(c.cut(0, 1));
  std::optional<Result<AcquireAnswer>> answer;
  c.node(0).invokeAsync(key, takeOne(5), [&](Result<AcquireAnswer> r) { answer = std::move(r); });
  // The primary (node 0) cannot reach the backup (node 1): a synchronous write is not answered.
  c.advance(1s);
  CHECK_FALSE(answer.has_value());
  c.heal();
  // Healed before the failure timeout: the held bytes flow, the backup acknowledges.
  REQUIRE(c.runUntil([&] { return answer.has_value(); }, 2s));
  REQUIRE(*answer);
  CHECK((*answer)->granted);
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(0).topology()->members.size() == 3);
}

TEST_CASE("Simulated: a one-way cut from the primary to its backup holds its writes",
          "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 2, 0);
  REQUIRE(!key.empty());
  REQUIRE_OK(c.cutOneWay(2, 0));
  std::optional<Result<AcquireAnswer>> answer;
  c.node(2).invokeAsync(key, takeOne(5), [&](Result<AcquireAnswer> r) { answer = std::move(r); });
  c.advance(1s);
  CHECK_FALSE(answer.has_value());
  // The other way still flows: node 0 reaches node 2 (a read node 2 serves as primary).
  auto read = c.invoke(0, keyOwnedBy(c, 2, 1, "other"), GetEntry{});
  CHECK(read);
  c.heal();
  // Answered once healed: granted, or indeterminate (the backup's link was closed meanwhile, as a
  // silent peer's is: applied on the primary, unconfirmed), never a silent success.
  REQUIRE(c.runUntil([&] { return answer.has_value(); }, 2s));
  INFO((answer->ok() ? std::string("ok") : answer->error().message()));
  CHECK((answer->ok() || answer->error() == Errc::indeterminate));
  REQUIRE_OK(c.waitClusterSafe());
}

TEST_CASE("Simulated: a delayed link slows the writes that cross it", "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 0, 1);
  REQUIRE(!key.empty());
  auto t0 = c.elapsed();
  REQUIRE(c.invoke(0, key, takeOne(5))->granted);
  const auto plain = c.elapsed() - t0;
  REQUIRE_OK(c.delay(0, 1, 300ms));
  t0 = c.elapsed();
  REQUIRE(c.invoke(0, key, takeOne(5))->granted);
  const auto delayed = c.elapsed() - t0;
  std::printf("[testing] a write replicated across a link: %.1f ms, delayed 300 ms: %.1f ms\n",
              std::chrono::duration<double, std::milli>(plain).count(),
              std::chrono::duration<double, std::milli>(delayed).count());
  CHECK(plain < 50ms);
  CHECK(delayed >= 300ms);
  c.heal();
  t0 = c.elapsed();
  REQUIRE(c.invoke(0, key, takeOne(5))->granted);
  CHECK(c.elapsed() - t0 < 50ms);
}

TEST_CASE("Simulated: a link that drops every frame holds the writes that cross it",
          "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 1, 2);
  REQUIRE(!key.empty());
  REQUIRE_OK(c.drop(1, 2, 1.0));
  std::optional<Result<AcquireAnswer>> answer;
  c.node(1).invokeAsync(key, takeOne(5), [&](Result<AcquireAnswer> r) { answer = std::move(r); });
  c.advance(1s);
  CHECK_FALSE(answer.has_value());
  c.heal();
  // Lost frames are gone: the write is settled once the primary gives up on that backup (the
  // failure timeout) or hears from it again; either way it is answered, and the cluster heals.
  REQUIRE(c.runUntil([&] { return answer.has_value(); }, 15s));
  std::printf("[testing] a write whose replication was dropped: %s\n",
              answer->ok() ? ((*answer)->granted ? "granted" : "denied")
                           : answer->error().message().c_str());
  REQUIRE_OK(c.waitClusterSafe());
}

TEST_CASE("Simulated: a partition: the majority carries on, the minority is removed, heal rejoins",
          "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 2, 0);
  REQUIRE(!key.empty());
  REQUIRE(c.invoke(0, key, takeOne(3))->granted);
  const MemberId minority = c.node(2).memberId();
  REQUIRE_OK(c.partition({{0, 1}, {2}}));
  // The majority removes node 2 after the failure timeout and serves its keys.
  REQUIRE(c.runUntil([&] { return !c.node(0).topology()->hasMember(minority); }, 10s));
  auto served = c.invoke(1, key, takeOne(3));
  REQUIRE(served);
  CHECK(served->granted);
  CHECK(served->remaining == 1);
  // The minority side grants nothing: its lease lapsed.
  auto cutOff = c.invoke(2, key, takeOne(3));
  CHECK_FALSE((cutOff && cutOff->granted));
  c.heal();
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(2).memberId() != minority);
  CHECK(c.invoke(2, key, takeOne(3))->granted);
  CHECK_FALSE(c.invoke(0, key, takeOne(3))->granted);
}

TEST_CASE("Simulated: stop leaves gracefully, at once", "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 1, 2);
  REQUIRE(c.invoke(0, key, takeOne(2))->granted);
  const auto t0 = c.elapsed();
  REQUIRE_OK(c.stop(1));
  CHECK(c.node(0).topology()->members.size() == 2);  // no failure timeout: it left
  CHECK(c.elapsed() - t0 < 3s);
  REQUIRE_OK(c.waitClusterSafe());
  auto again = c.invoke(0, key, takeOne(2));
  REQUIRE(again);
  CHECK(again->remaining == 0);  // its state moved with its partitions
}

TEST_CASE("Simulated: restart with the data directory, and emptied", "[testing][simulated]") {
  const TempDir root("ingrid-testing");
  auto restored = std::make_shared<LogLines>();
  restored->needle = "'s Raft state from";
  ClusterOptions o = simulated();
  o.customize = [&root, restored](std::size_t i, NodeOptions& n) {
    n.dataDir = (root.path / ("n" + std::to_string(i))).string();
    if (i == 2) n.logSink = collect(restored);
  };
  const std::filesystem::path dir = root.path / "n2";
  const std::string identity = (dir / "member").string();
  Cluster c(o);  // after root: destroyed before it
  REQUIRE_OK(c.start());
  // The directory names the member whose Raft state it holds.
  const MemberId first = c.node(2).memberId();
  CHECK_THAT(readFile(identity), Catch::Contains("id " + std::to_string(first) + "\n"));
  REQUIRE_OK(c.crash(2));
  std::ofstream(dir / "marker") << "a file of the node's process";

  REQUIRE_OK(c.restart(2));
  // With its directory: the files stay, and it restored the crashed member's Raft state before it
  // joined as a new member.
  CHECK(std::filesystem::exists(dir / "marker"));
  const std::vector<std::string> lines = restored->get();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("restored member " + std::to_string(first) + "'s"));
  REQUIRE_OK(c.waitClusterSafe());
  const MemberId second = c.node(2).memberId();
  CHECK(second != first);
  CHECK(c.node(0).topology()->members.size() == 3);
  CHECK_THAT(readFile(identity), Catch::Contains("id " + std::to_string(second) + "\n"));

  REQUIRE_OK(c.crash(2));
  REQUIRE_OK(c.restart(2, /*keepDataDir=*/false));
  // Emptied: nothing of before is left, nothing restored; the directory names the new member.
  CHECK_FALSE(std::filesystem::exists(dir / "marker"));
  CHECK(restored->get().size() == 1);
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(0).topology()->members.size() == 3);
  const MemberId third = c.node(2).memberId();
  CHECK(third != second);
  CHECK_THAT(readFile(identity), Catch::Contains("id " + std::to_string(third) + "\n"));
}

TEST_CASE("Simulated: completions run on the test's thread while the simulation runs",
          "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  int answered = 0;
  std::thread::id ranOn;
  for (std::size_t i = 0; i < 3; ++i) {
    c.node(i).invokeAsync("async", takeOne(10), [&](Result<AcquireAnswer> r) {
      if (r && r->granted) ++answered;
      ranOn = std::this_thread::get_id();
    });
  }
  CHECK(answered == 0);  // nothing runs until the simulation does
  REQUIRE(c.runUntil([&] { return answered == 3; }, 1s));
  CHECK(ranOn == std::this_thread::get_id());
  // A blocking call of a simulated node refuses instead of stalling the simulation.
  auto blocked = c.node(0).invoke("async", takeOne(10));
  REQUIRE_FALSE(blocked);
  CHECK(blocked.error() == Errc::would_deadlock);
  CHECK_THAT(blocked.error().message(), Catch::Contains("Cluster::invoke"));
  CHECK_FALSE(c.node(0).clusterSafe().ok);
  CHECK(c.clusterSafe(0).ok);
}

TEST_CASE("Simulated: Node::stop, TEST_crash and the blocking TEST_ calls refuse, logged",
          "[testing][simulated]") {
  auto refused = std::make_shared<LogLines>();
  refused->needle = "Node::";
  ClusterOptions o = simulated();
  o.customize = [refused](std::size_t, NodeOptions& n) { n.logSink = collect(refused); };
  Cluster c(o);
  REQUIRE_OK(c.start());
  c.node(0).stop();
  c.node(0).TEST_crash();
  CHECK(c.node(0).running());  // the Cluster's stop() and crash() stop it
  CHECK(c.node(1).TEST_entryCount() == 0);
  CHECK(c.node(1).TEST_partitionEntries(0).empty());
  CHECK(c.node(1).TEST_partitionSeq(0) == 0);
  const std::vector<std::string> lines = refused->get();
  REQUIRE(lines.size() == 5);
  CHECK_THAT(lines[0], Catch::Contains("Node::stop() ignored") &&
                           Catch::Contains("Cluster::stop() and Cluster::crash()"));
  CHECK_THAT(lines[1], Catch::Contains("Node::TEST_crash() ignored"));
  CHECK_THAT(lines[2], Catch::Contains("Node::TEST_entryCount() refused"));
  REQUIRE_OK(c.crash(0));
  CHECK_FALSE(c.node(0).running());
}

TEST_CASE("Simulated: a Cluster call from a handler refuses instead of nesting",
          "[testing][simulated]") {
  Cluster c(simulated());
  REQUIRE_OK(c.start());
  std::optional<Error> nested;
  bool advanced = true;
  c.node(0).invokeAsync("k", takeOne(5), [&](Result<AcquireAnswer>) {
    auto r = c.invoke(1, "k", takeOne(5));
    nested = r ? Error() : r.error();
    advanced = c.runUntil([] { return true; }, 1s);
  });
  REQUIRE(c.runUntil([&] { return nested.has_value(); }, 5s));
  CHECK(*nested == Errc::would_deadlock);
  CHECK_THAT(nested->message(), Catch::Contains("Cluster::invoke() called from a handler"));
  CHECK_FALSE(advanced);
  CHECK(c.invoke(1, "k", takeOne(5)));  // after the call, the Cluster answers again
}

TEST_CASE("Simulated: no handler runs once ~Cluster begins, and an audit's late answers are safe",
          "[testing][simulated]") {
  auto ran = std::make_shared<int>(0);
  {
    Cluster c(simulated());
    REQUIRE_OK(c.start());
    {
      GrantAudit audit(c);
      audit.acquire(c.node(0), "late", 5, [ran](const Result<AcquireAnswer>&) { ++*ran; });
    }                                                    // destroyed with its call in flight
    REQUIRE(c.runUntil([&] { return *ran == 1; }, 5s));  // answered: recorded nowhere, safely
    c.node(1).invokeAsync("gone", takeOne(5), [ran](Result<AcquireAnswer>) { ++*ran; });
  }  // the answer to "gone" is dropped unrun
  CHECK(*ran == 1);
}

TEST_CASE("Simulated: a start that timed out: restart refuses until it ends, ~Cluster waits",
          "[testing][simulated]") {
  ClusterOptions o = simulated();
  o.startTimeout = 0ms;  // shorter than any join: some node's start times out
  Cluster c(o);
  auto started = c.start();
  REQUIRE_FALSE(started);
  CHECK(started.error() == Errc::timeout);
  std::size_t late = 0;
  while (late < c.size() && c.up(late)) ++late;
  REQUIRE(late < c.size());
  auto again = c.restart(late);
  REQUIRE_FALSE(again);
  CHECK(again.error() == Errc::unavailable);
  CHECK_THAT(again.error().message(), Catch::Contains("is still starting"));
}  // ~Cluster: the start ends, its node is crashed, then destroyed

TEST_CASE("Simulated: bad input is refused, naming the thing and the reason",
          "[testing][simulated]") {
  Cluster c(simulated());
  auto early = c.crash(0);
  REQUIRE_FALSE(early);
  CHECK_THAT(early.error().message(), Catch::Contains("not started"));
  REQUIRE_OK(c.start());
  auto far = c.crash(7);
  REQUIRE_FALSE(far);
  CHECK_THAT(far.error().message(), Catch::Contains("no node 7"));
  auto twice = c.partition({{0, 1}, {1, 2}});
  REQUIRE_FALSE(twice);
  CHECK_THAT(twice.error().message(), Catch::Contains("node 1 is in two groups"));
  auto self = c.cut(1, 1);
  REQUIRE_FALSE(self);
  CHECK_THAT(self.error().message(), Catch::Contains("both are node 1"));
  auto odds = c.drop(0, 1, 1.5);
  REQUIRE_FALSE(odds);
  CHECK_THAT(odds.error().message(), Catch::Contains("probability"));
  CHECK_THROWS_AS(c.node(3), std::out_of_range);
  REQUIRE_OK(c.crash(1));
  auto down = c.invoke(1, "k", takeOne(1));
  REQUIRE_FALSE(down);
  CHECK_THAT(down.error().message(), Catch::Contains("node 1 is down"));
  auto upAlready = c.restart(0);
  REQUIRE_FALSE(upAlready);
  CHECK_THAT(upAlready.error().message(), Catch::Contains("node 0 is up"));
  CHECK_FALSE(c.resume(0));
}

TEST_CASE("Simulated: 60 s with a crash and a partition, audited, in well under a second",
          "[testing][simulated]") {
  const ScenarioResult r = runScenario(simulated(3, 11), std::chrono::seconds(60));
  INFO(r.error);
  REQUIRE(r.error.empty());
  std::printf(
      "[testing] simulated: %.1f cluster s (a crash, a restart, a partition) in %.3f wall "
      "s; %s; %lld of %lld keys granted exactly their capacity\n",
      r.clusterSeconds, r.wallSeconds, r.report.summary().c_str(),
      static_cast<long long>(r.keysExact), static_cast<long long>(r.keysAudited));
  INFO(r.report.failures());
  CHECK(r.report.ok());
  CHECK(r.report.granted > 0);
  CHECK(r.report.denied > 0);
  // Every key saw more demand than its capacity: each granted exactly its capacity, unless a
  // call's outcome stayed unknown.
  for (const KeyVerdict& v : r.report.keys) {
    INFO(v.key);
    if (v.unknown == 0) CHECK(v.acked == v.capacity);
  }
}

TEST_CASE("Simulated: the same seed replays the same run", "[testing][simulated]") {
  const ScenarioResult a = runScenario(simulated(3, 23), std::chrono::seconds(20));
  const ScenarioResult b = runScenario(simulated(3, 23), std::chrono::seconds(20));
  INFO(a.error + " / " + b.error);
  REQUIRE(a.error.empty());
  REQUIRE(b.error.empty());
  std::printf("[testing] seed 23 twice: trace %016llx and %016llx, %s\n",
              static_cast<unsigned long long>(a.traceHash),
              static_cast<unsigned long long>(b.traceHash), a.report.summary().c_str());
  CHECK(a.traceHash == b.traceHash);
  CHECK(a.report.summary() == b.report.summary());
  CHECK(a.clusterSeconds == b.clusterSeconds);
  const ScenarioResult other = runScenario(simulated(3, 24), std::chrono::seconds(20));
  REQUIRE(other.error.empty());
  CHECK(other.traceHash != a.traceHash);
}

}  // namespace
}  // namespace ingrid::testing
