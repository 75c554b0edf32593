#include "cluster/control/raft_io.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include <asio/post.hpp>

namespace ingrid {
namespace {

// Little-endian writer of the encoding described in raft_io.h.
class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void str(const char* s) {
    const std::size_t n = s ? std::strlen(s) : 0;
    if (n > std::numeric_limits<std::uint16_t>::max()) throw std::length_error("address too long");
    u16(static_cast<std::uint16_t>(n));
    out_.append(s ? s : "", n);
  }
  void bytes(const void* p, std::size_t n) {
    if (n > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("buffer too long");
    u32(static_cast<std::uint32_t>(n));
    out_.append(static_cast<const char*>(p), n);
  }
  std::string take() { return std::move(out_); }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reader: every read checks the bytes that remain and throws std::length_error naming the field.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(get(1, what)); }
  std::uint16_t u16(const char* what) { return static_cast<std::uint16_t>(get(2, what)); }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(get(4, what)); }
  std::uint64_t u64(const char* what) { return get(8, what); }
  std::string_view str(const char* what) { return take(u16(what), what); }
  std::string_view bytes(const char* what) { return take(u32(what), what); }
  std::size_t left() const noexcept { return in_.size() - pos_; }

 private:
  std::uint64_t get(std::size_t n, const char* what) {
    need(n, what);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      v |= std::uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
    }
    pos_ += n;
    return v;
  }
  std::string_view take(std::size_t n, const char* what) {
    need(n, what);
    std::string_view v = in_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  void need(std::size_t n, const char* what) const {
    if (left() < n) {
      throw std::length_error(std::string(what) + " needs " + std::to_string(n) + " bytes, only " +
                              std::to_string(left()) + " left");
    }
  }
  std::string_view in_;
  std::size_t pos_ = 0;
};

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

// Owns what a decoded message allocated until raft takes it over.
struct Decoded {
  raft_message m{};
  std::string address;
  raft_entry* entries = nullptr;
  void* batch = nullptr;
  bool confMade = false;
  void* data = nullptr;
  void release() noexcept {  // raft owns it all now
    entries = nullptr;
    batch = nullptr;
    confMade = false;
    data = nullptr;
  }
  ~Decoded() {
    raft_free(entries);
    raft_free(batch);
    if (confMade) raft_configuration_close(&m.install_snapshot.conf);
    raft_free(data);
  }
};

constexpr std::size_t kEntryHeaderBytes = 8 + 2 + 4;   // term, type, data length
constexpr std::size_t kServerHeaderBytes = 8 + 1 + 2;  // id, role, address length

