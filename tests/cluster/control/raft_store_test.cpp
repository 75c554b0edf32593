#include "cluster/control/raft_store.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include "cluster/control/raft_io.h"
#include "support/command_fsm.h"
#include "support/temp_dir.h"

// RaftStore on its own (reopen, torn tails, corruption, truncate, compaction), RaftIo over it, and
// libraft clusters whose servers restart from their directories.
using namespace ingrid;
using namespace std::chrono_literals;

namespace {

namespace fs = std::filesystem;
constexpr auto kWait = 15000ms;  // The most any condition below may take (sanitizer builds).

// A fresh directory for one test.
struct TempDir : ingrid::testing::TempDir {
  TempDir() : ingrid::testing::TempDir("ingrid-raft-store") { REQUIRE_FALSE(path.empty()); }
};

// Entries of the given terms, each holding "e<term>-<i>".
struct Entries {
  explicit Entries(const std::vector<std::uint64_t>& terms) {
    for (std::size_t i = 0; i < terms.size(); ++i) {
      data.push_back("e" + std::to_string(terms[i]) + "-" + std::to_string(i));
    }
    for (std::size_t i = 0; i < terms.size(); ++i) {
      raft_entry e{};
      e.term = terms[i];
      e.type = RAFT_COMMAND;
      e.buf.base = data[i].data();
      e.buf.len = data[i].size();
      entries.push_back(e);
    }
  }
  const raft_entry* get() const { return entries.data(); }
  unsigned size() const { return static_cast<unsigned>(entries.size()); }
  std::vector<std::string> data;
  std::vector<raft_entry> entries;
};

std::unique_ptr<RaftStore> open(const std::string& dir, RaftStore::State& state) {
  auto opened = RaftStore::open(dir, state);
  if (!opened.ok()) FAIL(opened.error().message());
  return std::move(*opened);
}

std::vector<std::uint64_t> indexes(const RaftStore::State& s) {
  std::vector<std::uint64_t> out;
  for (const auto& e : s.entries) out.push_back(e.index);
  return out;
}

RaftStore::Snapshot snapshotAt(std::uint64_t index, std::uint64_t term) {
  RaftStore::Snapshot s;
  s.index = index;
  s.term = term;
  s.configurationIndex = 1;
  s.servers = {{1, RAFT_VOTER, "server-1"}, {2, RAFT_STANDBY, "server-2"}};
  s.data = "state at " + std::to_string(index);
  return s;
}

}  // namespace

TEST_CASE("RaftStore: a reopened store returns the term, vote and entries written",
          "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  CHECK_FALSE(*RaftStore::holdsState(dir));  // missing
  RaftStore::State state;
  {
    auto store = open(dir, state);
    CHECK(state.term == 0);
    CHECK(state.entries.empty());
    CHECK_FALSE(*RaftStore::holdsState(dir));
    REQUIRE(store->setTermVote(3, 2).ok());
    Entries e({1, 1, 3});
    REQUIRE(store->append(e.get(), e.size()).ok());
    CHECK(store->nextIndex() == 4);
  }
  CHECK(*RaftStore::holdsState(dir));
  auto store = open(dir, state);
  CHECK(state.term == 3);
  CHECK(state.vote == 2);
  CHECK_FALSE(state.snapshot.has_value());
  REQUIRE(indexes(state) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(state.entries[2].term == 3);
  CHECK(state.entries[2].type == RAFT_COMMAND);
  CHECK(state.entries[1].data == "e1-1");
  CHECK(store->nextIndex() == 4);
}

TEST_CASE("RaftStore: a torn or garbage log tail is cut at open", "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  const std::string log = dir + "/raft-log";
  RaftStore::State state;
  std::uintmax_t twoEntries = 0;
  {
    auto store = open(dir, state);
    Entries e({1, 1});
    REQUIRE(store->append(e.get(), e.size()).ok());
    twoEntries = fs::file_size(log);
    Entries more({1});
    REQUIRE(store->append(more.get(), more.size()).ok());
  }
  SECTION("the last record torn mid-way") { fs::resize_file(log, fs::file_size(log) - 5); }
  SECTION("garbage after the last record") {
    std::ofstream(log, std::ios::app | std::ios::binary) << std::string(40, '\x5a');
    twoEntries = fs::file_size(log) - 40;  // all three records survive
  }
  auto store = open(dir, state);
  CHECK(fs::file_size(log) == twoEntries);  // the file is cut where the good records end
  const std::uint64_t kept = state.entries.size();
  CHECK((kept == 2 || kept == 3));
  Entries next({2});
  REQUIRE(store->append(next.get(), next.size()).ok());
  store.reset();
  open(dir, state);
  CHECK(state.entries.size() == kept + 1);
  CHECK(state.entries.back().index == kept + 1);
  CHECK(state.entries.back().term == 2);
}

TEST_CASE("RaftStore: a bad record before a good one is an error naming the file and offset",
          "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  const std::string log = dir + "/raft-log";
  RaftStore::State state;
  std::uintmax_t secondRecord = 0;
  {
    auto store = open(dir, state);
    Entries first({1});
    REQUIRE(store->append(first.get(), first.size()).ok());
    secondRecord = fs::file_size(log);
    Entries rest({1, 1});
    REQUIRE(store->append(rest.get(), rest.size()).ok());
  }
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(secondRecord + 23));  // a byte of its data
    f.put('!');
  }
  const auto opened = RaftStore::open(dir, state);
  REQUIRE_FALSE(opened.ok());
  CHECK_THAT(opened.error().message(),
             Catch::Contains(log) && Catch::Contains("offset " + std::to_string(secondRecord)));
}

