// HostLab: hosts as network namespaces, for multi-host tests on one machine. Each host is a
// namespace of its own with one interface (eth0) at a private address, 10.77.0.<i+2>/16 for host
// i, on a bridge; a member in it listens on 0.0.0.0:kPort and advertises address(i):kPort. Cuts
// between hosts are nft rules in the sending host's namespace, one way or both.
//
// Layout: a lab namespace ("ighost-<pid>-<n>") holds the bridge (br0, 10.77.0.1/16) and one veth
// end per host ("h<i>"); the other end is host i's eth0, in "ighost-<pid>-<n>-<i>". Nothing is
// added to the caller's own namespace, so labs of concurrent tests never meet. Test clients run
// in the lab namespace (Enter) and dial the hosts through the bridge from 10.77.0.1; a cut
// between hosts leaves them reachable from there.
//
// Needs root, iproute2 and nftables; error() says why not otherwise, and the test must skip
// visibly, or fail where required() (as root, or with CI set). The destructor deletes every
// namespace it made (their veths, bridge and rules go with them); the processes in them must
// have ended first (declare the lab before the processes). Labs left by a process that died
// without its destructor (SIGKILL) are deleted by the next HostLab.
//
// Thread safety: one test thread.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ingrid::testing {

class HostLab {
 public:
  // The port every member listens on, on every host (each host has its own address).
  static constexpr std::uint16_t kPort = 7400;
  static constexpr int kMaxHosts = 250;
  static constexpr const char* kPrefix = "ighost-";

  static bool required() {
    const char* ci = std::getenv("CI");
    return geteuid() == 0 || (ci != nullptr && *ci != '\0');
  }

  explicit HostLab(int hosts) : hosts_(hosts) {
    static int serial = 0;
    name_ = kPrefix + std::to_string(getpid()) + "-" + std::to_string(serial++);
    if (geteuid() != 0) {
      error_ = "network namespaces need root (euid " + std::to_string(geteuid()) + ")";
      return;
    }
    if (hosts < 1 || hosts > kMaxHosts) {
      error_ = "hosts must be in [1, " + std::to_string(kMaxHosts) + "]";
      return;
    }
    if (!run("ip -V") || !run("nft --version")) {
      error_ = "iproute2 (ip) or nftables (nft) is not installed: " + output_;
      return;
    }
    sweepStale();
    if (!setUp()) error_ = "cannot set up the hosts: " + output_;
  }
  ~HostLab() {
    for (int i = static_cast<int>(made_) - 1; i >= 0; --i) {
      run("ip netns del " + host(i) + "; rm -rf /etc/netns/" + host(i));
    }
    if (labMade_) run("ip netns del " + name_);
  }
  HostLab(const HostLab&) = delete;
  HostLab& operator=(const HostLab&) = delete;

  // Empty if the lab is usable, else why not.
  const std::string& error() const { return error_; }
  // The lab namespace (the bridge; test clients).
  const std::string& name() const { return name_; }
  int hosts() const { return hosts_; }
  // Host i's namespace, its address, and its member's address (address:kPort).
  std::string host(int i) const { return name_ + "-" + std::to_string(i); }
  // (i = -1: the bridge's address, 10.77.0.1, where test clients dial from.)
  static std::string address(int i) {
    return "10.77." + std::to_string((i + 2) / 256) + "." + std::to_string((i + 2) % 256);
  }
  static std::string endpoint(int i) { return address(i) + ":" + std::to_string(kPort); }
  // The --listen of every member: all of its host's interfaces.
  static std::string listen() { return "0.0.0.0:" + std::to_string(kPort); }

  // The command prefix that runs a member on host i: in its namespace, with INGRID_ADVERTISE
  // set to endpoint(i) (ingrid-node takes every option from the environment too). Both `ip
  // netns exec` and `env` exec in place: the member keeps the pid the prefix was started with.
  std::vector<std::string> launcher(int i) const {
    return {"ip", "netns", "exec", host(i), "env", "INGRID_ADVERTISE=" + endpoint(i)};
  }
  // launcher(i) for every host, in order (FaultClusterOptions::launchers).
  std::vector<std::vector<std::string>> launchers() const {
    std::vector<std::vector<std::string>> out;
    for (int i = 0; i < hosts_; ++i) out.push_back(launcher(i));
    return out;
  }

  // Makes `name` resolve on every host to the addresses of `hosts`, one record each, as a
  // Kubernetes headless service lists its pods: /etc/netns/<host>/hosts, which `ip netns exec`
  // mounts over /etc/hosts. Rewritten in place, so members already running see a later call.
  bool publishName(const std::string& name, const std::vector<int>& hosts) {
    std::string text = "127.0.0.1 localhost\n::1 localhost\n";
    for (int h : hosts) text += address(h) + " " + name + "\n";
    for (int i = 0; i < hosts_; ++i) {
      const std::string dir = "/etc/netns/" + host(i);
      if (!run("mkdir -p " + dir)) return false;
      FILE* f = std::fopen((dir + "/hosts").c_str(), "w");  // same file: truncated, not replaced
      const bool written = f != nullptr && std::fputs(text.c_str(), f) >= 0;
      if (f != nullptr && std::fclose(f) != 0) return false;
      if (!written) {
        output_ = "cannot write " + dir + "/hosts";
        return false;
      }
    }
    return true;
  }

