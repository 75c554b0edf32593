// Drives HTTP load through several http_rate_limit_server processes, round robin as a load
// balancer would, and reports what came back per key and per 100 ms (scripts/demo.sh runs it).
//
//   http_load_driver --target HOST:PORT [--target ...] --csv FILE [--keys N] [--rate R]
//                    [--seconds S] [--capacity C] [--hold I@T]
//
// One thread per key (demo-0 .. demo-<N-1>, default 24) sends GET /?key=... R times a second
// (default 50), each request to the next target in turn. A request whose target refuses the
// connection, or cuts it off without an answer, goes to the next target. The run lasts S seconds
// (default 20) and then, at most S more, until every key has been answered 429 once.
// --hold I@T: at T seconds, stop sending to target I (counting from 0) and wait until it has
// answered what it was sent, print "held I at_ms N", and send its share to the others until
// SIGUSR2 (at most 10 s later). Killing I in between cuts off no answer: a grant whose answer
// dies with the process is an unknown outcome to any client, so the exact count would not be.
//
// Writes FILE: "t_s,ok,limited,failed" per 100 ms (answers 200 and 429 by when they arrived,
// and failed attempts: no answer, or a 5xx). Prints "start_epoch_ms N", then per key
// "key NAME ok N limited N cut_off N unanswered N outage_ms N" (outage: the longest time from a
// request that failed or took over 1 s to the next answer), and one "result ..." line.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr long kSlowMs = 1000;  // an answer slower than this counts as an outage

struct Options {
  std::vector<std::string> targets;
  std::string csv;
  int keys = 24, rate = 50, seconds = 20, holdTarget = -1, holdAtMs = 0;
  long long capacity = 0;
};

struct KeyStats {
  long long ok = 0, limited = 0, cutOff = 0, unanswered = 0;
  long maxOutageMs = 0;
  long badSinceMs = -1;  // start of the first failed or slow request not yet followed by an answer
};

struct Run {
  Options o;
  Clock::time_point start = Clock::now();
  std::vector<std::atomic<int>> ok, limited, failed;  // per 100 ms
  std::vector<std::atomic<int>> inFlight;             // per target
  std::vector<std::atomic<bool>> held;                // per target
  std::atomic<int> limitedKeys{0};
  explicit Run(Options opt)
      : o(std::move(opt)),
        ok(o.seconds * 20 + 200),
        limited(ok.size()),
        failed(ok.size()),
        inFlight(o.targets.size()),
        held(o.targets.size()) {}
  long ms() const {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  }
  void count(std::vector<std::atomic<int>>& series) {
    series[std::min<std::size_t>(ms() / 100, series.size() - 1)]++;
  }
  bool over() const {
    const long t = ms();
    return t >= o.seconds * 1000L && (limitedKeys == o.keys || t >= o.seconds * 2000L);
  }
};

// Sends one request for `key` starting at target `first`, trying the others in turn.
// Returns the HTTP status, or 0 if no target answered.
int sendOnce(Run& run, std::vector<std::unique_ptr<httplib::Client>>& clients,
             const std::string& path, std::size_t first, KeyStats& stats) {
  const std::size_t n = clients.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t t = (first + i) % n;
    run.inFlight[t]++;
    if (run.held[t]) {
      run.inFlight[t]--;
      continue;
    }
    auto res = clients[t]->Get(path.c_str());
    run.inFlight[t]--;
    if (res && res->status < 500) return res->status;
    run.count(run.failed);
    if (res) return res->status;  // the cluster answered with an error: not sent again
    // Refused: never sent. Anything else was sent and may have run: counted as cut off.
    if (res.error() != httplib::Error::Connection) stats.cutOff++;
  }
  return 0;
}

void driveKey(Run& run, int key, KeyStats& stats) {
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (const auto& t : run.o.targets) {
    clients.push_back(std::make_unique<httplib::Client>("http://" + t));
    clients.back()->set_keep_alive(true);
    clients.back()->set_tcp_nodelay(true);
    clients.back()->set_connection_timeout(std::chrono::seconds(1));
    clients.back()->set_read_timeout(std::chrono::seconds(10));  // past the node's 5 s deadline
  }
  const std::string path = "/?key=demo-" + std::to_string(key);
  const auto interval = std::chrono::microseconds(1'000'000 / run.o.rate);
  auto next = Clock::now();
  bool sawLimit = false;
  for (std::size_t seq = static_cast<std::size_t>(key); !run.over(); ++seq) {
    next = std::max(next + interval, Clock::now() - interval);  // no burst to catch up
    std::this_thread::sleep_until(next);
    const long began = run.ms();
    const int status = sendOnce(run, clients, path, seq % clients.size(), stats);
    const long ended = run.ms();
    const bool answered = status == 200 || status == 429;
    if (status == 200) {
      stats.ok++;
      run.count(run.ok);
    } else if (status == 429) {
      stats.limited++;
      run.count(run.limited);
      if (!sawLimit) run.limitedKeys++;
      sawLimit = true;
    } else {
      stats.unanswered++;
    }
    if ((!answered || ended - began > kSlowMs) && stats.badSinceMs < 0) stats.badSinceMs = began;
    if (answered && stats.badSinceMs >= 0) {
      stats.maxOutageMs = std::max(stats.maxOutageMs, ended - stats.badSinceMs);
      stats.badSinceMs = -1;
    }
  }
}

