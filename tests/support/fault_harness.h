// FaultCluster: N `ingrid-node` processes for fault-injection tests: start them (the first
// bootstraps, the others join through it), pause (SIGSTOP), resume (SIGCONT) or kill -9 one,
// tell a crash (a signal nobody sent) from a kill, and read each one's latest logged topology.
//
// Every wait takes a limit; nothing sleeps in place of a condition. Each process's stdout and
// stderr go to one pipe that a reader thread drains into the process's log, so a node never
// blocks on a full pipe and the latest topology line is known without waiting.
//
// Thread safety: FaultCluster and NodeProcess are driven by one test thread (the one that
// created them: a child's parent-death signal is tied to it). NodeProcess's log accessors are
// safe from any thread.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingrid/client.h>

#include "cluster/transport/messages.h"
#include "support/eventually.h"

extern char** environ;

namespace ingrid::testing {

using FaultClock = std::chrono::steady_clock;

// One "ingrid-node: topology vV: N members [ID@ADDR, ...], coordinator C, member S is primary of
// P partitions" line (cluster/ingrid_node.cpp), parsed.
struct TopologyLine {
  std::uint64_t version = 0;
  std::vector<std::pair<std::uint64_t, std::string>> members;  // (id, address), as logged
  std::uint64_t coordinator = 0;
  std::uint64_t self = 0;
  std::string text;  // the line itself

