#include "cluster/control/raft_store.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ingrid {
namespace {

constexpr std::string_view kMetaMagic = "INGRMET1";
constexpr std::string_view kSnapshotMagic = "INGRSNP1";
constexpr std::string_view kLogMagic = "INGRLOG1";
constexpr std::size_t kRecordHeader = 8 + 8 + 2 + 4;  // index, term, type, length
constexpr std::size_t kCrcBytes = 4;
constexpr const char* kFiles[] = {"raft-meta",         "raft-meta.tmp", "raft-snapshot",
                                  "raft-snapshot.tmp", "raft-log",      "raft-log.tmp"};

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven.
constexpr std::array<std::uint32_t, 256> makeCrcTable() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = makeCrcTable();

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = kCrcTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void put(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint64_t get(std::string_view in, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= std::uint64_t{static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)])} << (8 * i);
  }
  return v;
}
void putCrc(std::string& out) { put(out, crc32c(out), 4); }

// Its message reads "<strerror>: <op> <path>".
Error ioError(const std::string& path, const char* op, int err) {
  return Error(std::error_code(err, std::generic_category()), std::string(op) + " " + path);
}
Error corrupt(const std::string& path, const std::string& why) {
  return Error(Errc::malformed_message, path + ": " + why);
}

Result<bool> syncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ioError(dir, "open directory", errno);
  const int rv = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rv != 0) return ioError(dir, "fsync directory", err);
  return true;
}

Result<bool> writeAll(int fd, const std::string& path, std::string_view bytes, std::uint64_t at) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ioError(path, "write", errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
    at += static_cast<std::uint64_t>(n);
  }
  return true;
}

// The whole file, or nullopt if it does not exist.
Result<std::optional<std::string>> readFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return std::optional<std::string>();
  if (fd < 0) return ioError(path, "open", errno);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ioError(path, "read", err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(out));
}

// Replaces `dir/name` with `bytes`: NAME.tmp, fsync, rename, fsync of dir.
Result<bool> replaceFile(const std::string& dir, const char* name, std::string_view bytes) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ioError(tmp, "open", errno);
  Result<bool> wrote = writeAll(fd, tmp, bytes, 0);
  if (wrote.ok() && ::fsync(fd) != 0) wrote = ioError(tmp, "fsync", errno);
  ::close(fd);
  if (!wrote.ok()) return wrote;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ioError(path, "rename", errno);
  return syncDir(dir);
}

Result<RaftStore::State> parseMeta(const std::string& path, std::string_view b) {
  if (b.size() != kMetaMagic.size() + 16 + kCrcBytes || b.substr(0, 8) != kMetaMagic) {
    return corrupt(path, "not a meta file of " + std::to_string(kMetaMagic.size() + 20) + " bytes");
  }
  if (crc32c(b.substr(0, 24)) != get(b, 24, 4)) return corrupt(path, "checksum mismatch");
  RaftStore::State s;
  s.term = get(b, 8, 8);
  s.vote = get(b, 16, 8);
  return s;
}

std::string encodeSnapshot(const RaftStore::Snapshot& s) {
  std::string out(kSnapshotMagic);
  put(out, s.index, 8);
  put(out, s.term, 8);
  put(out, s.configurationIndex, 8);
  put(out, s.servers.size(), 4);
  for (const auto& server : s.servers) {
    put(out, server.id, 8);
    put(out, server.role, 1);
    put(out, server.address.size(), 2);
    out += server.address;
  }
  put(out, s.data.size(), 8);
  out += s.data;
  putCrc(out);
  return out;
}

Result<RaftStore::Snapshot> parseSnapshot(const std::string& path, std::string_view b) {
  if (b.size() < kSnapshotMagic.size() + kCrcBytes || b.substr(0, 8) != kSnapshotMagic) {
    return corrupt(path, "not a snapshot file");
  }
  const std::size_t body = b.size() - kCrcBytes;
  if (crc32c(b.substr(0, body)) != get(b, body, 4)) return corrupt(path, "checksum mismatch");
  RaftStore::Snapshot s;
  std::size_t at = 8;
  auto need = [&](std::size_t n) { return body - at >= n; };
  if (!need(28)) return corrupt(path, "header too short");
  s.index = get(b, at, 8);
  s.term = get(b, at + 8, 8);
  s.configurationIndex = get(b, at + 16, 8);
  const std::uint64_t n = get(b, at + 24, 4);
  at += 28;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (!need(11)) return corrupt(path, "server " + std::to_string(i) + " truncated");
    RaftStore::Server server;
    server.id = get(b, at, 8);
    server.role = static_cast<std::uint8_t>(get(b, at + 8, 1));
    const std::size_t len = get(b, at + 9, 2);
    at += 11;
    if (!need(len)) return corrupt(path, "server " + std::to_string(i) + " address truncated");
    server.address = std::string(b.substr(at, len));
    at += len;
    s.servers.push_back(std::move(server));
  }
  if (!need(8)) return corrupt(path, "data length missing");
  const std::uint64_t len = get(b, at, 8);
  at += 8;
  if (body - at != len) return corrupt(path, "data length does not match the file");
  s.data = std::string(b.substr(at, len));
  if (s.index == 0 || s.term == 0) return corrupt(path, "snapshot index or term 0");
  return s;
}