  // Drops packets from host a to host b (and from b to a if `bothWays`): an nft rule in a's
  // output chain. A one-way cut of TCP breaks both directions' connections, as a real one does;
  // it differs from a two-way cut in what each side sees. Returns false with output() on
  // failure.
  bool cut(int a, int b, bool bothWays = true) {
    cuts_.insert({a, b});
    if (bothWays) cuts_.insert({b, a});
    return apply(a) && (!bothWays || apply(b));
  }
  // Cuts host i from every other host, both ways (the lab still reaches it).
  bool isolate(int i) {
    for (int j = 0; j < hosts_; ++j) {
      if (j != i) cuts_.insert({i, j}), cuts_.insert({j, i});
    }
    return applyAll();
  }
  // Splits the hosts in two: those in `side` from all the others, both ways.
  bool split(const std::set<int>& side) {
    for (int a : side) {
      for (int b = 0; b < hosts_; ++b) {
        if (side.count(b) == 0) cuts_.insert({a, b}), cuts_.insert({b, a});
      }
    }
    return applyAll();
  }
  bool heal(int a, int b) {
    cuts_.erase({a, b});
    cuts_.erase({b, a});
    return apply(a) && apply(b);
  }
  bool healAll() {
    cuts_.clear();
    return applyAll();
  }
  const std::string& output() const { return output_; }

  // Moves the calling thread into the lab namespace until destroyed. Threads it creates
  // meanwhile (a client's) stay there.
  class Enter {
   public:
    explicit Enter(const HostLab& lab) {
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
    labMade_ = true;
    for (int i = 0; i < hosts_; ++i) {
      if (!run("ip netns add " + host(i))) return false;
      ++made_;
    }
    std::string lab = "link set lo up\nlink add br0 type bridge\nlink set br0 address " + mac(-1) +
                      "\naddr add " + address(-1) + "/16 dev br0\nlink set br0 up\n";
    for (int i = 0; i < hosts_; ++i) {
      const std::string veth = "h" + std::to_string(i);
      lab += "link add " + veth + " type veth peer name eth0 netns " + host(i) + "\nlink set " +
             veth + " master br0 up\n" + neighbour(i, "br0");
    }
    if (!batch(name_, lab)) return false;
    for (int i = 0; i < hosts_; ++i) {
      std::string in = "link set lo up\nlink set eth0 address " + mac(i) + "\naddr add " +
                       address(i) + "/16 dev eth0\nlink set eth0 up\n" + neighbour(-1, "eth0");
      for (int j = 0; j < hosts_; ++j) {
        if (j != i) in += neighbour(j, "eth0");
      }
      if (!batch(host(i), in) ||
          !nft(i,
               "'add table inet ingrid_hosts; add chain inet ingrid_hosts output { type filter "
               "hook output priority 0; policy accept; }'")) {
        return false;
      }
    }
    return true;
  }

  // Host i's MAC address, 02:77:00:00 then the last two bytes of its address (i = -1: the
  // bridge's, for 10.77.0.1). Neighbours are static (permanent ARP entries): the kernel's
  // neighbour table is shared by every namespace and holds at most gc_thresh3 (default 1024)
  // learnt entries, which a full mesh of 32 hosts overflows ("neighbor table overflow", then "No
  // route to host"); permanent entries do not count.
  static std::string mac(int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "02:77:00:00:%02x:%02x", (i + 2) / 256, (i + 2) % 256);
    return buf;
  }
  static std::string neighbour(int i, const std::string& dev) {
    return "neigh replace " + address(i) + " lladdr " + mac(i) + " dev " + dev + " nud permanent\n";
  }
  // Runs `commands` (one `ip` command a line, no single quote) in namespace `ns`.
  bool batch(const std::string& ns, const std::string& commands) {
    return run("printf '%s' '" + commands + "' | ip -n " + ns + " -batch -");
  }

  // Deletes labs ("ighost-PID-...") whose process no longer runs: what a test killed before its
  // destructor ran left behind.
  void sweepStale() {
    if (!run("ip netns list")) return;
    std::istringstream lines(output_);
    std::vector<std::string> stale;
    for (std::string line; std::getline(lines, line);) {
      const std::string ns = line.substr(0, line.find(' '));
      if (ns.rfind(kPrefix, 0) != 0) continue;
      const long pid =
          std::strtol(ns.c_str() + std::char_traits<char>::length(kPrefix), nullptr, 10);
      if (pid > 0 && pid != getpid() && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        stale.push_back(ns);
      }
    }
    for (const auto& ns : stale) run("ip netns del " + ns + "; rm -rf /etc/netns/" + ns);
  }

  bool applyAll() {
    for (int i = 0; i < hosts_; ++i) {
      if (!apply(i)) return false;
    }
    return true;
  }
  // Rewrites host `from`'s output chain from cuts_.
  bool apply(int from) {
    std::string rules = "flush chain inet ingrid_hosts output";
    for (const auto& [a, b] : cuts_) {
      if (a == from)
        rules += "; add rule inet ingrid_hosts output ip daddr " + address(b) + " drop";
    }
    return nft(from, "'" + rules + "'");
  }

  bool nft(int i, const std::string& command) {
    return run("ip netns exec " + host(i) + " nft " + command);
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

  int hosts_ = 0;
  std::string name_;
  std::string error_;
  std::string output_;
  bool labMade_ = false;
  std::size_t made_ = 0;                // host namespaces made, hosts 0..made_-1
  std::set<std::pair<int, int>> cuts_;  // (from, to) host pairs dropped
};

}  // namespace ingrid::testing
