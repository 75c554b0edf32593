// ChildProcess: runs a program with its stdout on a pipe, for multi-process tests. Reads lines
// with a deadline; kill()/terminate() and wait() with a deadline. POSIX (and Linux's
// parent-death signal, through util-linux's setpriv when present).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ingrid::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    // The child gets SIGKILL if this process dies first (setpriv, from util-linux, execs the
    // program with that parent-death signal): a test that crashes must not leave children that
    // hold CTest's output pipe open until the test's timeout.
    static constexpr const char* kSetpriv = "/usr/bin/setpriv";
    std::vector<std::string> all;
    if (access(kSetpriv, X_OK) == 0) all = {kSetpriv, "--pdeathsig", "KILL", "--"};
    all.push_back(program);
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, all.front().c_str(), &actions, nullptr, argv.data(), environ) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) close(out_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // The next line of the child's stdout containing `needle`, or nullopt at the deadline/EOF.
  std::optional<std::string> waitForLine(const std::string& needle,
                                         std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.find(needle) != std::string::npos) return line;
        passed_.push_back(std::move(line));
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // Like waitForLine, but a line that an earlier waitForLine passed over counts too: for lines
  // whose order against other output is not fixed (a topology change logged by the network
  // thread before the main thread's "listening on", under load).
  std::optional<std::string> waitForLineEver(const std::string& needle,
                                             std::chrono::milliseconds limit) {
    for (const auto& line : passed_) {
      if (line.find(needle) != std::string::npos) return line;
    }
    return waitForLine(needle, limit);
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // The exit status (as from waitpid) once the child exits, or nullopt at the deadline.
  std::optional<int> wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool exited_ = false;
  std::string buffer_;
  std::vector<std::string> passed_;  // lines waitForLine read past
};

}  // namespace ingrid::testing
