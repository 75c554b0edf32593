#include "client/cli_top.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace ingrid::cli {
namespace {

// What the view needs of one scrape of one member.
struct Sample {
  double requests = 0;               // every ingrid_requests_total sample
  double denied = 0;                 // outcome="denied"
  std::map<double, double> buckets;  // request duration: le -> cumulative count, all processors
  double members = 0, leader = 0, version = 0, lease = 0;
  std::map<std::string, double> partitions;  // "primary/complete" -> count
};

// The value of label `name` in `labels` ("{a=\"x\",b=\"y\"}"); empty if absent.
std::string labelValue(const std::string& labels, const std::string& name) {
  for (const char* before : {"{", ","}) {
    const std::string key = before + name + "=\"";
    const auto at = labels.find(key);
    if (at == std::string::npos) continue;
    const auto start = at + key.size();
    const auto end = labels.find('"', start);
    return end == std::string::npos ? std::string() : labels.substr(start, end - start);
  }
  return {};
}

Sample parse(const std::string& text) {
  Sample s;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    double value = 0;
    try {
      value = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      continue;
    }
    const auto brace = line.find('{');
    const std::string name = line.substr(0, std::min(brace, space));
    const std::string labels =
        brace == std::string::npos || brace > space ? "" : line.substr(brace, space - brace);
    if (name == "ingrid_requests_total") {
      // Served: answered by a processor (refusals are not throughput).
      const std::string outcome = labelValue(labels, "outcome");
      if (outcome == "granted" || outcome == "denied" || outcome == "ok") s.requests += value;
      if (outcome == "denied") s.denied += value;
    } else if (name == "ingrid_request_duration_seconds_bucket") {
      const std::string le = labelValue(labels, "le");
      try {
        s.buckets[le == "+Inf" ? INFINITY : std::stod(le)] += value;
      } catch (const std::exception&) {
        continue;  // a bucket without a readable bound: skipped
      }
    } else if (name == "ingrid_members") {
      s.members = value;
    } else if (name == "ingrid_raft_leader_id") {
      s.leader = value;
    } else if (name == "ingrid_topology_version") {
      s.version = value;
    } else if (name == "ingrid_lease_remaining_seconds") {
      s.lease = value;
    } else if (name == "ingrid_partitions") {
      s.partitions[labelValue(labels, "role") + "/" + labelValue(labels, "state")] = value;
    }
  }
  return s;
}

std::optional<Sample> scrape(const std::string& address) {
  httplib::Client c("http://" + address);
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(3, 0);
  const auto r = c.Get("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  return parse(r->body);
}

// The q-quantile of the observations between two scrapes, from their cumulative buckets: the
// upper bound of the first bucket that holds it ("<1ms"); "-" if none were observed.
std::string quantile(const Sample& now, const Sample& before, double q) {
  const double total =
      now.buckets.empty()
          ? 0
          : std::prev(now.buckets.end())->second -
                (before.buckets.empty() ? 0 : std::prev(before.buckets.end())->second);
  if (total <= 0) return "-";
  for (const auto& [le, count] : now.buckets) {
    const auto was = before.buckets.find(le);
    const double delta = count - (was == before.buckets.end() ? 0 : was->second);
    if (delta >= q * total) {
      if (std::isinf(le)) return ">10s";
      char out[32];
      if (le < 1e-3) {
        std::snprintf(out, sizeof out, "<%.0fus", le * 1e6);
      } else if (le < 1) {
        std::snprintf(out, sizeof out, "<%.1fms", le * 1e3);
      } else {
        std::snprintf(out, sizeof out, "<%.1fs", le);
      }
      return out;
    }
  }
  return "-";
}

}  // namespace

int top(const std::vector<std::string>& metrics, int iterations,
        std::chrono::milliseconds interval) {
  std::vector<std::optional<Sample>> last(metrics.size());
  auto lastAt = std::chrono::steady_clock::now();
  int answered = 0;
  for (int round = 0; iterations == 0 || round < iterations; ++round) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - lastAt).count();
    lastAt = now;
    std::string view = "\x1b[H\x1b[2J";  // home, clear
    char line[256];
    std::snprintf(line, sizeof line, "%-22s %10s %10s %9s %9s %8s %8s %8s %6s %5s\n", "member",
                  "ops/s", "denied/s", "p50", "p99", "primary", "backup", "syncing", "leader",
                  "lease");
    view += line;
    answered = 0;
    double totalOps = 0, totalDenied = 0;
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      std::optional<Sample> s = scrape(metrics[i]);
      if (!s) {
        std::snprintf(line, sizeof line, "%-22s %s\n", metrics[i].c_str(), "no answer");
        view += line;
        last[i].reset();
        continue;
      }
      ++answered;
      const Sample before = last[i].value_or(*s);
      // Counters restart at 0 with their process: a drop reads as 0 for that interval.
      const double ops = round == 0 ? 0 : std::max(0.0, s->requests - before.requests) / seconds;
      const double denied = round == 0 ? 0 : std::max(0.0, s->denied - before.denied) / seconds;
      totalOps += ops;
      totalDenied += denied;
      double primaries = 0, backups = 0, syncing = 0;
      for (const auto& [key, n] : s->partitions) {
        (key.rfind("primary/", 0) == 0 ? primaries : backups) += n;
        if (key.find("/complete") == std::string::npos) syncing += n;
      }
      std::snprintf(
          line, sizeof line, "%-22s %10.0f %10.0f %9s %9s %8.0f %8.0f %8.0f %6.0f %4.1fs\n",
          metrics[i].c_str(), ops, denied, quantile(*s, before, 0.5).c_str(),
          quantile(*s, before, 0.99).c_str(), primaries, backups, syncing, s->leader, s->lease);
      view += line;
      last[i] = std::move(s);
    }
    std::snprintf(line, sizeof line, "%-22s %10.0f %10.0f   (%d of %zu members answering)\n",
                  "cluster", totalOps, totalDenied, answered, metrics.size());
    view += line;
    std::fputs(view.c_str(), stdout);
    std::fflush(stdout);
    if (iterations != 0 && round + 1 == iterations) break;
    std::this_thread::sleep_for(interval);  // the refresh interval
  }
  return answered > 0 ? 0 : 1;
}

}  // namespace ingrid::cli
