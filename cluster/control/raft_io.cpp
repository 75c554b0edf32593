// RaftIo (raft_io.h): libraft's I/O on an Asio io_context; messages in raft_codec.h's encoding.
#include "cluster/control/raft_io.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <asio/post.hpp>

#include "cluster/control/raft_codec.h"

namespace ingrid {
namespace {

void freeSnapshot(raft_snapshot* s) {
  if (s == nullptr) return;
  raft_configuration_close(&s->configuration);
  for (unsigned i = 0; i < s->n_bufs; ++i) raft_free(s->bufs[i].base);
  raft_free(s->bufs);
  raft_free(s);
}

// A raft_malloc'ed copy of `src`, its buffers joined into one (what raft expects back).
raft_snapshot* copySnapshot(const raft_snapshot& src) {
  auto* s = static_cast<raft_snapshot*>(raft_calloc(1, sizeof(raft_snapshot)));
  if (s == nullptr) return nullptr;
  s->index = src.index;
  s->term = src.term;
  s->configuration_index = src.configuration_index;
  raft_configuration_init(&s->configuration);
  for (unsigned i = 0; i < src.configuration.n; ++i) {
    const raft_server& server = src.configuration.servers[i];
    if (raft_configuration_add(&s->configuration, server.id, server.address, server.role) != 0) {
      freeSnapshot(s);
      return nullptr;
    }
  }
  std::size_t total = 0;
  for (unsigned i = 0; i < src.n_bufs; ++i) total += src.bufs[i].len;
  s->bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
  if (s->bufs == nullptr) {
    freeSnapshot(s);
    return nullptr;
  }
  s->n_bufs = 1;
  s->bufs[0].len = total;
  s->bufs[0].base = raft_malloc(total == 0 ? 1 : total);
  if (s->bufs[0].base == nullptr) {
    freeSnapshot(s);
    return nullptr;
  }
  std::size_t at = 0;
  for (unsigned i = 0; i < src.n_bufs; ++i) {
    if (src.bufs[i].len != 0)
      std::memcpy(static_cast<char*>(s->bufs[0].base) + at, src.bufs[i].base, src.bufs[i].len);
    at += src.bufs[i].len;
  }
  return s;
}

// The stored form of `src` (its buffers joined).
RaftStore::Snapshot toStored(const raft_snapshot& src) {
  RaftStore::Snapshot s;
  s.index = src.index;
  s.term = src.term;
  s.configurationIndex = src.configuration_index;
  for (unsigned i = 0; i < src.configuration.n; ++i) {
    const raft_server& server = src.configuration.servers[i];
    s.servers.push_back(
        {server.id, static_cast<std::uint8_t>(server.role), server.address ? server.address : ""});
  }
  for (unsigned i = 0; i < src.n_bufs; ++i) {
    s.data.append(static_cast<const char*>(src.bufs[i].base), src.bufs[i].len);
  }
  return s;
}

// A raft_malloc'ed snapshot made from the stored form; nullptr if out of memory or a server is
// not valid in a configuration.
raft_snapshot* fromStored(const RaftStore::Snapshot& stored) {
  raft_snapshot src{};
  src.index = stored.index;
  src.term = stored.term;
  src.configuration_index = stored.configurationIndex;
  raft_configuration_init(&src.configuration);
  for (const auto& server : stored.servers) {
    if (raft_configuration_add(&src.configuration, server.id, server.address.c_str(),
                               server.role) != 0) {
      raft_configuration_close(&src.configuration);
      return nullptr;
    }
  }
  raft_buffer buf{const_cast<char*>(stored.data.data()), stored.data.size()};
  src.bufs = &buf;
  src.n_bufs = 1;
  raft_snapshot* copy = copySnapshot(src);
  raft_configuration_close(&src.configuration);
  return copy;
}

std::uint64_t steadyMillis() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow().time_since_epoch())
          .count());
}

}  // namespace

