#include "cluster/control/raft_io.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

// Raft clusters of RaftIo instances on one io_context run by the test thread, over an in-memory
// network that drops, delays, duplicates and reorders messages and partitions servers.
#include "support/command_fsm.h"
using namespace ingrid;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = 15000ms;  // The most any condition below may take (sanitizer builds).

struct Faults {
  double drop = 0;                        // Probability a message is lost.
  double duplicate = 0;                   // Probability a message is delivered twice.
  std::chrono::milliseconds maxDelay{0};  // Each copy is delayed by 0..maxDelay (reorders).
};

class Net {
 public:
  explicit Net(asio::io_context& ctx) : ctx_(ctx) {}

  void attach(raft_id id, RaftIo& io) { ios_[id] = &io; }
  void detach(raft_id id) { ios_.erase(id); }
  // Blocks messages from `from` to `to` (one way).
  void block(raft_id from, raft_id to) { blocked_.insert({from, to}); }
  void isolate(const std::set<raft_id>& a, const std::set<raft_id>& b) {
    for (raft_id x : a) {
      for (raft_id y : b) {
        block(x, y);
        block(y, x);
      }
    }
  }
  void heal() { blocked_.clear(); }
  void stop() {
    stopped_ = true;
    for (auto& timer : timers_) timer->cancel();
  }

  void send(raft_id from, raft_id to, std::string bytes) {
    if (stopped_ || chance(faults.drop)) return;
    const int copies = chance(faults.duplicate) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      auto timer = std::make_shared<asio::steady_timer>(ctx_);
      timer->expires_after(std::chrono::milliseconds(
          std::uniform_int_distribution<long>(0, faults.maxDelay.count())(rng_)));
      timers_.insert(timer);
      timer->async_wait([this, timer, from, to, bytes](const std::error_code&) {
        timers_.erase(timer);
        deliver(from, to, bytes);
      });
    }
  }

  Faults faults;
  std::array<int, RAFT_IO_TIMEOUT_NOW + 1> delivered{};  // By RAFT_IO_* type.

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  void deliver(raft_id from, raft_id to, const std::string& bytes) {
    auto it = ios_.find(to);
    if (stopped_ || it == ios_.end() || blocked_.count({from, to}) > 0) return;
    const Result<bool> got = it->second->deliver(bytes);
    CHECK(got.ok());
    if (got.ok() && *got) delivered.at(static_cast<unsigned char>(bytes.at(0)))++;  // the type
  }

  asio::io_context& ctx_;
  std::mt19937 rng_{std::random_device{}()};
  std::map<raft_id, RaftIo*> ios_;
  std::set<std::pair<raft_id, raft_id>> blocked_;
  std::set<std::shared_ptr<asio::steady_timer>> timers_;
  bool stopped_ = false;
};

struct Endpoint final : RaftNetwork {
  Endpoint(Net& n, raft_id id) : net(n), self(id) {}
  void sendRaftMessage(std::uint64_t to, const std::string&, std::string bytes) override {
    net.send(self, to, std::move(bytes));
  }
  Net& net;
  raft_id self;
};

// One raft server; its FSM appends each command (a u64) to `applied`.
struct Server : ingrid::testing::CommandFsm {
  Server(asio::io_context& ctx, Net& net, raft_id serverId)
      : id(serverId),
        address("server-" + std::to_string(serverId)),
        endpoint(net, id),
        io(ctx, endpoint) {}

  void init(unsigned snapshotThreshold, unsigned snapshotTrailing) {
    REQUIRE(raft_init(&raft, io.get(), &fsm, id, address.c_str()) == 0);
    raft.data = this;
    raft_set_election_timeout(&raft, 150);
    raft_set_heartbeat_timeout(&raft, 30);
    raft_set_snapshot_threshold(&raft, snapshotThreshold);
    raft_set_snapshot_trailing(&raft, snapshotTrailing);
  }
  void start() {
    REQUIRE(raft_start(&raft) == 0);
    running = true;
  }
  void close() {
    REQUIRE(running);
    running = false;
    raft_close(&raft, [](struct raft* r) { static_cast<Server*>(r->data)->closed = true; });
  }

  raft_id id;
  std::string address;
  Endpoint endpoint;
  RaftIo io;
  struct raft raft {};
  bool running = false;
  bool closed = false;
};

struct Options {
  unsigned servers = 3;
  unsigned snapshotThreshold = 1024;
  unsigned snapshotTrailing = 128;
};

class Cluster {
 public:
  explicit Cluster(Options options) : options_(options) {
    raft_configuration conf;
    raft_configuration_init(&conf);
    for (raft_id id = 1; id <= options.servers; ++id) {
      Server& s = add(id);
      REQUIRE(raft_configuration_add(&conf, id, s.address.c_str(), RAFT_VOTER) == 0);
    }
    for (auto& s : servers_) REQUIRE(raft_bootstrap(&s->raft, &conf) == 0);
    raft_configuration_close(&conf);
    for (auto& s : servers_) s->start();
  }