void decodeInto(std::string_view bytes, Decoded& d) {
  Reader r(bytes);
  raft_message& m = d.m;
  m.type = r.u8("type");
  m.server_id = r.u64("sender id");
  // Raft asserts (rather than checks) that ids, terms and snapshot indexes are not 0, and it uses
  // addresses as C strings: refuse such messages here instead.
  if (m.server_id == 0) throw std::invalid_argument("sender id 0");
  d.address = std::string(r.str("sender address"));
  if (d.address.find('\0') != std::string::npos) throw std::invalid_argument("NUL in address");
  switch (m.type) {
    case RAFT_IO_REQUEST_VOTE: {
      auto& v = m.request_vote;
      v.term = r.u64("term");
      v.candidate_id = r.u64("candidate id");
      // A server asks votes for itself only: a request naming another candidate is refused.
      if (v.candidate_id != m.server_id) throw std::invalid_argument("candidate id is not sender");
      v.last_log_index = r.u64("last log index");
      v.last_log_term = r.u64("last log term");
      v.disrupt_leader = r.u8("disrupt leader") != 0;
      v.pre_vote = r.u8("pre-vote") != 0;
      break;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      auto& v = m.request_vote_result;
      v.term = r.u64("term");
      v.vote_granted = r.u8("vote granted") != 0;
      const std::uint8_t pre = r.u8("pre-vote");
      if (pre > raft_tribool_false) throw std::invalid_argument("pre-vote tribool out of range");
      v.pre_vote = static_cast<raft_tribool>(pre);
      break;
    }
    case RAFT_IO_APPEND_ENTRIES: {
      auto& a = m.append_entries;
      a.term = r.u64("term");
      a.prev_log_index = r.u64("prev log index");
      a.prev_log_term = r.u64("prev log term");
      a.leader_commit = r.u64("leader commit");
      const std::uint32_t n = r.u32("entry count");
      if (n > r.left() / kEntryHeaderBytes) {
        throw std::length_error("entry count " + std::to_string(n) + " exceeds what " +
                                std::to_string(r.left()) + " bytes can hold");
      }
      struct Raw {
        raft_term term;
        unsigned short type;
        std::string_view data;
      };
      std::vector<Raw> raw;
      raw.reserve(n);
      std::size_t total = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        Raw e{r.u64("entry term"), r.u16("entry type"), {}};
        if (e.term == 0) throw std::invalid_argument("entry term 0");
        if (e.type < RAFT_COMMAND || e.type > RAFT_CHANGE) {
          throw std::invalid_argument("entry type " + std::to_string(e.type) + " unknown");
        }
        e.data = r.bytes("entry data");
        total += e.data.size();
        raw.push_back(e);
      }
      if (n > 0) {
        d.entries = static_cast<raft_entry*>(raft_calloc(n, sizeof(raft_entry)));
        d.batch = raft_malloc(total == 0 ? 1 : total);
        if (d.entries == nullptr || d.batch == nullptr) throw std::bad_alloc();
        std::size_t at = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
          raft_entry& e = d.entries[i];
          e.term = raw[i].term;
          e.type = raw[i].type;
          e.buf.base = static_cast<char*>(d.batch) + at;
          e.buf.len = raw[i].data.size();
          e.batch = d.batch;
          if (!raw[i].data.empty()) std::memcpy(e.buf.base, raw[i].data.data(), raw[i].data.size());
          at += raw[i].data.size();
        }
      }
      a.entries = d.entries;
      a.n_entries = n;
      break;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      auto& a = m.append_entries_result;
      a.term = r.u64("term");
      a.rejected = r.u64("rejected");
      a.last_log_index = r.u64("last log index");
      break;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      auto& s = m.install_snapshot;
      s.term = r.u64("term");
      s.last_index = r.u64("last index");
      s.last_term = r.u64("last term");
      s.conf_index = r.u64("conf index");
      if (s.last_index == 0 || s.last_term == 0) {
        throw std::invalid_argument("snapshot index or term 0");
      }
      raft_configuration_init(&s.conf);
      d.confMade = true;
      const std::uint32_t n = r.u32("server count");
      if (n > r.left() / kServerHeaderBytes) {
        throw std::length_error("server count " + std::to_string(n) + " exceeds what " +
                                std::to_string(r.left()) + " bytes can hold");
      }
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t id = r.u64("server id");
        const std::uint8_t role = r.u8("server role");
        const std::string address(r.str("server address"));
        if (id == 0 || address.find('\0') != std::string::npos) {
          throw std::invalid_argument("server id 0 or NUL in its address");
        }
        if (raft_configuration_add(&s.conf, id, address.c_str(), role) != 0) {
          throw std::invalid_argument("server " + std::to_string(id) +
                                      " is not valid in a configuration");
        }
      }
      const std::string_view data = r.bytes("snapshot data");
      d.data = raft_malloc(data.empty() ? 1 : data.size());
      if (d.data == nullptr) throw std::bad_alloc();
      if (!data.empty()) std::memcpy(d.data, data.data(), data.size());
      s.data.base = d.data;
      s.data.len = data.size();
      break;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      auto& t = m.timeout_now;
      t.term = r.u64("term");
      t.last_log_index = r.u64("last log index");
      t.last_log_term = r.u64("last log term");
      break;
    }
    default:
      throw std::invalid_argument("message type " + std::to_string(m.type) + " unknown");
  }
  if (r.left() != 0) throw std::length_error(std::to_string(r.left()) + " bytes left over");
  raft_term term = 0;
  switch (m.type) {
    case RAFT_IO_REQUEST_VOTE:
      term = m.request_vote.term;
      break;
    case RAFT_IO_REQUEST_VOTE_RESULT:
      term = m.request_vote_result.term;
      break;
    case RAFT_IO_APPEND_ENTRIES:
      term = m.append_entries.term;
      break;
    case RAFT_IO_APPEND_ENTRIES_RESULT:
      term = m.append_entries_result.term;
      break;
    case RAFT_IO_INSTALL_SNAPSHOT:
      term = m.install_snapshot.term;
      break;
    default:
      term = m.timeout_now.term;
      break;
  }
  if (term == 0) throw std::invalid_argument("term 0");
  m.server_address = d.address.c_str();
}