// The raft_io methods: each forwards to the RaftIo in io->impl. Completions are posted, never
// run inside the call that started them (raft does not expect re-entry).
struct RaftIo::Impl {
  static int init(raft_io* io, raft_id id, const char* address) {
    RaftIo& s = self(io);
    s.id_ = id;
    s.address_ = address ? address : "";
    const Result<bool> opened = s.openStore();
    return opened.ok() ? 0 : s.failed(opened.error());
  }
  static void close(raft_io* io, raft_io_close_cb cb) {
    RaftIo& s = self(io);
    s.closed_ = true;
    s.ticker_.cancel();
    // Posted after every completion already queued: raft sees them all before it is closed.
    asio::post(s.ctx_, [io, cb, alive = std::weak_ptr<bool>(s.alive_)] {
      if (!alive.expired() && cb != nullptr) cb(io);
    });
  }
  static int load(raft_io* io, raft_term* term, raft_id* votedFor, raft_snapshot** snapshot,
                  raft_index* startIndex, raft_entry* entries[], size_t* n) {
    RaftIo& s = self(io);
    *term = s.term_;
    *votedFor = s.votedFor_;
    *snapshot = nullptr;
    *startIndex = 1;
    *entries = nullptr;
    *n = 0;
    if (s.store_) return loadStored(s, snapshot, startIndex, entries, n);
    if (s.snapshot_ != nullptr) {
      *snapshot = copySnapshot(*s.snapshot_);
      if (*snapshot == nullptr) return RAFT_NOMEM;
      *startIndex = s.snapshot_->index + 1;
      return 0;
    }
    if (s.bootstrapConf_.empty()) return 0;
    auto* e = static_cast<raft_entry*>(raft_calloc(1, sizeof(raft_entry)));
    void* batch = raft_malloc(s.bootstrapConf_.size());
    if (e == nullptr || batch == nullptr) {
      raft_free(e);
      raft_free(batch);
      return RAFT_NOMEM;
    }
    std::memcpy(batch, s.bootstrapConf_.data(), s.bootstrapConf_.size());
    e->term = 1;
    e->type = RAFT_CHANGE;
    e->buf.base = batch;
    e->buf.len = s.bootstrapConf_.size();
    e->batch = batch;
    *entries = e;
    *n = 1;
    return 0;
  }
  // load() with a directory: the snapshot and the entries read when it was opened.
  static int loadStored(RaftIo& s, raft_snapshot** snapshot, raft_index* startIndex,
                        raft_entry* entries[], size_t* n) {
    if (s.snapshot_ != nullptr) {
      *snapshot = copySnapshot(*s.snapshot_);
      if (*snapshot == nullptr) return RAFT_NOMEM;
      *startIndex = s.snapshot_->index + 1;
    }
    if (s.loaded_.empty()) return 0;
    std::size_t total = 0;
    for (const auto& e : s.loaded_) total += e.data.size();
    auto* es = static_cast<raft_entry*>(raft_calloc(s.loaded_.size(), sizeof(raft_entry)));
    void* batch = raft_malloc(total == 0 ? 1 : total);  // shared by every entry
    if (es == nullptr || batch == nullptr) {
      raft_free(es);
      raft_free(batch);
      freeSnapshot(*snapshot);
      *snapshot = nullptr;
      return RAFT_NOMEM;
    }
    std::size_t at = 0;
    for (std::size_t i = 0; i < s.loaded_.size(); ++i) {
      const RaftStore::Entry& src = s.loaded_[i];
      es[i].term = src.term;
      es[i].type = src.type;
      es[i].buf.base = static_cast<char*>(batch) + at;
      es[i].buf.len = src.data.size();
      es[i].batch = batch;
      if (!src.data.empty()) std::memcpy(es[i].buf.base, src.data.data(), src.data.size());
      at += src.data.size();
    }
    *startIndex = s.loaded_.front().index;
    *entries = es;
    *n = s.loaded_.size();
    s.loaded_.clear();
    s.loaded_.shrink_to_fit();
    return 0;
  }
  static int start(raft_io* io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv) {
    RaftIo& s = self(io);
    s.tickMs_ = msecs == 0 ? 1 : msecs;
    s.tickCb_ = tick;
    s.recvCb_ = recv;
    s.tick();
    return 0;
  }
  static int bootstrap(raft_io* io, const raft_configuration* conf) {
    RaftIo& s = self(io);
    if (const Result<bool> opened = s.openStore(); !opened.ok()) return s.failed(opened.error());
    if (s.term_ != 0 || !s.bootstrapConf_.empty() || s.snapshot_ != nullptr ||
        (s.store_ && s.store_->hasEntries())) {
      return RAFT_CANTBOOTSTRAP;
    }
    raft_buffer buf{};
    const int rv = raft_configuration_encode(conf, &buf);
    if (rv != 0) return rv;
    if (s.store_) {
      raft_entry e{};
      e.term = 1;
      e.type = RAFT_CHANGE;
      e.buf = buf;
      Result<bool> done = s.store_->append(&e, 1);
      if (done.ok()) done = s.store_->setTermVote(1, 0);
      if (done.ok()) {
        s.loaded_.push_back(
            {1, 1, RAFT_CHANGE, std::string(static_cast<const char*>(buf.base), buf.len)});
      }
      raft_free(buf.base);
      if (!done.ok()) return s.failed(done.error());
      s.term_ = 1;
      s.votedFor_ = 0;
      return 0;
    }
    s.bootstrapConf_.assign(static_cast<const char*>(buf.base), buf.len);
    raft_free(buf.base);
    s.term_ = 1;
    s.votedFor_ = 0;
    return 0;
  }
  static int recover(raft_io*, const raft_configuration*) { return RAFT_IOERR; }  // no disk
  static int setTerm(raft_io* io, raft_term term) {
    RaftIo& s = self(io);
    if (s.store_) {
      if (const Result<bool> done = s.store_->setTermVote(term, 0); !done.ok()) {
        return s.failed(done.error());
      }
    }
    s.term_ = term;
    s.votedFor_ = 0;
    return 0;
  }
  static int setVote(raft_io* io, raft_id id) {
    RaftIo& s = self(io);
    if (s.store_) {
      if (const Result<bool> done = s.store_->setTermVote(s.term_, id); !done.ok()) {
        return s.failed(done.error());
      }
    }
    s.votedFor_ = id;
    return 0;
  }
  static int send(raft_io* io, raft_io_send* req, const raft_message* message, raft_io_send_cb cb) {
    RaftIo& s = self(io);
    req->cb = cb;
    try {
      s.network_.sendRaftMessage(message->server_id,
                                 message->server_address ? message->server_address : "",
                                 encodeRaftMessage(*message, s.id_, s.address_.c_str()));
    } catch (const std::exception&) {
      return RAFT_NOMEM;  // an address or buffer too long to encode; raft treats it as not sent
    }
    // A send without a callback (leadership transfer's TimeoutNow) is not awaited: raft may free
    // its request at any time, so nothing is posted that would read it.
    if (cb == nullptr) return 0;
    asio::post(s.ctx_, [req, cb, alive = std::weak_ptr<bool>(s.alive_)] {
      if (!alive.expired()) cb(req, 0);
    });
    return 0;
  }
  static int append(raft_io* io, raft_io_append* req, const raft_entry entries[], unsigned n,
                    raft_io_append_cb cb) {
    RaftIo& s = self(io);
    req->cb = cb;  // raft keeps its own log in memory; nothing reads the entries back
    int status = 0;
    if (s.store_) {
      if (const Result<bool> done = s.store_->append(entries, n); !done.ok()) {
        status = s.failed(done.error());
      }
    }
    if (cb == nullptr) return 0;
    asio::post(s.ctx_, [io, req, cb, status, alive = std::weak_ptr<bool>(s.alive_)] {
      if (alive.expired()) return;
      cb(req, status);
      self(io).handled();
    });
    return 0;
  }
  static int truncate(raft_io* io, raft_index index) {
    RaftIo& s = self(io);
    if (!s.store_) return 0;
    const Result<bool> done = s.store_->truncate(index);
    return done.ok() ? 0 : s.failed(done.error());
  }
  static int snapshotPut(raft_io* io, unsigned trailing, raft_io_snapshot_put* req,
                         const raft_snapshot* snapshot, raft_io_snapshot_put_cb cb) {
    RaftIo& s = self(io);
    raft_snapshot* copy = copySnapshot(*snapshot);
    if (copy == nullptr) return RAFT_NOMEM;
    int status = 0;
    if (s.store_) {
      const Result<bool> done = s.store_->putSnapshot(toStored(*snapshot), trailing);
      if (!done.ok()) status = s.failed(done.error());
    }
    if (status == 0) {
      freeSnapshot(s.snapshot_);
      s.snapshot_ = copy;
    } else {
      freeSnapshot(copy);
    }
    req->cb = cb;
    if (cb == nullptr) return 0;
    asio::post(s.ctx_, [io, req, cb, status, alive = std::weak_ptr<bool>(s.alive_)] {
      if (alive.expired()) return;
      cb(req, status);
      self(io).handled();
    });
    return 0;
  }
  static int snapshotGet(raft_io* io, raft_io_snapshot_get* req, raft_io_snapshot_get_cb cb) {
    RaftIo& s = self(io);
    req->cb = cb;
    asio::post(s.ctx_, [io, req, alive = std::weak_ptr<bool>(s.alive_)] {
      if (alive.expired()) return;
      RaftIo& me = self(io);
      if (me.snapshot_ == nullptr) {
        req->cb(req, nullptr, RAFT_NOTFOUND);
      } else {
        raft_snapshot* copy = copySnapshot(*me.snapshot_);
        req->cb(req, copy, copy == nullptr ? RAFT_NOMEM : 0);
      }
      me.handled();
    });
    return 0;
  }
  static raft_time time(raft_io*) { return steadyMillis(); }
  // In [min, max).
  static int random(raft_io* io, int min, int max) {
    if (max <= min) return min;
    if (SimulatedMember* sim = self(io).sim_) {
      const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(max) - min);
      return min + static_cast<int>(sim->random() % span);
    }
    return std::uniform_int_distribution<int>(min, max - 1)(self(io).random_);
  }
};

