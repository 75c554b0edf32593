// NetLab: network namespaces for partition tests, and nft rules that cut links between members.
//
// Layout: one namespace per member ("ingrid-<pid>-<n>-m<i>", member i at 10.77.<i+1>.2) behind a
// router namespace ("ingrid-<pid>-<n>", 10.77.<i+1>.1 on a veth to each member) that forwards
// between them; a cut is an nft rule in the router's forward chain dropping (a -> b) or both
// ways. Why not one namespace with rules on ports: a member dials another from an ephemeral
// port, so a port pair cannot say which member sent a packet; an address per member can.
// The test thread enters the router namespace (Enter) to reach every member, so the clients it
// creates there (their threads inherit the namespace) do too.
//
// Needs root, iproute2 and nftables; error() says why not otherwise, and the test must skip
// visibly. The destructor deletes the namespaces (their veths and rules go with them).
//
// Thread safety: one test thread.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ingrid::testing {

class NetLab {
 public:
  explicit NetLab(int members) {
    static int serial = 0;
    router_ = "ingrid-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
    if (geteuid() != 0) {
      error_ = "network namespaces need root (euid " + std::to_string(geteuid()) + ")";
      return;
    }
    if (!run("ip -V") || !run("nft --version")) {
      error_ = "iproute2 (ip) or nftables (nft) is not installed: " + output_;
      return;
    }
    if (!setUp(members)) error_ = "cannot set up the namespaces: " + output_;
  }
  ~NetLab() {
    for (const auto& ns : created_) run("ip netns del " + ns);
  }
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // Empty if the lab is usable, else why not.
  const std::string& error() const { return error_; }
  const std::string& router() const { return router_; }
  // The command prefix that runs a program in member i's namespace.
  std::vector<std::string> launcher(int i) const { return {"ip", "netns", "exec", member(i)}; }
  // Member i's --listen address (ephemeral port).
  std::string listen(int i) const { return address(i) + ":0"; }
  std::string address(int i) const { return "10.77." + std::to_string(i + 1) + ".2"; }

  // Drops packets from a to b (and from b to a if `bothWays`). A one-way cut of TCP breaks
  // both directions' connections, as a real one does; it differs from a two-way cut in what
  // each side sees (timeouts versus nothing). Returns false with output() on failure.
  bool cut(int a, int b, bool bothWays = true) {
    cuts_.insert({a, b});
    if (bothWays) cuts_.insert({b, a});
    return apply();
  }
  // Cuts member i from every other of `members`, both ways.
  bool isolate(int i, int members) {
    for (int j = 0; j < members; ++j) {
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
    return apply();
  }
  const std::string& output() const { return output_; }

  // Moves the calling thread into the router namespace until destroyed. Threads it creates
  // meanwhile (a client's) stay there.
  class Enter {
   public:
    explicit Enter(const NetLab& lab) {
      home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      const int target = open(("/var/run/netns/" + lab.router()).c_str(), O_RDONLY | O_CLOEXEC);
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
  std::string member(int i) const { return router_ + "-m" + std::to_string(i); }

  bool setUp(int members) {
    if (!addNamespace(router_)) return false;
    const std::string r = "ip -n " + router_ + " ";
    if (!run(r + "link set lo up") ||
        !run("ip netns exec " + router_ + " sysctl -qw net.ipv4.ip_forward=1")) {
      return false;
    }
    for (int i = 0; i < members; ++i) {
      const std::string m = member(i);
      const std::string net = "10.77." + std::to_string(i + 1);
      const std::string veth = "h" + std::to_string(i);
      if (!addNamespace(m) || !run("ip -n " + m + " link set lo up") ||
          !run(r + "link add " + veth + " type veth peer name eth0 netns " + m) ||
          !run(r + "addr add " + net + ".1/24 dev " + veth) ||
          !run(r + "link set " + veth + " up") ||
          !run("ip -n " + m + " addr add " + net + ".2/24 dev eth0") ||
          !run("ip -n " + m + " link set eth0 up") ||
          !run("ip -n " + m + " route add default via " + net + ".1")) {
        return false;
      }
    }
    return nft("add table inet ingrid_fault") &&
           nft("'add chain inet ingrid_fault forward { type filter hook forward priority 0; "
               "policy accept; }'");
  }

  bool addNamespace(const std::string& name) {
    if (!run("ip netns add " + name)) return false;
    created_.insert(created_.begin(), name);  // members first on deletion
    return true;
  }

  // Rewrites the forward chain from cuts_.
  bool apply() {
    if (!nft("flush chain inet ingrid_fault forward")) return false;
    for (const auto& [a, b] : cuts_) {
      if (!nft("add rule inet ingrid_fault forward ip saddr " + address(a) + " ip daddr " +
               address(b) + " drop")) {
        return false;
      }
    }
    return true;
  }

  bool nft(const std::string& command) {
    return run("ip netns exec " + router_ + " nft " + command);
  }

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

  std::string router_;
  std::string error_;
  std::string output_;
  std::vector<std::string> created_;    // namespaces to delete, in deletion order
  std::set<std::pair<int, int>> cuts_;  // (from, to) pairs dropped
};

}  // namespace ingrid::testing
