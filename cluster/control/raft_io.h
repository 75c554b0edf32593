// RaftIo: libraft's `struct raft_io` on an Asio io_context, with messages carried by the owner's
// network and what Raft persists kept in memory or, given a directory, on disk (RaftStore).
//
// Raft needs from its I/O: a tick, the time, randomness, sending and receiving messages, and
// storage for its term, vote, log entries and snapshots. Here the tick is a Timer and the time
// steadyNow() (timer.h, runtime.h); the randomness is a generator seeded from the system, or in a
// simulation the simulated member's (the one installed where the RaftIo is made).
//
// Storage without a directory is memory, and only what Raft reads back is kept: Raft reads its log
// and term only once, at start (load), so after start an append is acknowledged without a copy
// (Raft keeps its own in-memory log), while the latest snapshot is kept because Raft reads it back
// to send it to a follower that fell behind. A restarted process then has no Raft state: it must
// come back under a new Raft id (the node joins as a new member).
//
// With a directory (created if missing), term, vote, log and snapshot are written by a RaftStore
// (its header gives the format) and are durable before raft hears of them: set_term, set_vote,
// bootstrap and truncate before they return, append and snapshot_put before their completion is
// posted. A server restarted with its directory under the same id keeps its term, vote, log and
// snapshot, so a voter keeps its vote and a quorum lost to crashes heals when the voters return.
// The directory is opened by preload() or raft_init, whichever comes first; an I/O error is
// logged (an error line naming the file, to the Logger given) and returned to raft as RAFT_IOERR.
//
// Messages travel through a RaftNetwork as bytes in raft_codec.h's encoding; deliver() decodes
// what arrives (checking every length and count before allocating) and hands it to Raft, which
// takes ownership of what it is given.
//
// Threads: the io_context is run by one thread (the control thread); every member, every raft
// callback, every RaftNetwork call and all disk I/O (blocking, fdatasync included) runs there. The
// RaftIo must outlive the raft instance using it (until raft_close's callback has run).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>

extern "C" {
#include <raft.h>  // a C header without its own extern "C"
}

#include <ingrid/result.h>

#include "cluster/control/raft_store.h"
#include "cluster/transport/logger.h"
#include "cluster/transport/timer.h"

namespace ingrid {

// What RaftIo needs from its owner to move messages between servers.
class RaftNetwork {
 public:
  // Sends one encoded raft message to server `to`, listening at `address`. Called on the
  // io_context's thread. Best effort: it may be dropped, delayed, duplicated or reordered.
  virtual void sendRaftMessage(std::uint64_t to, const std::string& address, std::string bytes) = 0;

 protected:
  ~RaftNetwork() = default;
};

class RaftIo {
 public:
  // `dataDir` empty: storage in memory. Otherwise the directory Raft state is kept in. `log`:
  // where storage errors are told (default: nowhere).
  RaftIo(asio::io_context& io, RaftNetwork& network, std::string dataDir = {}, Logger log = {});
  RaftIo(const RaftIo&) = delete;
  RaftIo& operator=(const RaftIo&) = delete;
  ~RaftIo();

  // What to pass to raft_init().
  raft_io* get() noexcept { return &io_; }

  // Whether `dir` holds Raft state (a term above 0, a snapshot or log entries); reads only.
  static Result<bool> holdsState(const std::string& dir) { return RaftStore::holdsState(dir); }
  // Removes the Raft files from `dir`, leaving anything else in it (a member rejoining under a
  // new id starts from nothing).
  static Result<bool> wipe(const std::string& dir) { return RaftStore::wipe(dir); }

  // Before raft_init, on a RaftIo that holds nothing: load() will hand raft term `term` with no
  // vote, and a snapshot at log index `index` of term `term` holding `data`, whose configuration
  // is `voters` (id, address), every one a voter. What a survivor of a lost quorum restarts its
  // control plane from (ControlPlane::start with a Recovery). An Error if it already holds state
  // or is out of memory. With a directory, the snapshot and term are on disk when it returns.
  Result<bool> preload(std::uint64_t term, std::uint64_t index,
                       const std::vector<std::pair<std::uint64_t, std::string>>& voters,
                       std::string_view data);

  // `f` runs on the io_context's thread after raft has handled each event that can change its
  // state: a tick, a message delivered, a log append or snapshot completed. Set before raft_start.
  void onEvent(std::function<void()> f) { onEvent_ = std::move(f); }

  // Raft's tick comes every `every` instead of every heartbeat interval (0: every heartbeat
  // interval), from now on (control thread). Only a leader sends on its ticks (heartbeats); a
  // follower only checks its election timer, so one that does not vote (it never stands for
  // election) need not wake its thread at a leader's cadence.
  void tickEvery(std::chrono::milliseconds every);

  // A message arrived (bytes made by encodeRaftMessage). Decoded (decodeRaftMessage) and handed to
  // raft: true. Bytes that do not decode give its Error (malformed_message), and reach nothing.
  // A well-formed message before start or after close is dropped: false.
  Result<bool> deliver(std::string_view bytes);

 private:
  struct Impl;
  static RaftIo& self(raft_io* io) { return *static_cast<RaftIo*>(io->impl); }
  void tick();
  Result<bool> openStore();          // with a directory: opens it once and takes in what it holds
  int failed(const Error& e) const;  // logs `e`; RAFT_IOERR
  void handled() {                   // after raft handled an event
    if (onEvent_ && !closed_) onEvent_();
  }

  asio::io_context& ctx_;
  RaftNetwork& network_;
  raft_io io_{};
  Timer ticker_;
  unsigned tickMs_ = 100;    // raft's own tick interval
  unsigned slowTickMs_ = 0;  // 0: ticks at tickMs_ (tickEvery)
  raft_io_tick_cb tickCb_ = nullptr;
  raft_io_recv_cb recvCb_ = nullptr;
  std::function<void()> onEvent_;
  bool closed_ = false;
  raft_id id_ = 0;
  std::string address_;
  raft_term term_ = 0;
  raft_id votedFor_ = 0;
  std::string
      bootstrapConf_;  // the bootstrap configuration entry, encoded by raft; load() reads it
  raft_snapshot* snapshot_ = nullptr;  // the latest one put (raft_malloc'ed; ours)
  std::string dataDir_;
  Logger log_;
  std::unique_ptr<RaftStore> store_;      // set once the directory is open
  std::vector<RaftStore::Entry> loaded_;  // entries read at open, until load() hands them over
  // In a simulation (runtime.h), the member whose generator raft draws from; else random_.
  SimulatedMember* sim_;
  std::mt19937 random_;
  // Set while alive; pending callbacks check it (they may outlive nothing else).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ingrid
