// NetLab: a network namespace for partition tests, and nft rules that cut links between members.
//
// Layout: one namespace ("ingrid-<pid>-<n>") with its loopback up; member i listens on
// 127.0.0.<i+2> (all of 127/8 is the loopback on Linux) and, listening on one address, dials
// from it too (Transport), so an address identifies a member; test clients stay on 127.0.0.1. A
// cut is an nft rule in the namespace's output chain dropping packets from one member's address
// to another's (and so between their ports), one way or both. The test thread enters the
// namespace (Enter) to reach every member, so the clients it creates there (their threads
// inherit the namespace) do too.
//
// Needs root, iproute2 and nftables; error() says why not otherwise, and the test must skip
// visibly, or fail where required() (as root, or with CI set: there a namespace must work). The
// destructor deletes the namespace (its rules go with it).
//
// Thread safety: one test thread.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ingrid::testing {

class NetLab {
 public:
  static bool required() {
    const char* ci = std::getenv("CI");
    return geteuid() == 0 || (ci != nullptr && *ci != '\0');
  }
  explicit NetLab(int members) {
    static int serial = 0;
    name_ = "ingrid-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
    if (geteuid() != 0) {
      error_ = "network namespaces need root (euid " + std::to_string(geteuid()) + ")";
      return;
    }
    if (!run("ip -V") || !run("nft --version")) {
      error_ = "iproute2 (ip) or nftables (nft) is not installed: " + output_;
      return;
    }
    if (!setUp()) error_ = "cannot set up the namespace: " + output_;
    members_ = members;
  }
  ~NetLab() {
    if (created_) run("ip netns del " + name_);
  }
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // Empty if the lab is usable, else why not.
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  // The command prefix that runs a program in the namespace.
  std::vector<std::string> launcher() const { return {"ip", "netns", "exec", name_}; }
  // Member i's --listen address (ephemeral port).
  std::string listen(int i) const { return address(i) + ":0"; }
  std::string address(int i) const { return "127.0.0." + std::to_string(i + 2); }
  int members() const { return members_; }

  // Drops packets from a to b (and from b to a if `bothWays`). A one-way cut of TCP breaks
  // both directions' connections, as a real one does; it differs from a two-way cut in what
  // each side sees (timeouts versus nothing). Returns false with output() on failure.
  bool cut(int a, int b, bool bothWays = true) {
    cuts_.insert({a, b});
    if (bothWays) cuts_.insert({b, a});
    return apply();
  }
  // Cuts member i from every other member, both ways.
  bool isolate(int i) {
    for (int j = 0; j < members_; ++j) {
      if (j != i) cuts_.insert({i, j}), cuts_.insert({j, i});
    }
    return apply();
  }
  bool heal(int a, int b) {
    cuts_.erase({a, b});
    cuts_.erase({b, a});
    return apply();
  }
  bool healAll() {
    cuts_.clear();
    blackholed_.clear();
    return apply();
  }
  // Drops every packet from `source` (a caller in the namespace, such as 127.0.0.1, which a
  // thread that entered it dials from) to every member: a client blackholed until healAll().
  bool blackhole(const std::string& source) {
    blackholed_.insert(source);
    return apply();
  }
  const std::string& output() const { return output_; }

  // Moves the calling thread into the namespace until destroyed. Threads it creates
  // meanwhile (a client's) stay there.
  class Enter {
   public:
    explicit Enter(const NetLab& lab) {
      home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      const int target = open(("/var/run/netns/" + lab.name()).c_str(), O_RDONLY | O_CLOEXEC);
      entered_ = home_ >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0;
      if (target >= 0) close(target);
    }
    ~Enter() {
      if (entered_) setns(home_, CLONE_NEWNET);
      if (home_ >= 0) close(home_);
    }
    Enter(const Enter&) = delete;
    Enter& operator=(const Enter&) = delete;
    bool entered() const { return entered_; }

   private:
    int home_ = -1;
    bool entered_ = false;
  };

 private:
  bool setUp() {
    if (!run("ip netns add " + name_)) return false;
    created_ = true;
    return run("ip -n " + name_ + " link set lo up") && nft("add table inet ingrid_fault") &&
           nft("'add chain inet ingrid_fault output { type filter hook output priority 0; "
               "policy accept; }'");
  }

  // Rewrites the output chain from cuts_.
  bool apply() {
    if (!nft("flush chain inet ingrid_fault output")) return false;
    for (const auto& [a, b] : cuts_) {
      if (!nft("add rule inet ingrid_fault output ip saddr " + address(a) + " ip daddr " +
               address(b) + " drop")) {
        return false;
      }
    }
    for (const std::string& source : blackholed_) {
      for (int i = 0; i < members_; ++i) {
        if (!nft("add rule inet ingrid_fault output ip saddr " + source + " ip daddr " +
                 address(i) + " drop")) {
          return false;
        }
      }
    }
    return true;
  }

  bool nft(const std::string& command) { return run("ip netns exec " + name_ + " nft " + command); }

  // Runs a shell command; its output (stdout and stderr) goes to output_.
  bool run(const std::string& command) {
    output_.clear();
    FILE* f = popen((command + " 2>&1").c_str(), "r");
    if (!f) {
      output_ = "popen failed: " + command;
      return false;
    }
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) output_ += buf;
    const int status = pclose(f);
    if (status != 0) output_ = command + ": " + output_;
    return status == 0;
  }

  std::string name_;
  std::string error_;
  std::string output_;
  bool created_ = false;
  int members_ = 0;
  std::set<std::pair<int, int>> cuts_;  // (from, to) pairs dropped
  std::set<std::string> blackholed_;    // sources dropped to every member
};

}  // namespace ingrid::testing