// A record at `at` in `b` that is whole and passes its crc: its length in bytes; else 0.
std::size_t goodRecord(std::string_view b, std::size_t at) {
  if (b.size() - at < kRecordHeader + kCrcBytes) return 0;
  const std::uint64_t len = get(b, at + 18, 4);
  if (b.size() - at - kRecordHeader - kCrcBytes < len) return 0;
  const std::size_t body = kRecordHeader + static_cast<std::size_t>(len);
  if (crc32c(b.substr(at, body)) != get(b, at + body, 4)) return 0;
  return body + kCrcBytes;
}

}  // namespace

RaftStore::~RaftStore() {
  if (logFd_ >= 0) ::close(logFd_);
}

Result<std::unique_ptr<RaftStore>> RaftStore::open(const std::string& dir, State& state) {
  state = State{};
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ioError(dir, "mkdir", errno);
  std::unique_ptr<RaftStore> store(new RaftStore(dir));
  const std::string metaPath = dir + "/raft-meta";
  auto meta = readFile(metaPath);
  if (!meta.ok()) return std::move(meta).error();
  if (meta->has_value()) {
    auto parsed = parseMeta(metaPath, **meta);
    if (!parsed.ok()) return std::move(parsed).error();
    state.term = parsed->term;
    state.vote = parsed->vote;
  }
  const std::string snapPath = dir + "/raft-snapshot";
  auto snap = readFile(snapPath);
  if (!snap.ok()) return std::move(snap).error();
  if (snap->has_value()) {
    auto parsed = parseSnapshot(snapPath, **snap);
    if (!parsed.ok()) return std::move(parsed).error();
    state.snapshot = std::move(*parsed);
  }
  auto log = store->openLog(state);
  if (!log.ok()) return std::move(log).error();
  return store;
}