  // Same version and same members: two processes that agree on the topology.
  bool agreesWith(const TopologyLine& o) const {
    return version == o.version && members == o.members;
  }
  std::set<std::string> addresses() const {
    std::set<std::string> out;
    for (const auto& m : members) out.insert(m.second);
    return out;
  }
};

// nullopt if `line` is not a topology line.
inline std::optional<TopologyLine> parseTopologyLine(const std::string& line) {
  static constexpr std::string_view kMark = "ingrid-node: topology v";
  const auto at = line.find(kMark);
  if (at == std::string::npos) return std::nullopt;
  TopologyLine t;
  t.text = line;
  const char* p = line.c_str() + at + kMark.size();
  char* end = nullptr;
  t.version = std::strtoull(p, &end, 10);
  const auto open = line.find('[', at);
  const auto close = line.find(']', open == std::string::npos ? at : open);
  if (end == p || open == std::string::npos || close == std::string::npos) return std::nullopt;
  // "1@127.0.0.1:4000, 2@127.0.0.1:4001"; at debug level each is followed by " (N primaries)".
  const std::string list = line.substr(open + 1, close - open - 1);
  for (std::size_t from = 0; from < list.size();) {
    auto comma = list.find(", ", from);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(from, comma - from);
    if (const auto space = item.find(' '); space != std::string::npos) item.resize(space);
    if (const auto atSign = item.find('@'); atSign != std::string::npos) {
      t.members.emplace_back(std::strtoull(item.c_str(), nullptr, 10), item.substr(atSign + 1));
    }
    from = comma + 2;
  }
  if (const auto c = line.find("coordinator ", close); c != std::string::npos) {
    t.coordinator = std::strtoull(line.c_str() + c + 12, nullptr, 10);
  }
  if (const auto s = line.find("member ", close); s != std::string::npos) {
    t.self = std::strtoull(line.c_str() + s + 7, nullptr, 10);
  }
  return t;
}

// "killed by signal 11 (Segmentation fault)" / "exited with status 1" for a waitpid status.
inline std::string describeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

// One child process with its stdout and stderr on a pipe drained into a log of lines.
class NodeProcess {
 public:
  // Runs `launcher` (e.g. {"ip", "netns", "exec", NAME}; may be empty) then `program` `args`.
  NodeProcess(const std::vector<std::string>& launcher, const std::string& program,
              const std::vector<std::string>& args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    // SIGKILL to the child if this thread dies first (setpriv, from util-linux), so a crashed
    // test leaves no node holding CTest's pipe. `ip netns exec` execs in place: same pid.
    static constexpr const char* kSetpriv = "/usr/bin/setpriv";
    std::vector<std::string> all;
    if (access(kSetpriv, X_OK) == 0) all = {kSetpriv, "--pdeathsig", "KILL", "--"};
    all.insert(all.end(), launcher.begin(), launcher.end());
    all.push_back(program);
    all.insert(all.end(), args.begin(), args.end());
    command_ = join(all);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, all.front().c_str(), &actions, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
    if (pid_ > 0) reader_ = std::thread([this] { drain(); });
  }
  ~NodeProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);  // also ends a stopped process
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    stopReader_ = true;
    if (reader_.joinable()) reader_.join();
    if (out_ >= 0) close(out_);
  }
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& command() const { return command_; }

  // Fault injection. pause() is SIGSTOP, resume() SIGCONT, kill9() SIGKILL (and reaps it).
  // SIGSTOP is delivered asynchronously: pause() returns once every thread of the process is
  // stopped (bounded by 5 s, and said on stderr if not), so nothing the test does after it can
  // still be served by the paused process.
  void pause() {
    ::kill(pid_, SIGSTOP);
    paused_ = true;
    if (!testing::eventually([this] { return allThreadsStopped(); }, std::chrono::seconds(5))) {
      std::fprintf(stderr, "fault harness: pid %d not stopped 5 s after SIGSTOP\n",
                   static_cast<int>(pid_));
    }
  }
  void resume() {
    ::kill(pid_, SIGCONT);
    paused_ = false;
  }
  void kill9() {
    killedOnPurpose_ = true;
    ::kill(pid_, SIGKILL);
    waitExit(std::chrono::seconds(10));
  }
  void terminate() { ::kill(pid_, SIGTERM); }
  // SIGTERM, then waits up to `limit` for the member to leave and exit: the wait status, or
  // nullopt if it still runs. An exit with status 0 is then no crash.
  std::optional<int> leave(std::chrono::milliseconds limit) {
    terminate();
    const auto status = waitExit(limit);
    if (status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) killedOnPurpose_ = true;
    return status;
  }
  bool paused() const { return paused_; }
  bool killedOnPurpose() const { return killedOnPurpose_; }

  // Whether the process still runs (paused counts as running). Never blocks.
  bool alive() {
    poll();
    return !status_.has_value();
  }
  // nullopt while it runs; else how it ended ("killed by signal 11 (Segmentation fault)").
  std::optional<std::string> ended() {
    poll();
    if (!status_) return std::nullopt;
    return describeExit(*status_);
  }
  // How it ended if it ended without being killed on purpose: a crash or an unexpected exit.
  std::optional<std::string> crash() {
    if (killedOnPurpose_) return std::nullopt;
    return ended();
  }
  // The wait status once it exits, or nullopt at the limit.
  std::optional<int> waitExit(std::chrono::milliseconds limit) {
    const auto deadline = FaultClock::now() + limit;
    for (;;) {
      poll();
      if (status_ || FaultClock::now() >= deadline) return status_;
      std::unique_lock lock(mu_);  // woken early by the pipe's EOF
      changed_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }

  // The first logged line at index >= `from` containing `needle`, waiting up to `limit`.
  std::optional<std::string> waitForLine(const std::string& needle, std::chrono::milliseconds limit,
                                         std::size_t from = 0) {
    std::unique_lock lock(mu_);
    std::optional<std::string> found;
    changed_.wait_for(lock, limit, [&] {
      for (std::size_t i = from; i < lines_.size(); ++i) {
        if (lines_[i].find(needle) != std::string::npos) {
          found = lines_[i];
          return true;
        }
      }
      return eof_;
    });
    return found;
  }
  // Lines logged so far (an index for waitForLine's `from`).
  std::size_t lineCount() const {
    std::lock_guard lock(mu_);
    return lines_.size();
  }
  std::optional<TopologyLine> latestTopology() const {
    std::lock_guard lock(mu_);
    return latest_;
  }
  // Every line, each prefixed with the seconds since `begin` at which it was read, for a log
  // kept after a failure (ingrid-node's own lines carry no time).
  std::string timedLog(FaultClock::time_point begin) const {
    std::lock_guard lock(mu_);
    std::string out;
    char stamp[32];
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      std::snprintf(stamp, sizeof stamp, "[%9.3f] ",
                    std::chrono::duration<double>(readAt_[i] - begin).count());
      out += stamp + lines_[i] + "\n";
    }
    return out;
  }
  // The last `n` lines, for a failure message.
  std::string tail(std::size_t n = 8) const {
    std::lock_guard lock(mu_);
    std::string out;
    for (std::size_t i = lines_.size() > n ? lines_.size() - n : 0; i < lines_.size(); ++i) {
      out += "    " + lines_[i] + "\n";
    }
    return out;
  }

  // Filled in by FaultCluster from the "member ID listening on ADDR" line.
  std::uint64_t memberId = 0;
  std::string address;

 private:
  // True once every task of the process is in the stopped state ('T' in /proc/PID/task/*/stat).
  bool allThreadsStopped() const {
    const std::string dir = "/proc/" + std::to_string(pid_) + "/task";
    DIR* tasks = ::opendir(dir.c_str());
    if (tasks == nullptr) return true;  // gone: nothing left to serve
    bool stopped = true;
    while (const dirent* e = ::readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      std::FILE* f = std::fopen((dir + "/" + e->d_name + "/stat").c_str(), "r");
      if (f == nullptr) continue;  // the task ended meanwhile
      char buf[512] = {};
      const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      // "tid (comm) S ...": the state follows the last ')' (comm may hold one).
      const char* close = std::strrchr(buf, ')');
      if (n == 0 || close == nullptr || close[1] != ' ' || close[2] != 'T') {
        stopped = false;
        break;
      }
    }
    ::closedir(tasks);
    return stopped;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
    return out;
  }
  void poll() {
    if (status_ || pid_ <= 0) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
  }
  // Reader thread: splits the pipe into lines until EOF or destruction.
  void drain() {
    std::string buffer;
    while (!stopReader_) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      std::lock_guard lock(mu_);
      for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
        lines_.push_back(buffer.substr(0, nl));
        readAt_.push_back(FaultClock::now());
        buffer.erase(0, nl + 1);
        if (auto t = parseTopologyLine(lines_.back())) latest_ = std::move(t);
      }
      changed_.notify_all();
    }
    std::lock_guard lock(mu_);
    eof_ = true;
    changed_.notify_all();
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string command_;
  std::optional<int> status_;  // waitpid status once reaped
  bool paused_ = false;
  bool killedOnPurpose_ = false;
  std::atomic<bool> stopReader_{false};
  std::thread reader_;
  mutable std::mutex mu_;  // guards lines_, latest_, eof_
  std::condition_variable changed_;
  std::vector<std::string> lines_;
  std::vector<FaultClock::time_point> readAt_;  // when each of lines_ was read
  std::optional<TopologyLine> latest_;
  bool eof_ = false;
};