  // Shutdown: close every raft, wait for the close callbacks, stop the network, drain.
  ~Cluster() {
    for (auto& s : servers_) {
      if (s->running) s->close();
    }
    CHECK(runUntil([&] {
      for (auto& s : servers_) {
        if (!s->closed) return false;
      }
      return true;
    }));
    net.stop();
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!ctx.stopped() && std::chrono::steady_clock::now() < deadline) ctx.run_for(10ms);
    CHECK(ctx.stopped());  // Nothing left: no timer or completion outlives its raft.
  }

  // A server that is not bootstrapped (it joins through raft_add).
  Server& add(raft_id id) {
    servers_.push_back(std::make_unique<Server>(ctx, net, id));
    Server& s = *servers_.back();
    net.attach(id, s.io);
    s.init(options_.snapshotThreshold, options_.snapshotTrailing);
    return s;
  }

  template <class Pred>
  bool runUntil(Pred pred, std::chrono::milliseconds limit = kWait) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (ctx.stopped()) ctx.restart();
      ctx.run_one_for(5ms);
    }
    return true;
  }

  Server& server(raft_id id) { return *servers_.at(id - 1); }

  // The running leader with the highest term, if any.
  Server* leader() {
    Server* best = nullptr;
    for (auto& s : servers_) {
      if (s->running && raft_state(&s->raft) == RAFT_LEADER &&
          (best == nullptr || s->raft.current_term > best->raft.current_term)) {
        best = s.get();
      }
    }
    return best;
  }
  Server& waitLeader(const std::set<raft_id>& among = {}) {
    Server* found = nullptr;
    const bool ok = runUntil([&] {
      found = leader();
      return found != nullptr && (among.empty() || among.count(found->id) > 0);
    });
    REQUIRE(ok);
    return *found;
  }

  // Proposes a fresh command on `s`; its status lands in status[cmd] once raft answers.
  std::uint64_t propose(Server& s) {
    const std::uint64_t cmd = nextCommand_++;
    ingrid::testing::proposeCommand(s.raft, cmd, [this, cmd](int st) { status[cmd] = st; });
    return cmd;
  }

  // Commits one command through whoever leads (retrying with a fresh command when leadership
  // moves); returns it.
  std::uint64_t commit() {
    std::uint64_t cmd = 0;
    const bool ok = runUntil([&] {
      if (cmd != 0 && status.count(cmd) == 0) return false;  // In flight.
      if (cmd != 0 && status[cmd] == 0) return true;
      Server* l = leader();
      if (l != nullptr) cmd = propose(*l);
      return false;
    });
    REQUIRE(ok);
    acked.push_back(cmd);
    return cmd;
  }

  // Waits until every server in `ids` (default: all running) applied the same commands, holding
  // every acknowledged one in order, each once.
  void waitConverged(std::set<raft_id> ids = {}) {
    if (ids.empty()) {
      for (auto& s : servers_) {
        if (s->running) ids.insert(s->id);
      }
    }
    const bool ok = runUntil([&] {
      const auto& first = server(*ids.begin()).applied;
      for (raft_id id : ids) {
        if (server(id).applied != first) return false;
      }
      return std::includes(first.begin(), first.end(), acked.begin(), acked.end());
    });
    REQUIRE(ok);
    const auto& applied = server(*ids.begin()).applied;
    CHECK(std::set<std::uint64_t>(applied.begin(), applied.end()).size() == applied.size());
    // Commands are proposed in increasing order and applied in log order.
    CHECK(std::is_sorted(applied.begin(), applied.end()));
  }

  asio::io_context ctx;
  Net net{ctx};
  std::map<std::uint64_t, int> status;  // Command -> raft_apply status, once known.
  std::vector<std::uint64_t> acked;     // Commands committed, in order.

 private:
  Options options_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::uint64_t nextCommand_ = 1;
};

// Waits for a raft_change (raft_add / raft_assign) to complete; returns its status.
template <class Start>
int change(Cluster& c, Start start) {
  struct Req {
    raft_change req{};
    std::optional<int> status;
  } r;
  r.req.data = &r;
  const int rv =
      start(&r.req, [](raft_change* req, int st) { static_cast<Req*>(req->data)->status = st; });
  if (rv != 0) return rv;
  REQUIRE(c.runUntil([&] { return r.status.has_value(); }));
  return *r.status;
}

int roleOf(struct raft& r, raft_id id) {
  for (unsigned i = 0; i < r.configuration.n; ++i) {
    if (r.configuration.servers[i].id == id) return r.configuration.servers[i].role;
  }
  return -1;
}

}  // namespace

