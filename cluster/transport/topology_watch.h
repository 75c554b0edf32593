// TopologyWatch: a client's watches of the topology (GetTopology long polls, WatchTopologyBody)
// at `width` members, chosen for this client by rendezvous hashing of a salt and the member ids
// (so a fleet of clients spreads its watches over the members). A member answers a watch once it
// installs a newer topology, so a committed change (a failed member removed) reaches the client
// at once, not at its next poll. Each answer goes to the host and the watch is sent again on the
// same connection; a watch that fails (its member died, left or did not answer within its wait
// plus a margin) is dialled again after a delay (100 ms, doubling up to 5 s while it keeps
// failing) if the newest topology still chooses its member, and the host is told (to refresh).
// Two members are watched by default, so a paused one does not hide a change: the other tells.
// Polling (the client's stale-route refresh) remains the fallback.
//
// Threads: the client's network thread (the io_context given) for every member, asserted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <asio/io_context.hpp>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/transport/connection.h"
#include "cluster/transport/timer.h"

namespace ingrid {

class TopologyWatch {
 public:
  class Host {
   public:
    // The topology the client routes by.
    virtual TopologyPtr watchedTopology() const = 0;
    // Connects to `address` and proves the client's secret, if it has one; then `done`.
    virtual void dialAuthenticated(
        const std::string& address,
        UniqueFunction<void(Result<std::shared_ptr<Connection>>)> done) = 0;
    // A member answered a watch with `t` (which may be older or invalid: the host judges).
    virtual void topologyAnswered(const TopologyPtr& t) = 0;
    // A watch failed (its member may be dead while the topology still lists it): the host may
    // ask the members for a newer topology (its own rate limit applies).
    virtual void watchFailed() = 0;

   protected:
    ~Host() = default;
  };
  struct Options {
    std::size_t width = 2;                   // members watched at once
    std::chrono::milliseconds wait{30'000};  // a member holds a watch at most this long
    // Past wait, how long a watch may go unanswered before its member counts as silent.
    std::chrono::milliseconds margin{5'000};
    // Before a failed watch is dialled again; doubled on each failure in a row, up to
    // maxRetryDelay, and back to retryDelay once its member answers.
    std::chrono::milliseconds retryDelay{100};
    std::chrono::milliseconds maxRetryDelay{5'000};
    std::uint64_t salt = 0;  // this client's choice of members
  };

  TopologyWatch(Host& host, asio::io_context& io, Options options);
  ~TopologyWatch();
  TopologyWatch(const TopologyWatch&) = delete;
  TopologyWatch& operator=(const TopologyWatch&) = delete;

  // Watches the members chosen from the host's topology: keeps the watches still chosen, closes
  // the others, dials the new ones. Called at start and after each topology the host learns.
  void retarget();
  // Closes every watch; nothing is dialled again.
  void stop();
  // The members watched now (for tests and status).
  std::size_t watching() const noexcept { return slots_.size(); }

 private:
  struct Slot {
    std::string address;
    std::shared_ptr<Connection> conn;   // set once dialled
    std::uint64_t generation = 0;       // callbacks of an older generation are ignored
    std::uint64_t answeredVersion = 0;  // the newest version this member gave
    std::shared_ptr<Timer> retry;
    std::chrono::milliseconds backoff{0};  // the next retry's delay (0: retryDelay)
    bool dialling = false;
  };
  bool here() const noexcept { return io_.get_executor().running_in_this_thread(); }
  void dial(MemberId member);
  void send(MemberId member);
  // The watch at `member` failed: closes it, tells the host, and after its backoff dials it again
  // if the newest topology still chooses it.
  void failed(MemberId member);

  Host& host_;
  asio::io_context& io_;
  Options options_;
  std::unordered_map<MemberId, Slot> slots_;
  std::uint64_t generations_ = 0;
  bool stopped_ = false;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // callbacks check it is still alive
};

}  // namespace ingrid