TEST_CASE("RaftStore: truncate then append replaces the tail", "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  RaftStore::State state;
  {
    auto store = open(dir, state);
    Entries e({1, 1, 1, 1, 1});
    REQUIRE(store->append(e.get(), e.size()).ok());
    REQUIRE(store->truncate(3).ok());
    CHECK(store->nextIndex() == 3);
    Entries other({2, 2});
    REQUIRE(store->append(other.get(), other.size()).ok());
  }
  open(dir, state);
  REQUIRE(indexes(state) == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(state.entries[1].term == 1);
  CHECK(state.entries[2].term == 2);
  CHECK(state.entries[3].term == 2);
}

TEST_CASE("RaftStore: a snapshot compacts the log, keeping the trailing entries",
          "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  RaftStore::State state;
  std::vector<std::uint64_t> expected;
  std::uint64_t next = 0;
  {
    auto store = open(dir, state);
    REQUIRE(store->setTermVote(1, 1).ok());
    Entries e(std::vector<std::uint64_t>(10, 1));
    REQUIRE(store->append(e.get(), e.size()).ok());
    SECTION("trailing 3: entries after 8 - 3 stay") {
      REQUIRE(store->putSnapshot(snapshotAt(8, 1), 3).ok());
      expected = {6, 7, 8, 9, 10};
      next = 11;
    }
    SECTION("trailing 0 (installed): the log restarts after it") {
      REQUIRE(store->putSnapshot(snapshotAt(8, 1), 0).ok());
      next = 9;
    }
    CHECK(store->nextIndex() == next);
  }
  auto store = open(dir, state);
  REQUIRE(state.snapshot.has_value());
  CHECK(state.snapshot->index == 8);
  CHECK(state.snapshot->term == 1);
  CHECK(state.snapshot->data == "state at 8");
  REQUIRE(state.snapshot->servers.size() == 2);
  CHECK(state.snapshot->servers[1].address == "server-2");
  CHECK(state.snapshot->servers[1].role == RAFT_STANDBY);
  CHECK(indexes(state) == expected);
  CHECK(store->nextIndex() == next);
  Entries more({2});
  REQUIRE(store->append(more.get(), more.size()).ok());
  store.reset();
  open(dir, state);
  CHECK(state.entries.back().index == next);
}

TEST_CASE("RaftStore: an unusable directory is an error naming it", "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("missing/raft");  // its parent does not exist
  RaftStore::State state;
  const auto opened = RaftStore::open(dir, state);
  REQUIRE_FALSE(opened.ok());
  CHECK_THAT(opened.error().message(), Catch::Contains(dir) && Catch::Contains("mkdir"));
}

TEST_CASE("RaftStore: wipe removes the Raft files only", "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  RaftStore::State state;
  {
    auto store = open(dir, state);
    REQUIRE(store->setTermVote(2, 0).ok());
    REQUIRE(store->putSnapshot(snapshotAt(4, 2), 0).ok());
  }
  std::ofstream(dir + "/other") << "not ours";
  CHECK(*RaftStore::holdsState(dir));
  REQUIRE(RaftStore::wipe(dir).ok());
  CHECK_FALSE(*RaftStore::holdsState(dir));
  CHECK(fs::exists(dir + "/other"));
  open(dir, state);
  CHECK(state.term == 0);
  CHECK_FALSE(state.snapshot.has_value());
}

namespace {

struct NoNetwork final : RaftNetwork {
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override {}
};

struct Loaded {
  raft_term term = 0;
  raft_id vote = 0;
  raft_snapshot* snapshot = nullptr;
  raft_index start = 0;
  raft_entry* entries = nullptr;
  size_t n = 0;
  int rv = 0;
  explicit Loaded(raft_io* io) {
    REQUIRE(io->init(io, 1, "server-1") == 0);
    rv = io->load(io, &term, &vote, &snapshot, &start, &entries, &n);
  }
  ~Loaded() {  // what raft would free
    if (snapshot != nullptr) {
      raft_configuration_close(&snapshot->configuration);
      for (unsigned i = 0; i < snapshot->n_bufs; ++i) raft_free(snapshot->bufs[i].base);
      raft_free(snapshot->bufs);
      raft_free(snapshot);
    }
    if (n > 0) raft_free(entries[0].batch);
    raft_free(entries);
  }
};

}  // namespace

TEST_CASE("RaftIo with a directory: bootstrap and preload are durable and refused over state",
          "[control][raft_store]") {
  TempDir tmp;
  const std::string dir = tmp.sub("raft");
  asio::io_context ctx;
  NoNetwork net;
  {
    std::vector<std::string> logged;  // init fails, and says why to its Logger
    RaftIo io(
        ctx, net, tmp.sub("missing/raft"),
        Logger([&logged](const LogLine& r) { logged.emplace_back(r.message); }, LogLevel::kError));
    CHECK(io.get()->init(io.get(), 1, "server-1") == RAFT_IOERR);
    REQUIRE(logged.size() == 1);
    CHECK(logged[0].rfind("Raft storage: ", 0) == 0);
  }
  raft_configuration conf;
  raft_configuration_init(&conf);
  REQUIRE(raft_configuration_add(&conf, 1, "server-1", RAFT_VOTER) == 0);
  {
    RaftIo io(ctx, net, dir);
    raft_io* p = io.get();
    REQUIRE(p->init(p, 1, "server-1") == 0);
    CHECK(p->bootstrap(p, &conf) == 0);
    CHECK(p->bootstrap(p, &conf) == RAFT_CANTBOOTSTRAP);
  }
  {
    RaftIo io(ctx, net, dir);
    Loaded l(io.get());
    REQUIRE(l.rv == 0);
    CHECK(l.term == 1);
    CHECK(l.start == 1);
    REQUIRE(l.n == 1);
    CHECK(l.entries[0].type == RAFT_CHANGE);
    CHECK(l.entries[0].term == 1);
    CHECK(io.get()->bootstrap(io.get(), &conf) == RAFT_CANTBOOTSTRAP);
    CHECK_FALSE(io.preload(5, 10, {{1, "server-1"}}, "data").ok());
  }
  raft_configuration_close(&conf);

  const std::string other = tmp.sub("preloaded");
  {
    RaftIo io(ctx, net, other);
    REQUIRE(io.preload(5, 10, {{1, "server-1"}, {2, "server-2"}}, "data").ok());
  }
  CHECK(*RaftIo::holdsState(other));
  RaftIo io(ctx, net, other);
  Loaded l(io.get());
  REQUIRE(l.rv == 0);
  CHECK(l.term == 5);
  CHECK(l.vote == 0);
  REQUIRE(l.snapshot != nullptr);
  CHECK(l.snapshot->index == 10);
  CHECK(l.snapshot->configuration.n == 2);
  REQUIRE(l.snapshot->n_bufs == 1);
  CHECK(std::string(static_cast<char*>(l.snapshot->bufs[0].base), l.snapshot->bufs[0].len) ==
        "data");
  CHECK(l.start == 11);
  CHECK(l.n == 0);
}

namespace {

// An in-memory network on the test's io_context: each message is delivered in a posted handler
// to the server attached under its destination id, if any.
class Net {
 public:
  explicit Net(asio::io_context& ctx) : ctx_(ctx) {}
  void attach(raft_id id, RaftIo& io) { ios_[id] = &io; }
  void detach(raft_id id) { ios_.erase(id); }
  void send(raft_id to, std::string bytes) {
    asio::post(ctx_, [this, to, bytes = std::move(bytes)] {
      auto it = ios_.find(to);
      if (it == ios_.end()) return;
      const Result<bool> got = it->second->deliver(bytes);
      CHECK(got.ok());
    });
  }

 private:
  asio::io_context& ctx_;
  std::map<raft_id, RaftIo*> ios_;
};

struct Endpoint final : RaftNetwork {
  explicit Endpoint(Net& n) : net(n) {}
  void sendRaftMessage(std::uint64_t to, const std::string&, std::string bytes) override {
    net.send(to, std::move(bytes));
  }
  Net& net;
};

// One raft server keeping its state in `dir`; its FSM appends each command (a u64) to `applied`.
struct Server : ingrid::testing::CommandFsm {
  Server(asio::io_context& ctx, Net& net, raft_id serverId, const std::string& dir)
      : id(serverId),
        address("server-" + std::to_string(serverId)),
        endpoint(net),
        io(ctx, endpoint, dir) {
    REQUIRE(raft_init(&raft, io.get(), &fsm, id, address.c_str()) == 0);
    raft.data = this;
    raft_set_election_timeout(&raft, 150);
    raft_set_heartbeat_timeout(&raft, 30);
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

// Three servers, each with its directory under one TempDir, bootstrapped together.
class Cluster {
 public:
  explicit Cluster(unsigned snapshotThreshold = 1024, unsigned snapshotTrailing = 128)
      : threshold_(snapshotThreshold), trailing_(snapshotTrailing) {
    raft_configuration conf;
    raft_configuration_init(&conf);
    for (raft_id id = 1; id <= 3; ++id) {
      Server& s = make(id);
      REQUIRE(raft_configuration_add(&conf, id, s.address.c_str(), RAFT_VOTER) == 0);
    }
    for (auto& [id, s] : servers_) REQUIRE(raft_bootstrap(&s->raft, &conf) == 0);
    raft_configuration_close(&conf);
    for (auto& [id, s] : servers_) s->start();
  }
  ~Cluster() {
    for (auto& [id, s] : servers_) {
      if (s->running) s->close();
    }
    CHECK(runUntil([&] {
      return std::all_of(servers_.begin(), servers_.end(),
                         [](const auto& s) { return !s.second->running && s.second->closed; });
    }));
    for (auto& [id, s] : servers_) net.detach(id);
    servers_.clear();  // completions still queued find no RaftIo alive and do nothing
  }

  std::string dir(raft_id id) const { return tmp_.sub("server-" + std::to_string(id)); }
  Server& server(raft_id id) { return *servers_.at(id); }

  // Closes server `id` and waits for it; its directory stays.
  void stop(raft_id id) {
    Server& s = server(id);
    net.detach(id);
    s.close();
    REQUIRE(runUntil([&] { return s.closed; }));
    servers_.erase(id);
  }
  // A new process for server `id` on its directory (no bootstrap: it loads what is there).
  Server& restart(raft_id id) {
    Server& s = make(id);
    s.start();
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

  Server* leader() {
    Server* best = nullptr;
    for (auto& [id, s] : servers_) {
      if (s->running && raft_state(&s->raft) == RAFT_LEADER &&
          (best == nullptr || s->raft.current_term > best->raft.current_term)) {
        best = s.get();
      }
    }
    return best;
  }

  // Commits one fresh command through whoever leads, retrying when leadership moves.
  std::uint64_t commit() {
    std::uint64_t cmd = 0;
    const bool ok = runUntil([&] {
      if (cmd != 0 && status_.count(cmd) == 0) return false;  // In flight.
      if (cmd != 0 && status_[cmd] == 0) return true;
      Server* l = leader();
      if (l != nullptr) cmd = propose(*l);
      return false;
    });
    REQUIRE(ok);
    acked.push_back(cmd);
    return cmd;
  }

  // Waits until every running server applied the same commands, every acknowledged one among
  // them in order.
  void waitConverged() {
    REQUIRE(runUntil([&] {
      const auto& first = servers_.begin()->second->applied;
      for (auto& [id, s] : servers_) {
        if (s->applied != first) return false;
      }
      return std::includes(first.begin(), first.end(), acked.begin(), acked.end());
    }));
    const auto& applied = servers_.begin()->second->applied;
    CHECK(std::is_sorted(applied.begin(), applied.end()));
    CHECK(std::set<std::uint64_t>(applied.begin(), applied.end()).size() == applied.size());
  }

  asio::io_context ctx;
  Net net{ctx};
  std::vector<std::uint64_t> acked;  // Commands committed, in order.

 private:
  Server& make(raft_id id) {
    auto s = std::make_unique<Server>(ctx, net, id, dir(id));
    raft_set_snapshot_threshold(&s->raft, threshold_);
    raft_set_snapshot_trailing(&s->raft, trailing_);
    net.attach(id, s->io);
    Server& ref = *s;
    servers_[id] = std::move(s);
    return ref;
  }
  std::uint64_t propose(Server& s) {
    const std::uint64_t cmd = nextCommand_++;
    ingrid::testing::proposeCommand(s.raft, cmd, [this, cmd](int st) { status_[cmd] = st; });
    return cmd;
  }

  TempDir tmp_;  // destroyed last: the servers' directories
  unsigned threshold_;
  unsigned trailing_;
  std::map<raft_id, std::unique_ptr<Server>> servers_;
  std::map<std::uint64_t, int> status_;
  std::uint64_t nextCommand_ = 1;
};

}  // namespace

TEST_CASE("Every server restarted from its directory keeps term, vote and log and re-applies",
          "[control][raft_store][cluster]") {
  // Without snapshots, and with snapshots every 8 entries keeping 4 (load gives snapshot + log).
  const unsigned threshold = GENERATE(1024u, 8u);
  Cluster c(threshold, 4);
  for (int i = 0; i < 20; ++i) c.commit();
  c.waitConverged();
  const std::vector<std::uint64_t> before = c.server(1).applied;

  struct Kept {
    raft_term term;
    raft_id vote;
    raft_index lastIndex;
  };
  std::map<raft_id, Kept> kept;
  for (raft_id id = 1; id <= 3; ++id) {
    struct raft& r = c.server(id).raft;
    kept[id] = {r.current_term, r.voted_for, raft_last_index(&r)};
  }
  for (raft_id id = 1; id <= 3; ++id) c.stop(id);
  for (raft_id id = 1; id <= 3; ++id) {
    CHECK(*RaftIo::holdsState(c.dir(id)));
    Server& s = c.restart(id);
    CHECK(s.raft.current_term == kept[id].term);
    CHECK(s.raft.voted_for == kept[id].vote);
    CHECK(raft_last_index(&s.raft) == kept[id].lastIndex);
  }
  c.commit();
  c.waitConverged();
  for (raft_id id = 1; id <= 3; ++id) {
    const auto& applied = c.server(id).applied;
    REQUIRE(applied.size() == before.size() + 1);
    CHECK(std::equal(before.begin(), before.end(), applied.begin()));  // the same, in order
  }
}

namespace {

struct Crash {
  raft_id first = 0;  // the leader
  raft_id second = 0;
  raft_id survivor = 0;
};

// Commits 10 entries, then stops the leader and one follower; the third alone cannot commit.
Crash crashTwo(Cluster& c) {
  for (int i = 0; i < 10; ++i) c.commit();
  c.waitConverged();
  Server* l = nullptr;
  REQUIRE(c.runUntil([&] { return (l = c.leader()) != nullptr; }));
  Crash crash;
  crash.first = l->id;
  crash.second = crash.first == 1 ? 2 : 1;
  crash.survivor = 6 - crash.first - crash.second;
  c.stop(crash.first);
  c.stop(crash.second);
  return crash;
}

}  // namespace

TEST_CASE("A quorum lost to two crashed voters heals when they return with their directories",
          "[control][raft_store][cluster]") {
  Cluster c;
  const Crash crash = crashTwo(c);
  c.restart(crash.first);
  c.restart(crash.second);
  c.commit();
  c.waitConverged();
  for (raft_id id : {crash.first, crash.second, crash.survivor}) {
    CHECK(c.server(id).applied.size() == 11);
  }
}

TEST_CASE("Voters back with empty directories under their ids cannot form a quorum",
          "[control][raft_store][cluster]") {
  Cluster c;
  const Crash crash = crashTwo(c);
  Server& survivor = c.server(crash.survivor);
  const raft_index committed = raft_last_index(&survivor.raft);
  REQUIRE(RaftIo::wipe(c.dir(crash.first)).ok());
  REQUIRE(RaftIo::wipe(c.dir(crash.second)).ok());
  c.restart(crash.first);
  c.restart(crash.second);
  // Without a configuration the empty servers neither stand nor vote: the survivor's elections
  // fail, term after term, and nobody leads.
  const raft_term term = survivor.raft.current_term;
  REQUIRE(c.runUntil([&] { return survivor.raft.current_term >= term + 3; }));
  CHECK(c.leader() == nullptr);
  CHECK(raft_last_index(&survivor.raft) == committed);  // nothing committed was lost
  CHECK(raft_last_index(&c.server(crash.first).raft) == 0);
}