Result<bool> RaftStore::openLog(State& state) {
  const std::string path = dir_ + "/raft-log";
  auto read = readFile(path);
  if (!read.ok()) return std::move(read).error();
  logFd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (logFd_ < 0) return ioError(path, "open", errno);
  const std::string b = read->value_or(std::string());
  if (b.size() < kLogMagic.size()) {  // new, or torn while being created
    if (kLogMagic.substr(0, b.size()) != b) return corrupt(path, "not a log file");
    auto wrote = writeAll(logFd_, path, kLogMagic, 0);
    if (!wrote.ok()) return wrote;
    if (::ftruncate(logFd_, static_cast<off_t>(kLogMagic.size())) != 0 || ::fsync(logFd_) != 0) {
      return ioError(path, "sync", errno);
    }
    logSize_ = kLogMagic.size();
    auto synced = syncDir(dir_);
    if (!synced.ok()) return synced;
  } else {
    if (std::string_view(b).substr(0, 8) != kLogMagic) return corrupt(path, "not a log file");
    std::size_t at = kLogMagic.size();
    while (at < b.size()) {
      const std::size_t len = goodRecord(b, at);
      Entry e;
      if (len != 0) {
        e.index = get(b, at, 8);
        e.term = get(b, at + 8, 8);
        e.type = static_cast<std::uint16_t>(get(b, at + 16, 2));
      }
      const bool follows = state.entries.empty() || e.index == state.entries.back().index + 1;
      if (len == 0 || !follows) {
        // A torn or garbage tail is cut; a bad record with a good one after it is corruption.
        // (Checked cheaply first: a later entry has a higher index and no lower term.)
        const std::uint64_t lastIndex = state.entries.empty() ? 0 : state.entries.back().index;
        const std::uint64_t lastTerm = state.entries.empty() ? 0 : state.entries.back().term;
        for (std::size_t next = at + 1; next + kRecordHeader + kCrcBytes <= b.size(); ++next) {
          const std::uint64_t index = get(b, next, 8);
          const std::uint64_t type = get(b, next + 16, 2);
          if (index > lastIndex && index - lastIndex < (1u << 20) &&
              get(b, next + 8, 8) >= lastTerm && type >= RAFT_COMMAND && type <= RAFT_CHANGE &&
              goodRecord(b, next) != 0) {
            return corrupt(path, "bad record at offset " + std::to_string(at) +
                                     " followed by a good one at offset " + std::to_string(next));
          }
        }
        break;
      }
      e.data = b.substr(at + kRecordHeader, len - kRecordHeader - kCrcBytes);
      if (state.entries.empty()) firstIndex_ = e.index;
      offsets_.push_back(at);
      state.entries.push_back(std::move(e));
      at += len;
    }
    logSize_ = at;
    if (at < b.size()) {
      if (::ftruncate(logFd_, static_cast<off_t>(at)) != 0 || ::fdatasync(logFd_) != 0) {
        return ioError(path, "truncate torn tail", errno);
      }
    }
  }
  // Entries start at 1 with no snapshot, right after or before the snapshot otherwise.
  const auto& snap = state.snapshot;
  if (state.entries.empty()) {
    firstIndex_ = snap ? snap->index + 1 : 1;
    return true;
  }
  const Entry& first = state.entries.front();
  const Entry& last = state.entries.back();
  if (!snap) {
    if (first.index != 1) return corrupt(path, "first entry " + std::to_string(first.index));
    return true;
  }
  if (first.index > snap->index + 1) {
    return corrupt(path, "gap between the snapshot at " + std::to_string(snap->index) +
                             " and the first entry " + std::to_string(first.index));
  }
  const bool inconsistent =
      last.index < snap->index ||
      (first.index <= snap->index &&
       state.entries[static_cast<std::size_t>(snap->index - first.index)].term != snap->term);
  if (inconsistent) {
    state.entries.clear();
    return resetLog(snap->index + 1);
  }
  return true;
}

Result<bool> RaftStore::resetLog(std::uint64_t next) {
  offsets_.clear();
  logSize_ = kLogMagic.size();
  firstIndex_ = next;
  return rewriteLog(next);
}

