// DataDir: a member's data directory (NodeOptions::dataDir). It holds the control plane's Raft
// state (DIR/raft, RaftIo's files) and the identity file DIR/member, which names the member whose
// Raft state that is and the address it was reached at. The buckets are never here: the grid is
// in memory, so a process restarted with its directory comes back empty, and only its Raft vote
// and log survive (what lets a lost quorum heal when the dead voters come back).
//
// Open takes an exclusive lock (flock on DIR/lock) held until the DataDir is destroyed: a second
// process with the same directory is refused, and a process that got the lock knows the one before
// it is gone (the kernel drops a dead process's locks). Not thread-safe; the node uses it on one
// thread at a time (start, then its network thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ingrid/result.h>

namespace ingrid {

class DataDir {
 public:
  struct Identity {
    std::uint64_t memberId = 0;
    std::string address;  // the address the member advertised ("host:port")
  };

  // Opens `dir` (made if missing, with its parent) and takes its lock. An Error naming the
  // directory and the reason: it cannot be made or opened, or another process holds it.
  static Result<std::unique_ptr<DataDir>> open(std::string dir);
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;
  ~DataDir();

  const std::string& path() const noexcept { return dir_; }
  // Where the Raft state lives (RaftIo's directory).
  std::string raftDir() const { return dir_ + "/raft"; }

  // The member whose Raft state the directory holds; nullopt if none is recorded (a first start,
  // or forgotten). An Error if the identity file exists but cannot be read or does not parse.
  Result<std::optional<Identity>> identity() const;
  // Records that the directory holds member `id`'s Raft state, durably (a temporary file, fsync,
  // rename, fsync of the directory), replacing what was recorded.
  Result<bool> setIdentity(const Identity& id);
  // Forgets the identity, then the Raft state (a member that joins again under a new id): after a
  // crash part-way, no identity names state that is not its own.
  Result<bool> forget();

 private:
  DataDir(std::string dir, int lockFd) : dir_(std::move(dir)), lockFd_(lockFd) {}
  std::string dir_;
  int lockFd_ = -1;
};

}  // namespace ingrid