struct FaultClusterOptions {
  // Processes to start. Default: 3.
  int members = 3;
  // Flags of every process besides --listen and --seed.
  std::vector<std::string> args = {
      "--partitions", "64", "--workers", "1", "--backups", "1", "--failure-timeout-ms", "2000"};
  // Prefix of each process's command line, e.g. {"ip", "netns", "exec", NAME}. Default: none.
  std::vector<std::string> launcher = {};
  // Per member: a prefix that replaces `launcher` for member i (one namespace each, say).
  std::vector<std::vector<std::string>> launchers = {};
  // --listen of member i (port 0: ephemeral). Default: 127.0.0.1:0 for all.
  std::vector<std::string> listen = {};
  // Per member: flags appended to member i's (its own --data-dir, say). Default: none.
  std::vector<std::vector<std::string>> memberArgs = {};
  // Limit for each process to print "listening on", and for the first settled topology.
  std::chrono::milliseconds startLimit{30000};
  std::string program = INGRID_NODE_PATH;
};

// What waitConverged found: whether the live members agree, how long it took, and if not, each
// process's latest topology line.
struct Convergence {
  bool converged = false;
  std::chrono::milliseconds took{0};
  std::uint64_t version = 0;
  std::string detail;  // each process's state and latest topology line
};

class FaultCluster {
 public:
  explicit FaultCluster(FaultClusterOptions options) : options_(std::move(options)) {}
  ~FaultCluster() {
    if (probe_) probe_->stop();
    for (auto& p : procs_) {
      if (p->paused()) p->resume();
    }
  }
  FaultCluster(const FaultCluster&) = delete;
  FaultCluster& operator=(const FaultCluster&) = delete;

