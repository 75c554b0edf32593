#include "cluster/control/control_plane.h"

extern "C" {
#include <raft.h>  // a C header without its own extern "C"
}

#include <algorithm>
#include <cassert>
#include <cstring>
#include <future>
#include <iterator>
#include <string_view>

#include <asio/post.hpp>

#include "cluster/transport/messages.h"

namespace ingrid {
namespace {

// Markers apply() leaves in raft's result pointer: whether the topology was installed.
int kAccepted = 1;
int kRejected = 0;

std::string raftError(int rv) { return raft_strerror(rv); }

}  // namespace

// The state machine raft drives: the committed topology. Its callbacks run on the control thread.
struct ControlPlane::Fsm {
  static int apply(raft_fsm* fsm, const raft_buffer* buf, void** result) {
    auto* self = static_cast<ControlPlane*>(fsm->data);
    bool accepted = false;
    self->applyCommand(buf->base, buf->len, accepted);
    *result = accepted ? &kAccepted : &kRejected;
    return 0;
  }
  static int snapshot(raft_fsm* fsm, raft_buffer* bufs[], unsigned* n) {
    auto* self = static_cast<ControlPlane*>(fsm->data);
    const std::string bytes =
        self->committed_ ? encode(TopologyBody{*self->committed_}) : std::string();
    *bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
    if (*bufs == nullptr) return RAFT_NOMEM;
    (*bufs)[0].len = bytes.size();
    (*bufs)[0].base = raft_malloc(std::max<std::size_t>(bytes.size(), 1));
    if ((*bufs)[0].base == nullptr) {
      raft_free(*bufs);
      return RAFT_NOMEM;
    }
    std::memcpy((*bufs)[0].base, bytes.data(), bytes.size());
    *n = 1;
    return 0;
  }
  // Raft hands the buffer over: it is ours to free.
  static int restore(raft_fsm* fsm, raft_buffer* buf) {
    auto* self = static_cast<ControlPlane*>(fsm->data);
    if (buf->len != 0) {
      try {
        auto t = std::make_shared<Topology>(
            decode<TopologyBody>(std::string_view(static_cast<const char*>(buf->base), buf->len))
                .topology);
        self->committed_ = t;
        self->pollWanted_ = true;
        {
          std::lock_guard lock(self->statusMu_);
          self->status_.committedVersion = t->version;
        }
        self->host_.topologyCommitted(t);
      } catch (const std::exception& e) {
        self->log_.error({.member = knownMember(self->options_.self)},
                         "control plane snapshot does not decode: ", e.what());
        return RAFT_MALFORMED;  // raft frees the buffer when restore fails
      }
    }
    raft_free(buf->base);
    return 0;
  }
};

// One proposal waiting for raft's verdict.
struct ControlPlane::Apply {
  struct raft_apply req {};
  ControlPlane* self = nullptr;
  std::uint64_t version = 0;
  Done done;
};

struct ControlPlane::Barrier {
  struct raft_barrier req {};
  Done done;
};

ControlPlane::ControlPlane(ControlHost& host, ControlPlaneOptions options, Logger log)
    : host_(host), options_(std::move(options)), log_(std::move(log)) {}

ControlPlane::~ControlPlane() { stop(); }

void ControlPlane::assertOnControlThread() const {
  assert(std::this_thread::get_id() == threadId_ && "control plane state off its thread");
}

Result<bool> ControlPlane::start(bool bootstrap, std::optional<ControlRecovery> recovery) {
  guard_.emplace(io_.get_executor());
  std::promise<Result<bool>> started;
  auto future = started.get_future();
  if ((sim_ = simulatedMember())) {
    // The simulator polls io_ on this thread, which is then the control thread: raft starts here.
    sim_->adopt(io_);
    startOnThread(bootstrap, recovery, started);
  } else {
    thread_ = std::thread([this] { io_.run(); });
    asio::post(io_, [this, bootstrap, &recovery, &started] {
      startOnThread(bootstrap, recovery, started);
    });
  }
  Result<bool> result = future.get();
  if (!result) stop();
  return result;
}

void ControlPlane::startOnThread(bool bootstrap, const std::optional<ControlRecovery>& recovery,
                                 std::promise<Result<bool>>& started) {
  threadId_ = std::this_thread::get_id();
  raftIo_ = std::make_unique<RaftIo>(io_, static_cast<RaftNetwork&>(*this), options_.dataDir, log_);
  raftIo_->onEvent([this] { raftEvent(); });
  if (recovery && !bootstrap) {
    std::vector<std::pair<std::uint64_t, std::string>> voters;
    for (const MemberInfo& m : recovery->topology->members) voters.emplace_back(m.id, m.address);
    Result<bool> loaded = raftIo_->preload(recovery->term, recovery->index, voters,
                                           encode(TopologyBody{*recovery->topology}));
    if (!loaded) {
      started.set_value(Error(loaded.error().code(), "control plane of member " +
                                                         std::to_string(options_.self) +
                                                         ": recovery: " + loaded.error().detail()));
      return;
    }
  }
  raft_ = std::make_unique<raft>();
  fsm_ = std::make_unique<raft_fsm>();
  changeReq_ = std::make_unique<raft_change>();
  changeReq_->data = this;
  fsm_->version = 1;
  fsm_->data = this;
  fsm_->apply = &Fsm::apply;
  fsm_->snapshot = &Fsm::snapshot;
  fsm_->restore = &Fsm::restore;
  const std::string who = "member " + std::to_string(options_.self) + " (" + options_.address + ")";
  int rv =
      raft_init(raft_.get(), raftIo_->get(), fsm_.get(), options_.self, options_.address.c_str());
  if (rv != 0) {
    started.set_value(Error(Errc::invalid_configuration,
                            "control plane of " + who + ": raft_init: " + raftError(rv)));
    raft_.reset();  // never initialized: nothing to close
    return;
  }
  raft_->data = this;
  raft_set_election_timeout(raft_.get(), static_cast<unsigned>(options_.electionTimeout.count()));
  raft_set_heartbeat_timeout(raft_.get(),
                             static_cast<unsigned>(options_.heartbeatInterval.count()));
  // A member that was paused or cut off does not depose a healthy leader when it comes back.
  raft_set_pre_vote(raft_.get(), true);
  raft_set_snapshot_threshold(raft_.get(), 256);
  raft_set_snapshot_trailing(raft_.get(), 64);
  // Promoting a standby that does not keep up gives up after this long, and is tried again. A
  // round may take up to a second (a loaded or slow machine), or an election timeout if longer.
  raft_set_max_catch_up_rounds(raft_.get(), 10);
  raft_set_max_catch_up_round_duration(raft_.get(), static_cast<unsigned>(std::max<std::int64_t>(
                                                        options_.electionTimeout.count(), 1000)));
  if (bootstrap) {
    raft_configuration conf;
    raft_configuration_init(&conf);
    rv = raft_configuration_add(&conf, options_.self, options_.address.c_str(), RAFT_VOTER);
    if (rv == 0) rv = raft_bootstrap(raft_.get(), &conf);
    raft_configuration_close(&conf);
    if (rv != 0) {
      started.set_value(Error(Errc::invalid_configuration,
                              "control plane of " + who + ": raft_bootstrap: " + raftError(rv)));
      return;  // stop() closes raft
    }
  }
  rv = raft_start(raft_.get());
  if (rv != 0) {
    started.set_value(Error(Errc::invalid_configuration,
                            "control plane of " + who + ": raft_start: " + raftError(rv)));
    return;
  }
  started_ = true;
  started.set_value(true);
  poll();
}

void ControlPlane::stop() {
  if (stopped_.exchange(true)) return;
  if (!thread_.joinable() && !sim_) return;  // never started
  std::promise<void> closed;
  auto future = closed.get_future();
  asio::post(io_, [this, &closed] {
    closing_ = true;
    pollTimer_.cancel();
    if (!raft_) {
      closed.set_value();
      return;
    }
    raft_->data = &closed;
    raft_close(raft_.get(),
               [](raft* r) { static_cast<std::promise<void>*>(r->data)->set_value(); });
  });
  // raft_close completes once every pending I/O callback ran; bounded anyway, so that a bug there
  // cannot hang the node's stop(). In a simulation this is the control thread: it runs what is
  // queued (every completion is posted, the close's last) instead of waiting for it.
  const auto closedNow = [&future] {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  if (sim_) {
    while (!closedNow() && io_.poll_one() != 0) {
    }
  }
  if (sim_ ? !closedNow()
           : future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    log_.error({.member = knownMember(options_.self)}, "control plane of member ", options_.self,
               sim_ ? " did not close (nothing left to run); stopping it"
                    : " did not close within 10 s; stopping its thread");
  }
  guard_.reset();
  io_.stop();
  if (sim_) {
    sim_->forget(io_);
  } else {
    thread_.join();
  }
  // Whatever raft left queued on the io_context is destroyed uncalled with it.
  raft_.reset();
  raftIo_.reset();
  isLeader_.store(false, std::memory_order_release);
}

void ControlPlane::deliver(std::string bytes) {
  if (stopped_.load(std::memory_order_acquire)) return;
  asio::post(io_, [this, bytes = std::move(bytes)] {
    if (!started_ || closing_) return;
    Result<bool> ok = raftIo_->deliver(bytes);
    (void)ok;  // a malformed message is dropped; raft retries what matters
  });
}

void ControlPlane::sendRaftMessage(std::uint64_t to, const std::string& address,
                                   std::string bytes) {
  host_.sendControl(to, address, std::move(bytes));
}

void ControlPlane::propose(std::shared_ptr<Topology> next, Done done) {
  if (stopped_.load(std::memory_order_acquire)) {
    done(Error(Errc::shutting_down, "control plane is stopping"));
    return;
  }
  asio::post(io_, [this, next = std::move(next), done = std::move(done)]() mutable {
    if (!started_ || closing_ || raft_state(raft_.get()) != RAFT_LEADER) {
      done(Error(Errc::unavailable,
                 "member " + std::to_string(options_.self) + " is not the control plane's leader"));
      return;
    }
    const std::uint64_t committed = committed_ ? committed_->version : 0;
    if (next->version != committed + 1) {
      done(Error(Errc::unavailable, "topology v" + std::to_string(next->version) +
                                        " is not next after committed v" +
                                        std::to_string(committed)));
      return;
    }
    next->term = raft_->current_term;
    next->leader = options_.self;
    const std::string bytes = encode(TopologyBody{*next});
    raft_buffer buf;
    buf.len = bytes.size();
    buf.base = raft_malloc(bytes.size());
    if (buf.base == nullptr) {
      done(Error(Errc::overloaded, "out of memory proposing a topology"));
      return;
    }
    std::memcpy(buf.base, bytes.data(), bytes.size());
    auto apply = std::make_unique<Apply>();
    apply->self = this;
    apply->version = next->version;
    apply->done = std::move(done);
    apply->req.data = apply.get();
    const int rv = raft_apply(
        raft_.get(), &apply->req, &buf, 1, [](struct raft_apply* req, int status, void* result) {
          std::unique_ptr<Apply> a(static_cast<Apply*>(req->data));
          if (status != 0) {
            a->done(Error(Errc::unavailable, "topology v" + std::to_string(a->version) +
                                                 " was not committed: " + raftError(status)));
          } else if (result != &kAccepted) {
            a->done(Error(Errc::unavailable, "topology v" + std::to_string(a->version) +
                                                 " was committed after another one: not applied"));
          } else {
            a->done(true);
          }
        });
    if (rv != 0) {
      raft_free(buf.base);
      apply->done(Error(Errc::unavailable, "topology v" + std::to_string(apply->version) +
                                               " was not proposed: " + raftError(rv)));
      return;
    }
    (void)apply.release();  // the callback owns it now
  });
}

void ControlPlane::barrier(Done done) {
  if (stopped_.load(std::memory_order_acquire)) {
    done(Error(Errc::shutting_down, "control plane is stopping"));
    return;
  }
  asio::post(io_, [this, done = std::move(done)]() mutable {
    if (!started_ || closing_ || raft_state(raft_.get()) != RAFT_LEADER) {
      done(Error(Errc::unavailable,
                 "member " + std::to_string(options_.self) + " is not the control plane's leader"));
      return;
    }
    auto b = std::make_unique<Barrier>();
    b->done = std::move(done);
    b->req.data = b.get();
    const int rv = raft_barrier(raft_.get(), &b->req, [](struct raft_barrier* req, int status) {
      std::unique_ptr<Barrier> owned(static_cast<Barrier*>(req->data));
      if (status != 0) {
        owned->done(
            Error(Errc::unavailable, std::string("barrier not committed: ") + raftError(status)));
      } else {
        owned->done(true);
      }
    });
    if (rv != 0) {
      b->done(Error(Errc::unavailable, "barrier not proposed: " + raftError(rv)));
      return;
    }
    (void)b.release();
  });
}

int ControlPlane::applyCommand(const void* data, std::size_t len, bool& accepted) {
  assertOnControlThread();
  std::shared_ptr<Topology> next;
  try {
    next = std::make_shared<Topology>(
        decode<TopologyBody>(std::string_view(static_cast<const char*>(data), len)).topology);
  } catch (const std::exception& e) {
    log_.error({.member = knownMember(options_.self), .term = term_.load()},
               "control plane entry does not decode: ", e.what());
    return 0;
  }
  const std::uint64_t committed = committed_ ? committed_->version : 0;
  // Two proposals raced (a leader re-planned while its earlier one was in flight): only the one
  // that is next counts, so every member installs the same sequence.
  if (next->version != committed + 1) return 0;
  // Every member applies the same entries in the same order (or restores a snapshot holding the
  // stamped topology), so every member computes the same epochs.
  next->stampEpochs(committed_.get());
  accepted = true;
  committed_ = next;
  {
    std::lock_guard lock(statusMu_);
    status_.committedVersion = next->version;
  }
  host_.topologyCommitted(next);
  // The Raft configuration follows on the next poll (within 20 ms), not from inside raft's apply
  // loop, which must not be re-entered with a configuration change.
  pollWanted_ = true;
  return 0;
}

void ControlPlane::poll() {
  assertOnControlThread();
  if (closing_) return;
  polledAt_ = steadyNow();
  polledMark_ = pollMark();
  pollWanted_ = false;
  raft* r = raft_.get();
  const bool leader = raft_state(r) == RAFT_LEADER;
  raft_id leaderId = 0;
  const char* leaderAddress = nullptr;
  raft_leader(r, &leaderId, &leaderAddress);
  const std::uint64_t term = r->current_term;
  {
    std::lock_guard lock(statusMu_);
    status_.self = options_.self;
    status_.term = term;
    status_.leader = leaderId;
    // The last contact with a leader, kept across states (a candidate names none).
    const raft_time now = r->io->time(r->io);
    if (leader) {
      lastLeaderContact_ = now;
    } else if (raft_state(r) == RAFT_FOLLOWER && leaderId != 0) {
      lastLeaderContact_ = r->election_timer_start;  // reset by each message of the leader
    }
    statusContactMs_ = lastLeaderContact_;  // status() counts the silence from it
    status_.isLeader = leader;
    status_.voters.clear();
    status_.standbys.clear();
    status_.spares.clear();
    status_.servers.clear();
    for (unsigned i = 0; i < r->configuration.n; ++i) {
      const raft_server& s = r->configuration.servers[i];
      (s.role == RAFT_VOTER     ? status_.voters
       : s.role == RAFT_STANDBY ? status_.standbys
                                : status_.spares)
          .push_back(s.id);
      status_.servers.emplace_back(s.id, s.address != nullptr ? s.address : "");
    }
    status_.configurationCommitted = r->configuration_uncommitted_index == 0;
  }
  // A follower that does not vote (as far as it knows) has nothing to time: it ticks rarely (a
  // leader's first message after promoting it is an event, and polls). One that votes ticks at
  // the heartbeat rate (half an election timeout), so that its election starts at most that long
  // after its timer ran out (NodeOptions::electionTimeout's bound).
  bool votes = false;
  for (unsigned i = 0; i < r->configuration.n; ++i) {
    const raft_server& s = r->configuration.servers[i];
    if (s.id == options_.self) votes = s.role == RAFT_VOTER;
  }
  raftIo_->tickEvery(raft_state(r) == RAFT_FOLLOWER && !votes
                         ? std::max(options_.electionTimeout, kNonVoterTick)
                         : std::chrono::milliseconds(0));
  term_.store(term, std::memory_order_release);
  const bool changed = leader != wasLeader_ || (leader && term != leaderTerm_);
  if (changed) {
    if (wasLeader_) host_.leadershipChanged(false, leaderTerm_);
    wasLeader_ = leader;
    leaderTerm_ = term;
    isLeader_.store(leader, std::memory_order_release);
    if (leader) host_.leadershipChanged(true, term);
  }
  if (leaderId != 0 && (leaderId != learntLeader_ || term != learntTerm_)) {
    learntLeader_ = leaderId;
    learntTerm_ = term;
    host_.leaderLearnt(leaderId, term);
  }
  if (leader) reconcile();
}

ControlPlane::PollMark ControlPlane::pollMark() {
  raft* r = raft_.get();
  PollMark m;
  m.state = raft_state(r);
  m.term = r->current_term;
  raft_id leaderId = 0;
  const char* leaderAddress = nullptr;
  raft_leader(r, &leaderId, &leaderAddress);
  m.leader = leaderId;
  m.configurationIndex = r->configuration_index;
  m.configurationUncommitted = r->configuration_uncommitted_index;
  m.servers = r->configuration.n;
  return m;
}

void ControlPlane::raftEvent() {
  assertOnControlThread();
  if (closing_ || !started_ || pollDue_) return;
  const auto due = polledAt_ + kPollSpacing;
  const bool now = steadyNow() >= due;
  if (!now && !pollWanted_ && pollMark() == polledMark_) return;  // the next tick polls
  pollDue_ = true;
  if (now) {
    asio::post(io_, [this] {
      pollDue_ = false;
      poll();
    });
    return;
  }
  pollTimer_.expires_at(due);
  pollTimer_.async_wait([this](std::error_code ec) {
    pollDue_ = false;
    if (!ec) poll();
  });
}

void ControlPlane::reconcile() {
  assertOnControlThread();
  if (closing_ || changing_ || transferring_ || !committed_) return;
  raft* r = raft_.get();
  const Topology& t = *committed_;
  const raft_configuration& conf = r->configuration;
  auto inConf = [&](MemberId id) -> const raft_server* {
    for (unsigned i = 0; i < conf.n; ++i) {
      if (conf.servers[i].id == id) return &conf.servers[i];
    }
    return nullptr;
  };
  auto voterCount = [&] {
    unsigned n = 0;
    for (unsigned i = 0; i < conf.n; ++i) n += conf.servers[i].role == RAFT_VOTER ? 1 : 0;
    return n;
  };
  auto change = [this](int rv) {
    if (rv != 0) changing_ = false;  // refused now (e.g. a change still uncommitted): next poll
  };
  // 1. Servers that are no longer members leave the configuration.
  for (unsigned i = 0; i < conf.n; ++i) {
    const raft_id id = conf.servers[i].id;
    if (id != options_.self && !t.hasMember(id)) {
      changing_ = true;
      change(raft_remove(r, changeReq_.get(), id, &ControlPlane::onChange));
      return;
    }
  }
  // 2. Members missing from it join (as spares, then get their role below).
  for (const MemberInfo& m : t.members) {
    if (inConf(m.id) == nullptr) {
      changing_ = true;
      change(raft_add(r, changeReq_.get(), m.id, m.address.c_str(), &ControlPlane::onChange));
      return;
    }
  }
  // 3. The chosen members vote (votersOf); promote before demoting, so the number of voters
  //    never drops below what is wanted on the way.
  const std::vector<MemberId> voters = votersOf(t.members, options_.voters);
  auto votes = [&](MemberId id) {
    return std::find(voters.begin(), voters.end(), id) != voters.end();
  };
  std::vector<MemberId> ids = t.memberIds();
  std::sort(ids.begin(), ids.end());
  // Voters vote; every other member is a spare, which receives nothing from Raft (its node
  // receives each committed topology from the leader's node instead: ControlHost), so an idle
  // member that does not vote costs the leader nothing per heartbeat. A member chosen to vote
  // follows the log as a standby first and is promoted once caught up (a spare promoted at once
  // would be caught up within the promotion, which took seconds on a loaded machine: a young
  // cluster had one voter meanwhile). A voter no longer chosen is a standby, and becomes a spare
  // only once it holds the configuration that made it a standby: a spare never hears of later
  // configurations, and one that still believed it voted would stand for election.
  for (MemberId id : ids) {
    const raft_server* s = inConf(id);
    if (s != nullptr && s->role != RAFT_VOTER && votes(id)) {
      changing_ = true;
      change(raft_assign(r, changeReq_.get(), id, s->role == RAFT_SPARE ? RAFT_STANDBY : RAFT_VOTER,
                         &ControlPlane::onChange));
      return;
    }
  }
  for (MemberId id : ids) {
    const raft_server* s = inConf(id);
    if (s != nullptr && s->role == RAFT_VOTER && !votes(id) && id != options_.self) {
      changing_ = true;
      change(raft_assign(r, changeReq_.get(), id, RAFT_STANDBY, &ControlPlane::onChange));
      return;
    }
  }
  if (r->configuration_uncommitted_index == 0) {
    for (unsigned i = 0; i < conf.n; ++i) {
      const raft_server& s = conf.servers[i];
      if (s.role == RAFT_STANDBY && s.id != options_.self && !votes(s.id) &&
          r->leader_state.progress[i].match_index >= r->configuration_index) {
        changing_ = true;
        change(raft_assign(r, changeReq_.get(), s.id, RAFT_SPARE, &ControlPlane::onChange));
        return;
      }
    }
  }
  // 4. A leader that is no longer a member (it left, or it is a restored Raft server whose member
  //    was removed) hands leadership to another voter once the configuration follows the
  //    topology in everything else (so the voter it picks is a member); the next leader removes
  //    it from the configuration.
  if (!t.hasMember(options_.self) && voterCount() > 1) {
    transferring_ = true;
    using Transfer = struct raft_transfer;
    auto* req = new Transfer();
    req->data = this;
    const int rv = raft_transfer(r, req, 0, [](struct raft_transfer* q) {
      auto* self = static_cast<ControlPlane*>(q->data);
      self->transferring_ = false;
      self->pollWanted_ = true;
      delete q;
    });
    if (rv != 0) {
      transferring_ = false;
      delete req;
    }
  }
}

std::vector<MemberId> votersOf(const std::vector<MemberInfo>& members, unsigned most) {
  std::size_t wanted = std::min<std::size_t>(most, members.size());
  if (wanted > 3 && wanted % 2 == 0) --wanted;
  // Each zone's members by id; the zones in the order of their smallest id.
  std::vector<const MemberInfo*> sorted;
  for (const MemberInfo& m : members) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(),
            [](const MemberInfo* a, const MemberInfo* b) { return a->id < b->id; });
  std::vector<std::pair<std::string_view, std::vector<MemberId>>> zones;
  for (const MemberInfo* m : sorted) {
    auto it =
        std::find_if(zones.begin(), zones.end(), [&](const auto& z) { return z.first == m->zone; });
    if (it == zones.end()) {
      zones.emplace_back(m->zone, std::vector<MemberId>{});
      it = std::prev(zones.end());
    }
    it->second.push_back(m->id);
  }
  std::vector<MemberId> out;
  for (std::size_t round = 0; out.size() < wanted; ++round) {
    for (const auto& [zone, ids] : zones) {
      if (round < ids.size() && out.size() < wanted) out.push_back(ids[round]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ControlPlane::onChange(raft_change* req, int status) {
  auto* self = static_cast<ControlPlane*>(req->data);
  self->changing_ = false;
  self->pollWanted_ = true;
  if (status != 0 && status != RAFT_LEADERSHIPLOST && !self->closing_) {
    self->log_.warn({.member = knownMember(self->options_.self), .term = self->term_.load()},
                    "control plane of member ", self->options_.self,
                    ": a configuration change failed: ", raftError(status));
  }
}

ControlStatus ControlPlane::status() const {
  std::lock_guard lock(statusMu_);
  ControlStatus s = status_;
  // Counted now, not at the last poll (an idle member polls at its ticks): raft's clock is the
  // steady clock in milliseconds (RaftIo).
  const auto now = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow().time_since_epoch())
          .count());
  s.leaderSilentMs = s.isLeader              ? 0
                     : statusContactMs_ == 0 ? UINT64_MAX
                                             : now - std::min(now, statusContactMs_);
  return s;
}

}  // namespace ingrid
