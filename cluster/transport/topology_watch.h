// TopologyWatch: a client's watches of the topology (GetTopology long polls, WatchTopologyBody)
// at `width` members, chosen for this client by rendezvous hashing of a salt and the member ids
// (so a fleet of clients spreads its watches over the members). A member answers a watch once it
// installs a newer topology, so a committed change (a failed member removed) reaches the client
// at once, not at its next poll. Each answer goes to the host and the watch is sent again on the
// same connection; a watch that fails (its member died, left or did not answer within its wait
// plus a margin) is dialled again after a short delay at the members the newest topology names.
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
#include <asio/steady_timer.hpp>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/transport/connection.h"

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

   protected:
    ~Host() = default;
  };
  struct Options {
    std::size_t width = 2;                   // members watched at once
    std::chrono::milliseconds wait{30'000};  // a member holds a watch at most this long
    // Past wait, how long a watch may go unanswered before its member counts as silent.
    std::chrono::milliseconds margin{5'000};
    std::chrono::milliseconds retryDelay{100};  // before a failed watch is dialled again
    std::uint64_t salt = 0;                     // this client's choice of members
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
    std::shared_ptr<asio::steady_timer> retry;
  };
  bool here() const noexcept { return io_.get_executor().running_in_this_thread(); }
  void dial(MemberId member);
  void send(MemberId member);
  // The watch at `member` failed: closes it, and after retryDelay dials it again if the newest
  // topology still chooses it.
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
