// RaftStore: the on-disk form of one Raft server's state (term, vote, log, latest snapshot) in a
// directory. RaftIo uses it when given a directory; it knows nothing of raft's callbacks.
//
// Files (all integers little-endian; crc = CRC-32C of every byte of the record or file before it):
//   DIR/raft-meta      "INGRMET1", u64 term, u64 vote, u32 crc.
//   DIR/raft-snapshot  "INGRSNP1", u64 index, u64 term, u64 configuration index, u32 n,
//                      n x {u64 id, u8 role, u16 address length, address}, u64 data length, data,
//                      u32 crc.
//   DIR/raft-log       "INGRLOG1", then records {u64 index, u64 term, u16 type, u32 length, data,
//                      u32 crc}, indexes consecutive.
// Durability: every mutator returns only once its change is on disk. raft-meta and raft-snapshot
// are replaced whole (written to NAME.tmp, fsync, rename, fsync of DIR), so they are either the old
// or the new one. The log is appended to and fdatasync'ed; a truncate is an ftruncate at the first
// removed record, fdatasync'ed; a compaction after a snapshot rewrites it (tmp, fsync, rename,
// fsync of DIR). A crash can leave a torn last append: at open a tail that is short or fails its
// crc, with no good record after it, is cut off (the file truncated there). A bad record followed
// by a good one is an error naming the file and offset. Entries the snapshot makes inconsistent (a
// log ending before it, or holding another term at its index: a crash between a snapshot install
// and the log reset) are dropped at open.
//
// Threads: not thread-safe; RaftIo calls it on the control thread only. Calls block on disk I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include <raft.h>  // a C header without its own extern "C"
}

#include <ingrid/result.h>

namespace ingrid {

class RaftStore {
 public:
  struct Entry {
    std::uint64_t index = 0;
    std::uint64_t term = 0;
    std::uint16_t type = 0;
    std::string data;
  };
  struct Server {
    std::uint64_t id = 0;
    std::uint8_t role = 0;
    std::string address;
  };
  struct Snapshot {
    std::uint64_t index = 0;
    std::uint64_t term = 0;
    std::uint64_t configurationIndex = 0;
    std::vector<Server> servers;
    std::string data;
  };
  // What a directory holds. Entries are consecutive, from entries.front().index.
  struct State {
    std::uint64_t term = 0;
    std::uint64_t vote = 0;
    std::optional<Snapshot> snapshot;
    std::vector<Entry> entries;
  };

  // Opens the store in `dir` (created if missing; its parent must exist), reading what it holds
  // into `state` and cutting a torn log tail. An Error names the file and the reason.
  static Result<std::unique_ptr<RaftStore>> open(const std::string& dir, State& state);

  // Whether `dir` holds Raft state: a term above 0, a snapshot or log entries. A missing
  // directory holds none. Reads only.
  static Result<bool> holdsState(const std::string& dir);

  // Removes our files (raft-*) from `dir`, leaving anything else. A missing file is no error.
  static Result<bool> wipe(const std::string& dir);

  RaftStore(const RaftStore&) = delete;
  RaftStore& operator=(const RaftStore&) = delete;
  ~RaftStore();

  // The writes below are each durable when they return. After one fails, every later one fails
  // with that error: raft would go on at indexes the files do not match.
  // Durably records term and vote (0 = none).
  Result<bool> setTermVote(std::uint64_t term, std::uint64_t vote);

  // Durably appends `n` entries at nextIndex().
  Result<bool> append(const raft_entry* entries, unsigned n);

  // Durably removes the entries from `index` on.
  Result<bool> truncate(std::uint64_t index);

  // Durably replaces the snapshot, then drops the entries at or before snapshot.index - trailing
  // (trailing 0: every entry, and the log continues at snapshot.index + 1).
  Result<bool> putSnapshot(const Snapshot& snapshot, std::uint64_t trailing);

  // The index the next appended entry gets.
  std::uint64_t nextIndex() const noexcept { return firstIndex_ + offsets_.size(); }
  bool hasEntries() const noexcept { return !offsets_.empty(); }

 private:
  explicit RaftStore(std::string dir) : dir_(std::move(dir)) {}
  Result<bool> openLog(State& state);
  Result<bool> rewriteLog(std::uint64_t keepFrom);  // keeps entries >= keepFrom
  Result<bool> resetLog(std::uint64_t next);        // drops every entry; next appended is `next`
  Result<bool> setTermVoteOnce(std::uint64_t term, std::uint64_t vote);
  Result<bool> appendOnce(const raft_entry* entries, unsigned n);
  Result<bool> truncateOnce(std::uint64_t index);
  Result<bool> putSnapshotOnce(const Snapshot& snapshot, std::uint64_t trailing);
  // After a failed write the files may not hold what raft believes (raft keeps entries whose
  // append failed, and appends after them): every later write fails with the first error, so
  // nothing lands at a wrong index. The server stops persisting; a restart reopens what is on disk.
  Result<bool> once(Result<bool> done);

  std::string dir_;
  int logFd_ = -1;
  std::uint64_t logSize_ = 0;           // bytes in raft-log
  std::uint64_t firstIndex_ = 1;        // index of the first record (or of the next)
  std::vector<std::uint64_t> offsets_;  // file offset of each record, from firstIndex_
  std::optional<Error> failed_;         // the first write that failed (see once())
};

}  // namespace ingrid