  // Starts the processes one after another and waits until every one has logged the same
  // settled topology with all of them. Empty on success, else what went wrong.
  std::string start() {
    for (int i = 0; i < options_.members; ++i) {
      if (std::string failed =
              launch(i == 0 ? std::string() : procs_.front()->address, static_cast<std::size_t>(i));
          !failed.empty()) {
        return failed;
      }
    }
    return startProbe();
  }

 private:
  // The probe client, then the first settled topology with every process.
  std::string startProbe() {
    ClientOptions c;
    c.seeds = addresses();
    c.requestTimeout = std::chrono::milliseconds(1000);
    c.connectTimeout = std::chrono::milliseconds(5000);
    probe_ = std::make_unique<Client>(c);
    if (auto started = probe_->start(); !started) {
      return "probe client: " + started.error().message();
    }
    Convergence c0 = waitConverged(static_cast<std::size_t>(options_.members), options_.startLimit);
    if (!c0.converged) return "the cluster did not settle:\n" + c0.detail;
    // And every member chosen to vote votes: until its promotion, a young cluster survives fewer
    // losses than it will (3 members with one voter lose their quorum with the leader).
    const std::size_t wanted = wantedVoters();
    std::size_t voters = 0;
    if (!testing::eventually(
            [&] {
              const int leader = leaderIndex();
              if (leader < 0) return false;
              auto st = probe_->statusOf(procs_[static_cast<std::size_t>(leader)]->address);
              voters = st ? st->voters.size() : 0;
              return voters == wanted;
            },
            options_.startLimit)) {
      return "the control plane's leader counts " + std::to_string(voters) + " voters, not " +
             std::to_string(wanted);
    }
    return {};
  }

  // How many members vote once all options_.members are in: --voters (default 5) at most, an
  // even count from 4 up rounded down to odd (votersOf).
  std::size_t wantedVoters() const {
    std::size_t most = 5;
    for (std::size_t i = 0; i + 1 < options_.args.size(); ++i) {
      if (options_.args[i] == "--voters") most = std::stoul(options_.args[i + 1]);
    }
    std::size_t wanted = std::min<std::size_t>(most, static_cast<std::size_t>(options_.members));
    if (wanted > 3 && wanted % 2 == 0) --wanted;
    return wanted;
  }

 public:
  // Starts every process at once, each with options_.args and no --seed (they find each other
  // through their own flags, --seed-dns say), then waits as start() does. Empty on success, else
  // what went wrong.
  std::string startAtOnce() {
    for (int i = 0; i < options_.members; ++i) spawn(std::string(), static_cast<std::size_t>(i));
    for (auto& p : procs_) {
      if (std::string failed = awaitListening(*p); !failed.empty()) return failed;
    }
    return startProbe();
  }

  // The index of the process that leads the control plane (by its own status), or -1.
  int leaderIndex() {
    for (std::size_t i = 0; i < procs_.size(); ++i) {
      if (!procs_[i]->alive() || procs_[i]->paused()) continue;
      auto s = probe_->statusOf(procs_[i]->address);
      if (s && s->isLeader) return static_cast<int>(i);
    }
    return -1;
  }

  // Starts one more process, joining through `seed` (a live member's address, or several
  // separated by commas). Returns once it logged "listening on": it is a member, and its
  // snapshots may still be under way. Empty on success, else what went wrong. The new process
  // is number size() before the call; its launcher and --listen are those of process `slot`
  // (default: its own number), so a restart can take a dead process's place on its host.
  std::string add(const std::string& seed) { return launch(seed, procs_.size()); }
  std::string add(const std::string& seed, std::size_t slot) { return launch(seed, slot); }