TEST_CASE("A cluster elects a leader and applies commands in one order despite faults",
          "[control][cluster]") {
  const unsigned n = GENERATE(3u, 5u);
  Cluster c({n});
  c.net.faults = Faults{0.05, 0.05, 10ms};
  c.waitLeader();
  for (int i = 0; i < 30; ++i) c.commit();
  c.waitConverged();

  // A one-way break from the leader to one follower: the rest still commit; healing converges.
  Server& l = c.waitLeader();
  const raft_id cut = l.id == 1 ? 2 : 1;
  c.net.block(l.id, cut);
  for (int i = 0; i < 10; ++i) c.commit();
  c.net.heal();
  c.waitConverged();
}

TEST_CASE("Killing the leader elects another with a higher term and keeps committed entries",
          "[control][cluster]") {
  const unsigned n = GENERATE(3u, 5u);
  Cluster c({n});
  for (int i = 0; i < 10; ++i) c.commit();
  Server& old = c.waitLeader();
  const raft_term oldTerm = old.raft.current_term;
  c.net.detach(old.id);  // Its messages are dropped from now on.
  old.close();
  REQUIRE(c.runUntil([&] { return old.closed; }));

  Server& next = c.waitLeader();
  CHECK(next.id != old.id);
  CHECK(next.raft.current_term > oldTerm);
  for (int i = 0; i < 10; ++i) c.commit();
  c.waitConverged();
  CHECK(c.server(next.id).applied.size() >= 20);
}

TEST_CASE("A minority partition commits nothing while the majority commits: healing converges",
          "[control][cluster]") {
  Cluster c({5});
  for (int i = 0; i < 5; ++i) c.commit();
  c.waitConverged();
  Server& old = c.waitLeader();
  const raft_id buddy = old.id == 1 ? 2 : 1;
  const std::set<raft_id> minority{old.id, buddy};
  std::set<raft_id> majority;
  for (raft_id id = 1; id <= 5; ++id) {
    if (minority.count(id) == 0) majority.insert(id);
  }
  const auto minorityApplied = c.server(buddy).applied;
  c.net.isolate(minority, majority);

  std::vector<std::uint64_t> lost;
  for (int i = 0; i < 5; ++i) lost.push_back(c.propose(old));
  Server& next = c.waitLeader(majority);
  CHECK(next.raft.current_term > old.raft.current_term);
  for (int i = 0; i < 5; ++i) c.commit();
  c.waitConverged(majority);
  CHECK(c.server(buddy).applied == minorityApplied);
  CHECK(c.server(old.id).applied == minorityApplied);

  c.net.heal();
  c.waitConverged();
  for (std::uint64_t cmd : lost) {
    CHECK(c.status[cmd] != 0);  // Failed (leadership lost), never acknowledged.
    for (raft_id id = 1; id <= 5; ++id) {
      const auto& applied = c.server(id).applied;
      CHECK(std::find(applied.begin(), applied.end(), cmd) == applied.end());
    }
  }
}

TEST_CASE("raft_add and raft_assign bring in a voter and a standby", "[control][cluster]") {
  Cluster c({3});
  for (int i = 0; i < 5; ++i) c.commit();
  struct Joiner {
    raft_id id;
    int role;
  };
  for (const Joiner j : {Joiner{4, RAFT_VOTER}, Joiner{5, RAFT_STANDBY}}) {
    Server& s = c.add(j.id);
    s.start();
    Server& l = c.waitLeader();
    CHECK(change(c, [&](raft_change* req, raft_change_cb cb) {
            return raft_add(&l.raft, req, s.id, s.address.c_str(), cb);
          }) == 0);
    Server& l2 = c.waitLeader();
    CHECK(change(c, [&](raft_change* req, raft_change_cb cb) {
            return raft_assign(&l2.raft, req, s.id, j.role, cb);
          }) == 0);
  }
  for (int i = 0; i < 5; ++i) c.commit();
  c.waitConverged();
  for (raft_id id = 1; id <= 5; ++id) {
    CHECK(c.runUntil([&] {
      return roleOf(c.server(id).raft, 4) == RAFT_VOTER &&
             roleOf(c.server(id).raft, 5) == RAFT_STANDBY;
    }));
  }
}

// (A restarted server is a new one with a new id in ingrid, so RaftIo keeps no log to restart
// from: a restart from memory is not tested.)
TEST_CASE("A server partitioned away catches up through InstallSnapshot", "[control][cluster]") {
  Cluster c({3, 8, 4});
  for (int i = 0; i < 3; ++i) c.commit();
  c.waitConverged();
  Server& l = c.waitLeader();
  Server& lagging = c.server(l.id == 3 ? 2 : 3);
  c.net.isolate({lagging.id}, {1, 2, 3});
  for (int i = 0; i < 40; ++i) c.commit();  // more than the threshold: the leader compacts
  c.waitLeader();

  c.net.heal();
  c.waitConverged();
  CHECK(c.net.delivered[RAFT_IO_INSTALL_SNAPSHOT] > 0);
  CHECK(lagging.restores > 0);
}