std::uint64_t steadyMillis() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

std::optional<raft_id> raftMessageSender(std::string_view bytes) {
  if (bytes.size() < 1 + 8) return std::nullopt;
  Reader r(bytes);
  r.u8("type");
  return r.u64("sender id");
}

std::string encodeRaftMessage(const raft_message& m, raft_id from, const char* fromAddress) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(m.type));
  w.u64(from);
  w.str(fromAddress);
  switch (m.type) {
    case RAFT_IO_REQUEST_VOTE: {
      const auto& v = m.request_vote;
      w.u64(v.term);
      w.u64(v.candidate_id);
      w.u64(v.last_log_index);
      w.u64(v.last_log_term);
      w.u8(v.disrupt_leader ? 1 : 0);
      w.u8(v.pre_vote ? 1 : 0);
      break;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      const auto& v = m.request_vote_result;
      w.u64(v.term);
      w.u8(v.vote_granted ? 1 : 0);
      w.u8(static_cast<std::uint8_t>(v.pre_vote));
      break;
    }
    case RAFT_IO_APPEND_ENTRIES: {
      const auto& a = m.append_entries;
      w.u64(a.term);
      w.u64(a.prev_log_index);
      w.u64(a.prev_log_term);
      w.u64(a.leader_commit);
      w.u32(a.n_entries);
      for (unsigned i = 0; i < a.n_entries; ++i) {
        const raft_entry& e = a.entries[i];
        w.u64(e.term);
        w.u16(e.type);
        w.bytes(e.buf.base, e.buf.len);
      }
      break;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      const auto& a = m.append_entries_result;
      w.u64(a.term);
      w.u64(a.rejected);
      w.u64(a.last_log_index);
      break;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      const auto& s = m.install_snapshot;
      w.u64(s.term);
      w.u64(s.last_index);
      w.u64(s.last_term);
      w.u64(s.conf_index);
      w.u32(s.conf.n);
      for (unsigned i = 0; i < s.conf.n; ++i) {
        w.u64(s.conf.servers[i].id);
        w.u8(static_cast<std::uint8_t>(s.conf.servers[i].role));
        w.str(s.conf.servers[i].address);
      }
      w.bytes(s.data.base, s.data.len);
      break;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      const auto& t = m.timeout_now;
      w.u64(t.term);
      w.u64(t.last_log_index);
      w.u64(t.last_log_term);
      break;
    }
    default:
      break;
  }
  return w.take();
}

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
  static int random(raft_io* io, int min, int max) {
    if (max <= min) return min;
    return std::uniform_int_distribution<int>(min, max - 1)(self(io).random_);
  }
};

RaftIo::RaftIo(asio::io_context& io, RaftNetwork& network, std::string dataDir, Logger log)
    : ctx_(io),
      network_(network),
      ticker_(io),
      dataDir_(std::move(dataDir)),
      log_(std::move(log)),
      random_(std::random_device{}()) {
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
  Decoded d;
  try {
    decodeInto(bytes, d);
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message, std::string("Raft message: ") + e.what());
  }
  if (recvCb_ == nullptr || closed_) return false;  // well-formed, but raft is not running
  d.release();  // raft owns the entries, the snapshot's configuration and data now
  recvCb_(&io_, &d.m);
  handled();
  return true;
}

}  // namespace ingrid
