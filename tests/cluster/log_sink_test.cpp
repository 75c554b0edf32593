// NodeOptions::logSink: a node's lines go to its embedder's sink, with their level and fields,
// and nothing to stderr (include/ingrid/log.h); the internal Logger's level filter.
#include <ingrid/log.h>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingrid/node.h>

#include "cluster/transport/logger.h"

#include "support/eventually.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::TestCluster;

namespace {

// fd 2 goes to a temporary file while this lives, and back to where it went before when it dies
// (a failed REQUIRE included); what was captured is then written to the restored fd 2, so a
// test harness's or a sanitizer's report is not lost.
class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()) {
    REQUIRE(file_ != nullptr);
    flushAll();
    saved_ = ::dup(STDERR_FILENO);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(::fileno(file_), STDERR_FILENO) >= 0);
  }
  ~StderrCapture() {
    const std::string captured = text();
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    std::fclose(file_);
    for (std::size_t at = 0; at < captured.size();) {
      const ssize_t n = ::write(STDERR_FILENO, captured.data() + at, captured.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Everything written to fd 2 so far.
  std::string text() const {
    flushAll();
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(::fileno(file_), buf, sizeof buf, at);
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
  }

 private:
  static void flushAll() {
    std::cerr.flush();
    std::clog.flush();
    std::fflush(stderr);
  }
  std::FILE* file_;
  int saved_ = -1;
};

struct Line {
  LogLevel level;
  std::string message;
  LogFields fields;
};

// A node's sink: keeps every record (the node's threads call it concurrently).
class Captured {
 public:
  LogSink sink() {
    return [this](const LogLine& r) {
      std::lock_guard lock(mu_);
      lines_.push_back(Line{r.level, std::string(r.message), r.fields});
    };
  }
  std::optional<Line> find(const std::function<bool(const Line&)>& pred) const {
    std::lock_guard lock(mu_);
    for (const Line& l : lines_) {
      if (pred(l)) return l;
    }
    return std::nullopt;
  }
  std::string all() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const Line& l : lines_) {
      out += std::string(logLevelName(l.level)) + " " + l.message + "\n";
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Line> lines_;
};

// Counts how often it is formatted.
struct FormatCounter {
  int* count;
  friend std::ostream& operator<<(std::ostream& os, const FormatCounter& p) {
    ++*p.count;
    return os << "probe";
  }
};

bool has(const Line& l, std::string_view text) { return l.message.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("A node's log lines go to its sink, with fields, and none to stderr: a join, a crash",
          "[cluster][log]") {
  StderrCapture stderrCapture;  // outlives the cluster: its stops are watched too
  {
    NodeOptions o = ingrid::testing::smallClusterOptions();
    o.heartbeatInterval = 50ms;
    o.failureTimeout = 1000ms;
    std::vector<std::shared_ptr<Captured>> logs;  // node i's at i; outlives the nodes
    for (int i = 0; i < 4; ++i) logs.push_back(std::make_shared<Captured>());
    TestCluster cluster(o);
    cluster.customize([&logs](NodeOptions& n, std::size_t i) { n.logSink = logs.at(i)->sink(); });
    REQUIRE(cluster.start(3));
    INFO("node 0's lines:\n" << logs[0]->all());

    // The first member started the cluster.
    CHECK(logs[0]
              ->find([](const Line& l) {
                return l.level == LogLevel::kInfo && l.fields.member == MemberId{1} &&
                       has(l, "started a new cluster as its member 1");
              })
              .has_value());

    // A fourth node joins: it says so, and the leader says whom it admitted.
    Node& joiner = cluster.add();
    REQUIRE(cluster.lastStart().ok());
    REQUIRE(eventually([&] { return cluster.settled() && cluster.live().size() == 4; }));
    const MemberId joinerId = joiner.memberId();
    INFO("the joiner's lines:\n" << logs[3]->all());
    const auto joined = logs[3]->find([&](const Line& l) {
      return has(l, "joined the cluster as member " + std::to_string(joinerId));
    });
    REQUIRE(joined.has_value());
    CHECK(joined->level == LogLevel::kInfo);
    CHECK(joined->fields.member == joinerId);
    CHECK(has(*joined, joiner.listenAddress()));
    bool admitted = false;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto line = logs[i]->find([&](const Line& l) {
        return has(l,
                   "admits " + joiner.listenAddress() + " as member " + std::to_string(joinerId));
      });
      if (!line) continue;
      admitted = true;
      CHECK(line->level == LogLevel::kInfo);
      CHECK(line->fields.member == cluster.at(i).memberId());  // the leader, node i
      CHECK(line->fields.peer == joinerId);
    }
    CHECK(admitted);

    // A member that does not lead crashes: the leader declares it failed.
    const MemberId leader = cluster.at(0).topology()->leader;
    std::size_t victim = 1;
    while (cluster.at(victim).memberId() == leader) ++victim;
    const MemberId victimId = cluster.at(victim).memberId();
    cluster.crash(victim);
    REQUIRE(eventually([&] { return cluster.settled() && cluster.live().size() == 3; }));
    std::optional<Line> failed;
    MemberId judge = 0;
    for (std::size_t i = 0; i < 4 && !failed; ++i) {
      if (i == victim) continue;
      failed = logs[i]->find([&](const Line& l) {
        return l.fields.peer == victimId &&
               has(l, "(leader): member " + std::to_string(victimId)) && has(l, "removing it");
      });
      if (failed) judge = cluster.at(i).memberId();
    }
    REQUIRE(failed.has_value());
    INFO(failed->message);
    CHECK(failed->level == LogLevel::kWarn);
    CHECK(failed->fields.member == judge);
    CHECK(failed->fields.term.value_or(0) > 0);
    CHECK(has(*failed, "member " + std::to_string(judge) + " (leader)"));
  }                                   // the others stop (they leave) here, still captured
  CHECK(stderrCapture.text() == "");  // (its text shown if not)
}

TEST_CASE("A Logger formats and delivers only lines at its level or above", "[cluster][log]") {
  int formatted = 0;
  std::vector<std::string> lines;
  const Logger log([&lines](const LogLine& r) { lines.push_back(formatLogLine(r)); },
                   LogLevel::kWarn);
  log.info({}, "quiet ", FormatCounter{&formatted});
  CHECK(formatted == 0);
  CHECK(lines.empty());
  log.warn({.member = 3}, "member ", 3, " says ", FormatCounter{&formatted});
  CHECK(formatted == 1);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "ingrid: member 3 says probe");

  // Without a sink nothing is formatted; a sink that throws loses its line, nothing more.
  Logger().error({}, FormatCounter{&formatted});
  CHECK(formatted == 1);
  const Logger throwing([](const LogLine&) { throw std::runtime_error("sink down"); },
                        LogLevel::kDebug);
  CHECK_NOTHROW(throwing.error({}, "lost"));
}