  // Starts process i again once it has ended, at the address it had (the same port) and with its
  // flags and launcher, joining through `seed`; the new process takes number i. Empty on success,
  // else what went wrong.
  // Does not wait: awaitStarted(i) does (processes restarted together may need each other).
  std::string restart(std::size_t i, const std::string& seed) {
    NodeProcess& old = *procs_.at(i);
    if (old.alive()) return "process " + std::to_string(i) + " still runs";
    const std::string address = old.address;
    if (std::string failed = spawn(seed, i, address); !failed.empty()) return failed;
    std::swap(procs_.at(i), procs_.back());
    procs_.pop_back();
    return {};
  }
  // Waits for process i to say it is a member ("listening on"), as add() does.
  std::string awaitStarted(std::size_t i) { return awaitListening(*procs_.at(i)); }

  std::size_t size() const { return procs_.size(); }
  NodeProcess& operator[](std::size_t i) { return *procs_.at(i); }
  // Every process's listen address, in start order: the seeds for a client.
  std::vector<std::string> addresses() const {
    std::vector<std::string> out;
    for (const auto& p : procs_) out.push_back(p->address);
    return out;
  }

  // A SIGSTOP of member i for `d`, then SIGCONT: the injected fault (the sleep is the fault).
  void pauseFor(std::size_t i, std::chrono::milliseconds d) {
    procs_.at(i)->pause();
    std::this_thread::sleep_for(d);
    procs_.at(i)->resume();
  }

  // "member 2 (pid 123): killed by signal 11 (Segmentation fault)" for each process that ended
  // without kill9(); empty if none did.
  std::vector<std::string> crashes() {
    std::vector<std::string> out;
    for (auto& p : procs_) {
      if (auto c = p->crash()) {
        out.push_back("member " + std::to_string(p->memberId) + " (pid " +
                      std::to_string(p->pid()) + ", " + p->address + "): " + *c + "\n" +
                      p->tail(12));
      }
    }
    return out;
  }