// --hold: stop sending to the target, wait for its answers, then resume on SIGUSR2 or after 10 s.
void hold(Run& run, const sigset_t& release) {
  std::this_thread::sleep_until(run.start + std::chrono::milliseconds(run.o.holdAtMs));
  const auto t = static_cast<std::size_t>(run.o.holdTarget);
  run.held[t] = true;
  for (int i = 0; i < 10000 && run.inFlight[t] > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("held %zu at_ms %ld\n", t, run.ms());
  std::fflush(stdout);
  const timespec tenSeconds{10, 0};
  sigtimedwait(&release, nullptr, &tenSeconds);
  run.held[t] = false;
  std::printf("released %zu at_ms %ld\n", t, run.ms());
  std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--target")
      o.targets.push_back(value);
    else if (flag == "--csv")
      o.csv = value;
    else if (flag == "--keys")
      o.keys = std::atoi(value.c_str());
    else if (flag == "--rate")
      o.rate = std::atoi(value.c_str());
    else if (flag == "--seconds")
      o.seconds = std::atoi(value.c_str());
    else if (flag == "--capacity")
      o.capacity = std::atoll(value.c_str());
    else if (flag == "--hold" && value.find('@') != std::string::npos) {
      o.holdTarget = std::atoi(value.c_str());
      o.holdAtMs = static_cast<int>(std::atof(value.c_str() + value.find('@') + 1) * 1000);
    } else
      return false;
  }
  return argc % 2 == 1 && !o.targets.empty() && !o.csv.empty() && o.keys > 0 && o.keys <= 1000 &&
         o.rate > 0 && o.rate <= 10000 && o.seconds > 0 && o.seconds <= 3600 &&
         o.holdTarget < static_cast<int>(o.targets.size()) && o.holdAtMs >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: http_load_driver --target HOST:PORT [--target ...] --csv FILE "
                 "[--keys N<=1000] [--rate PER_KEY_PER_S] [--seconds S] [--capacity C] "
                 "[--hold TARGET_INDEX@SECONDS]\n");
    return 2;
  }
  // SIGUSR2 is taken by sigtimedwait in hold(): blocked before any thread starts.
  sigset_t release;
  sigemptyset(&release);
  sigaddset(&release, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &release, nullptr);

  Run run(options);
  std::printf("start_epoch_ms %lld\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count()));
  std::fflush(stdout);
  std::vector<KeyStats> stats(static_cast<std::size_t>(options.keys));
  std::vector<std::thread> threads;
  for (int k = 0; k < options.keys; ++k) {
    threads.emplace_back(driveKey, std::ref(run), k, std::ref(stats[static_cast<std::size_t>(k)]));
  }
  if (options.holdTarget >= 0) hold(run, release);
  for (auto& t : threads) t.join();
  const long endedMs = run.ms();

  std::FILE* csv = std::fopen(options.csv.c_str(), "w");
  if (!csv) {
    std::fprintf(stderr, "cannot write %s\n", options.csv.c_str());
    return 1;
  }
  std::fprintf(csv, "t_s,ok,limited,failed\n");
  for (std::size_t i = 0; i < static_cast<std::size_t>(endedMs / 100) && i < run.ok.size(); ++i) {
    std::fprintf(csv, "%.1f,%d,%d,%d\n", static_cast<double>(i) / 10, run.ok[i].load(),
                 run.limited[i].load(), run.failed[i].load());
  }
  std::fclose(csv);

  long long grants = 0, exact = 0, cutOff = 0, failedAttempts = 0, outageKeys = 0, unresolved = 0;
  long maxOutage = 0;
  for (int k = 0; k < options.keys; ++k) {
    const KeyStats& s = stats[static_cast<std::size_t>(k)];
    std::printf("key demo-%d ok %lld limited %lld cut_off %lld unanswered %lld outage_ms %ld\n", k,
                s.ok, s.limited, s.cutOff, s.unanswered, s.maxOutageMs);
    grants += s.ok;
    exact += s.ok == options.capacity;
    cutOff += s.cutOff;
    outageKeys += s.maxOutageMs > 0;
    unresolved += s.badSinceMs >= 0;
    maxOutage = std::max(maxOutage, s.maxOutageMs);
  }
  for (const auto& f : run.failed) failedAttempts += f;
  std::printf(
      "result seconds %.1f keys %d capacity %lld exact_keys %lld grants %lld cut_off %lld "
      "failed_attempts %lld outage_keys %lld max_outage_ms %ld unresolved_keys %lld\n",
      static_cast<double>(endedMs) / 1000, options.keys, options.capacity, exact, grants, cutOff,
      failedAttempts, outageKeys, maxOutage, unresolved);
  return 0;
}