RaftIo::RaftIo(asio::io_context& io, RaftNetwork& network, std::string dataDir, Logger log)
    : ctx_(io),
      network_(network),
      ticker_(io),
      dataDir_(std::move(dataDir)),
      log_(std::move(log)),
      sim_(simulatedMember()),
      random_(sim_ ? 0 : std::random_device{}()) {
  io_.version = 1;
  io_.impl = this;
  io_.init = &Impl::init;
  io_.close = &Impl::close;
  io_.load = &Impl::load;
  io_.start = &Impl::start;
  io_.bootstrap = &Impl::bootstrap;
  io_.recover = &Impl::recover;
  io_.set_term = &Impl::setTerm;
  io_.set_vote = &Impl::setVote;
  io_.send = &Impl::send;
  io_.append = &Impl::append;
  io_.truncate = &Impl::truncate;
  io_.snapshot_put = &Impl::snapshotPut;
  io_.snapshot_get = &Impl::snapshotGet;
  io_.time = &Impl::time;
  io_.random = &Impl::random;
}

RaftIo::~RaftIo() {
  alive_.reset();
  freeSnapshot(snapshot_);
}

void RaftIo::tickEvery(std::chrono::milliseconds every) {
  const unsigned want = static_cast<unsigned>(std::max<std::int64_t>(every.count(), 0));
  if (want == slowTickMs_) return;
  slowTickMs_ = want;
  if (tickCb_ == nullptr || closed_) return;  // not started (start() arms the first tick)
  ticker_.cancel();  // the pending wait ends with operation_aborted and does not re-arm
  tick();
}

