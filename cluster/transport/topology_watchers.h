// TopologyWatchers: a member's held GetTopology requests that wait for a newer topology (long
// polls, the body a WatchTopologyBody). One is answered with the member's topology as soon as the
// member installs one newer than the asker's, or when the asker's wait runs out, whichever is
// first; so a client learns a change (a failed member removed) when it is committed, not at its
// next poll. At most one is held per connection: a second answers the first at once. A watch
// whose connection closed is dropped unanswered. Watches answered together are answered in the
// order they were held (not the map's, which follows the connections' addresses): a simulation
// (runtime.h) sends the same in every run.
//
// Threads: the member's network thread (the io_context given), asserted; stop() before the
// io_context is destroyed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio/io_context.hpp>

#include <ingrid/topology.h>

#include "cluster/transport/connection.h"
#include "cluster/transport/frame.h"
#include "cluster/transport/timer.h"

namespace ingrid {

class TopologyWatchers {
 public:
  // The longest wait a member honours; a longer one is shortened to it.
  static constexpr std::chrono::milliseconds kMaxWait{60'000};

  explicit TopologyWatchers(asio::io_context& io) : io_(io), timer_(io) {}
  TopologyWatchers(const TopologyWatchers&) = delete;
  TopologyWatchers& operator=(const TopologyWatchers&) = delete;

  // Answers `request` on `conn` with `current` now if it is newer than `after` (or `wait` is 0),
  // else holds it until publish() brings a newer one or `wait` (at most kMaxWait) has passed.
  void hold(const std::shared_ptr<Connection>& conn, const FrameHeader& request,
            std::uint64_t after, std::chrono::milliseconds wait, const TopologyPtr& current);
  // The member installed `t`: every watch behind it is answered with it.
  void publish(const TopologyPtr& t);
  // Answers every watch with the last topology known (queued: sent if its connection is still
  // open when its writes run) and cancels the timer: the member stops.
  void stop();
  std::size_t size() const noexcept { return held_.size(); }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  struct Held {
    std::weak_ptr<Connection> conn;
    FrameHeader request;
    std::uint64_t after = 0;
    SteadyTime until;
    std::uint64_t seq = 0;  // when it was held: the order of answers
  };
  // Answers each of `due` with `version` and `body`, in the order they were held.
  static void answer(std::vector<Held>& due, std::uint64_t version, const std::string& body);
  bool here() const noexcept { return io_.get_executor().running_in_this_thread(); }
  // Answers the watches whose wait ran out, and sets the timer for the next one to.
  void expire();
  // Sets the timer for the earliest deadline held (a scan), unless one that comes first is set.
  void arm();
  // Sets the timer for `next`, cancelling the wait set before.
  void waitUntil(SteadyTime next);

  asio::io_context& io_;
  Timer timer_;
  TopologyPtr current_;
  std::unordered_map<const Connection*, Held> held_;
  std::uint64_t nextSeq_ = 0;
  SteadyTime armedFor_{};     // the deadline the timer waits for; {} when idle
  std::size_t purgeAt_ = 64;  // held_'s size at which watches of closed connections are dropped
};

}  // namespace ingrid
