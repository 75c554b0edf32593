// The Raft message codec (raft_codec.h): encoding, and decoding that checks before it allocates.
#include "cluster/control/raft_codec.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ingrid {
namespace {

// Little-endian writer of the encoding described in raft_codec.h.
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

constexpr std::size_t kEntryHeaderBytes = 8 + 2 + 4;   // term, type, data length
constexpr std::size_t kServerHeaderBytes = 8 + 1 + 2;  // id, role, address length

void decodeInto(std::string_view bytes, DecodedRaftMessage& d) {
  Reader r(bytes);
  raft_message& m = d.message;
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

}  // namespace

DecodedRaftMessage::~DecodedRaftMessage() {
  raft_free(entries);
  raft_free(batch);
  if (confMade) raft_configuration_close(&message.install_snapshot.conf);
  raft_free(data);
}

void DecodedRaftMessage::release() noexcept {
  entries = nullptr;
  batch = nullptr;
  confMade = false;
  data = nullptr;
}

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

Result<bool> decodeRaftMessage(std::string_view bytes, DecodedRaftMessage& out) {
  try {
    decodeInto(bytes, out);
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message, std::string("Raft message: ") + e.what());
  }
  return true;
}

}  // namespace ingrid