Result<bool> RaftStore::rewriteLog(std::uint64_t keepFrom) {
  const std::string path = dir_ + "/raft-log";
  std::uint64_t from = logSize_;  // offset of the first kept record
  if (keepFrom >= firstIndex_ && keepFrom < nextIndex()) {
    from = offsets_[static_cast<std::size_t>(keepFrom - firstIndex_)];
  } else if (keepFrom < firstIndex_) {
    from = kLogMagic.size();
  }
  std::string bytes(kLogMagic);
  bytes.resize(kLogMagic.size() + (logSize_ - from));
  std::size_t got = 0;
  while (got < logSize_ - from) {
    const ssize_t n =
        ::pread(logFd_, bytes.data() + kLogMagic.size() + got,
                static_cast<std::size_t>(logSize_ - from) - got, static_cast<off_t>(from + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ioError(path, "read for compaction", n < 0 ? errno : EIO);
    got += static_cast<std::size_t>(n);
  }
  auto replaced = replaceFile(dir_, "raft-log", bytes);
  if (!replaced.ok()) return replaced;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ioError(path, "reopen after compaction", errno);
  ::close(logFd_);
  logFd_ = fd;
  std::vector<std::uint64_t> offsets;
  if (from < logSize_) {
    const std::uint64_t shift = from - kLogMagic.size();
    const std::size_t first =
        keepFrom > firstIndex_ ? static_cast<std::size_t>(keepFrom - firstIndex_) : 0;
    for (std::size_t i = first; i < offsets_.size(); ++i) {
      offsets.push_back(offsets_[i] - shift);
    }
    firstIndex_ = std::max(keepFrom, firstIndex_);
  } else {
    firstIndex_ = keepFrom;
  }
  offsets_ = std::move(offsets);
  logSize_ = bytes.size();
  return true;
}

Result<bool> RaftStore::once(Result<bool> done) {
  if (failed_) return *failed_;
  if (!done.ok()) failed_ = done.error();
  return done;
}

Result<bool> RaftStore::setTermVote(std::uint64_t term, std::uint64_t vote) {
  return once(setTermVoteOnce(term, vote));
}

Result<bool> RaftStore::setTermVoteOnce(std::uint64_t term, std::uint64_t vote) {
  std::string out(kMetaMagic);
  put(out, term, 8);
  put(out, vote, 8);
  putCrc(out);
  return replaceFile(dir_, "raft-meta", out);
}

Result<bool> RaftStore::append(const raft_entry* entries, unsigned n) {
  return once(appendOnce(entries, n));
}

Result<bool> RaftStore::appendOnce(const raft_entry* entries, unsigned n) {
  const std::string path = dir_ + "/raft-log";
  std::string out;
  std::vector<std::uint64_t> offsets;
  std::uint64_t index = nextIndex();
  for (unsigned i = 0; i < n; ++i, ++index) {
    const raft_entry& e = entries[i];
    if (e.buf.len > UINT32_MAX) return corrupt(path, "entry too long to append");
    offsets.push_back(logSize_ + out.size());
    const std::size_t start = out.size();
    put(out, index, 8);
    put(out, e.term, 8);
    put(out, e.type, 2);
    put(out, e.buf.len, 4);
    if (e.buf.len > 0) out.append(static_cast<const char*>(e.buf.base), e.buf.len);
    put(out, crc32c(std::string_view(out).substr(start)), 4);
  }
  auto wrote = writeAll(logFd_, path, out, logSize_);
  if (wrote.ok() && ::fdatasync(logFd_) != 0) wrote = ioError(path, "fdatasync", errno);
  if (!wrote.ok()) {
    (void)::ftruncate(logFd_,
                      static_cast<off_t>(logSize_));  // best effort: the tail is cut at open
    return wrote;
  }
  logSize_ += out.size();
  offsets_.insert(offsets_.end(), offsets.begin(), offsets.end());
  return true;
}

Result<bool> RaftStore::truncate(std::uint64_t index) { return once(truncateOnce(index)); }

Result<bool> RaftStore::truncateOnce(std::uint64_t index) {
  if (index >= nextIndex()) return true;
  const std::string path = dir_ + "/raft-log";
  const std::uint64_t at = index <= firstIndex_
                               ? kLogMagic.size()
                               : offsets_[static_cast<std::size_t>(index - firstIndex_)];
  if (::ftruncate(logFd_, static_cast<off_t>(at)) != 0) return ioError(path, "ftruncate", errno);
  if (::fdatasync(logFd_) != 0) return ioError(path, "fdatasync", errno);
  logSize_ = at;
  if (index <= firstIndex_) {
    offsets_.clear();
    firstIndex_ = index;
  } else {
    offsets_.resize(static_cast<std::size_t>(index - firstIndex_));
  }
  return true;
}

Result<bool> RaftStore::putSnapshot(const Snapshot& snapshot, std::uint64_t trailing) {
  return once(putSnapshotOnce(snapshot, trailing));
}

Result<bool> RaftStore::putSnapshotOnce(const Snapshot& snapshot, std::uint64_t trailing) {
  auto put = replaceFile(dir_, "raft-snapshot", encodeSnapshot(snapshot));
  if (!put.ok()) return put;
  if (trailing == 0) return resetLog(snapshot.index + 1);  // installed: the log restarts after it
  const std::uint64_t keepFrom = snapshot.index > trailing ? snapshot.index - trailing + 1 : 1;
  if (keepFrom <= firstIndex_) return true;
  return rewriteLog(keepFrom);
}

Result<bool> RaftStore::holdsState(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    return ioError(dir, "stat", errno);
  }
  const std::string metaPath = dir + "/raft-meta";
  auto meta = readFile(metaPath);
  if (!meta.ok()) return std::move(meta).error();
  if (meta->has_value()) {
    auto parsed = parseMeta(metaPath, **meta);
    if (!parsed.ok()) return std::move(parsed).error();
    if (parsed->term > 0) return true;
  }
  for (const char* name : {"raft-snapshot", "raft-log"}) {
    const std::string path = dir + "/" + name;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return ioError(path, "stat", errno);
    }
    if (name == std::string_view("raft-snapshot")) return true;
    if (static_cast<std::uint64_t>(st.st_size) > kLogMagic.size()) return true;
  }
  return false;
}

Result<bool> RaftStore::wipe(const std::string& dir) {
  bool removed = false;
  for (const char* name : kFiles) {
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) == 0) {
      removed = true;
    } else if (errno != ENOENT) {
      return ioError(path, "unlink", errno);
    }
  }
  if (!removed) return true;
  return syncDir(dir);
}

}  // namespace ingrid