void RaftIo::tick() {
  ticker_.expires_after(std::chrono::milliseconds(slowTickMs_ != 0 ? slowTickMs_ : tickMs_));
  ticker_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
    if (ec || alive.expired() || closed_) return;
    tickCb_(&io_);
    handled();
    if (!closed_) tick();
  });
}

Result<bool> RaftIo::openStore() {
  if (dataDir_.empty() || store_) return true;
  RaftStore::State state;
  auto opened = RaftStore::open(dataDir_, state);
  if (!opened.ok()) return std::move(opened).error();
  if (state.snapshot) {
    raft_snapshot* s = fromStored(*state.snapshot);
    if (s == nullptr) {
      return Error(Errc::invalid_configuration,
                   dataDir_ + "/raft-snapshot: out of memory or an invalid configuration");
    }
    freeSnapshot(snapshot_);
    snapshot_ = s;
  }
  term_ = state.term;
  votedFor_ = state.vote;
  loaded_ = std::move(state.entries);
  store_ = std::move(*opened);
  return true;
}

int RaftIo::failed(const Error& e) const {
  log_.error({.member = knownMember(id_), .term = term_}, "Raft storage: ", e.message());
  return RAFT_IOERR;
}

Result<bool> RaftIo::preload(std::uint64_t term, std::uint64_t index,
                             const std::vector<std::pair<std::uint64_t, std::string>>& voters,
                             std::string_view data) {
  if (Result<bool> opened = openStore(); !opened.ok()) return opened;
  if (term_ != 0 || snapshot_ != nullptr || !bootstrapConf_.empty() || recvCb_ != nullptr ||
      (store_ && store_->hasEntries())) {
    return Error(Errc::invalid_configuration, "Raft storage already holds state: no preload");
  }
  if (term == 0 || index == 0 || voters.empty()) {
    return Error(Errc::invalid_argument, "a preloaded snapshot needs a term, an index and voters");
  }
  raft_snapshot src{};
  src.index = index;
  src.term = term;
  src.configuration_index = index;
  raft_configuration_init(&src.configuration);
  for (const auto& [id, address] : voters) {
    if (raft_configuration_add(&src.configuration, id, address.c_str(), RAFT_VOTER) != 0) {
      raft_configuration_close(&src.configuration);
      return Error(Errc::invalid_argument, "server " + std::to_string(id) + " (" + address +
                                               ") is not valid in a configuration");
    }
  }
  raft_buffer buf{const_cast<char*>(data.data()), data.size()};
  src.bufs = &buf;
  src.n_bufs = 1;
  raft_snapshot* copy = copySnapshot(src);
  raft_configuration_close(&src.configuration);
  if (copy == nullptr) return Error(Errc::overloaded, "out of memory preloading a snapshot");
  if (store_) {
    Result<bool> done = store_->putSnapshot(toStored(*copy), 0);
    if (done.ok()) done = store_->setTermVote(term, 0);
    if (!done.ok()) {
      freeSnapshot(copy);
      return done;
    }
  }
  snapshot_ = copy;
  term_ = term;
  votedFor_ = 0;
  return true;
}

Result<bool> RaftIo::deliver(std::string_view bytes) {
  DecodedRaftMessage d;
  if (Result<bool> decoded = decodeRaftMessage(bytes, d); !decoded.ok()) return decoded;
  if (recvCb_ == nullptr || closed_) return false;  // well-formed, but raft is not running
  d.release();  // raft owns the entries, the snapshot's configuration and data now
  recvCb_(&io_, &d.message);
  handled();
  return true;
}

}  // namespace ingrid