  // Waits up to `limit` until every live, unpaused process agrees (same version and members in
  // its latest topology line), the topology lists `expected` members (0: as many as there are
  // live processes), their addresses are exactly the live processes' (the members that were
  // paused count as live once resumed), and each reports no replica still syncing.
  Convergence waitConverged(std::size_t expected, std::chrono::milliseconds limit) {
    const auto begin = FaultClock::now();
    const auto deadline = begin + limit;
    Convergence out;
    for (;;) {
      std::string why;
      if (convergedNow(expected, out.version, why)) {
        out.converged = true;
        break;
      }
      if (FaultClock::now() >= deadline) {
        out.detail = "not converged: " + why + "\n" + describe();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
    }
    out.took = std::chrono::duration_cast<std::chrono::milliseconds>(FaultClock::now() - begin);
    return out;
  }

  // Each process: id, pid, address, state, latest topology line.
  std::string describe() {
    std::string out;
    for (std::size_t i = 0; i < procs_.size(); ++i) {
      NodeProcess& p = *procs_[i];
      const auto ended = p.ended();
      const auto t = p.latestTopology();
      out += "  [" + std::to_string(i) + "] member " + std::to_string(p.memberId) + " pid " +
             std::to_string(p.pid()) + " " + p.address + " " +
             (ended        ? *ended
              : p.paused() ? "paused"
                           : "running") +
             ": " + (t ? t->text : std::string("(no topology line)")) + "\n";
      if (const char* verbose = std::getenv("INGRID_FAULT_VERBOSE"); verbose && *verbose) {
        out += p.tail(12);
      }
    }
    return out;
  }

 private:
  // Starts process number procs_.size() with the --listen and launcher of process `i` (from the
  // options), joining through `seed` unless it is empty, and waits for its "listening on" line.
  std::string launch(const std::string& seed, std::size_t i) {
    if (std::string failed = spawn(seed, i); !failed.empty()) return failed;
    return awaitListening(*procs_.back());
  }
  // Starts process procs_.size() with the --listen and launcher of process `i`, joining through
  // `seed` (none: as options_.args say).
  // `listen`, if given, replaces member i's --listen.
  std::string spawn(const std::string& seed, std::size_t i, const std::string& listen = {}) {
    std::vector<std::string> args = options_.args;
    args.insert(args.end(), {"--listen", !listen.empty()              ? listen
                                         : i < options_.listen.size() ? options_.listen[i]
                                                                      : "127.0.0.1:0"});
    if (i < options_.memberArgs.size()) {
      args.insert(args.end(), options_.memberArgs[i].begin(), options_.memberArgs[i].end());
    }
    if (!seed.empty()) args.insert(args.end(), {"--seed", seed});
    const auto& launcher =
        i < options_.launchers.size() ? options_.launchers[i] : options_.launcher;
    procs_.push_back(std::make_unique<NodeProcess>(launcher, options_.program, args));
    if (!procs_.back()->started()) return "cannot start: " + procs_.back()->command();
    return {};
  }
  // Waits for p's "listening on" line (it is a member), and notes its address and id.
  std::string awaitListening(NodeProcess& p) {
    if (!p.started()) return "cannot start: " + p.command();
    auto line = p.waitForLine("listening on", options_.startLimit);
    if (!line) return "no 'listening on' from " + p.command() + "\n" + p.tail();
    p.address = line->substr(line->rfind(' ') + 1);
    const auto m = line->find("member ");
    if (m != std::string::npos) p.memberId = std::strtoull(line->c_str() + m + 7, nullptr, 10);
    return {};
  }

  bool convergedNow(std::size_t expected, std::uint64_t& version, std::string& why) {
    std::optional<TopologyLine> agreed;
    std::set<std::string> live;
    for (auto& p : procs_) {
      if (!p->alive() || p->paused()) continue;
      live.insert(p->address);
      const auto t = p->latestTopology();
      if (!t) {
        why = p->address + " logged no topology";
        return false;
      }
      if (!agreed) {
        agreed = t;
      } else if (!agreed->agreesWith(*t)) {
        why = "members disagree (v" + std::to_string(agreed->version) + " with " +
              std::to_string(agreed->members.size()) + " members vs v" +
              std::to_string(t->version) + " with " + std::to_string(t->members.size()) + ")";
        return false;
      }
    }
    if (!agreed) {
      why = "no live process";
      return false;
    }
    const std::size_t want = expected == 0 ? live.size() : expected;
    if (agreed->members.size() != want || agreed->addresses() != live) {
      why = "v" + std::to_string(agreed->version) + " lists " +
            std::to_string(agreed->members.size()) + " members, want " + std::to_string(want) +
            " at the live addresses";
      return false;
    }
    // The log line does not show migrations; each member's own topology does.
    for (const auto& address : live) {
      auto t = probe_->topologyOf(address);
      if (!t) {
        why = address + ": " + t.error().message();
        return false;
      }
      if (t->version != agreed->version || !t->syncing.empty()) {
        why = address + " reports v" + std::to_string(t->version) + " with " +
              std::to_string(t->syncing.size()) + " replicas syncing";
        return false;
      }
    }
    version = agreed->version;
    return true;
  }

  FaultClusterOptions options_;
  std::vector<std::unique_ptr<NodeProcess>> procs_;
  std::unique_ptr<Client> probe_;  // asks members for their topology (syncing replicas)
};

// Member `address`'s own view: it knows no leader and holds no primary lease (its writes have
// stopped: a lost quorum).
inline bool writesStopped(const std::string& address) {
  ClientOptions o;
  o.seeds = {address};
  o.requestTimeout = std::chrono::milliseconds(1000);
  Client probe(o);
  if (!probe.start()) return false;
  auto s = probe.statusOf(address);
  return s && s->leader == 0 && !s->isLeader && s->leaseLeftMs <= 0;
}

}  // namespace ingrid::testing
