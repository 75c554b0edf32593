// FrameFaults: a lossy, slow, duplicating, reordering network between in-process members, for
// fault tests. Shared by the members of a test through ConnectionOptions::faults (from
// NodeOptions::frameFaults): every frame a connection is about to write is judged by the rules
// whose `from` matches the connection's local IP and whose `to` matches its remote IP ("*" for
// any). Members of such a test listen on distinct loopback addresses (127.0.0.2, 127.0.0.3, ...)
// and dial from them (Transport), so an IP names a member in both directions of a link.
//
// A rule may also be limited to some frame types (for example only kSnapshot).
// Per frame, each matching rule may drop it (the connection stays up, like a lossy link: the
// requester times out), write it twice, or hold it for a random delay in [delayMin, delayMax]
// (frames held for different delays overtake each other: reordering); `cut` drops everything.
// Hello frames are exempt (a connection must open with one). Decisions come from one seeded
// generator, so a run is reproducible up to thread timing.
//
// Thread safety: every method may be called from any thread. Cost when no rule is installed: one
// relaxed atomic load per frame.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cluster/transport/frame.h"

namespace ingrid {

class FrameFaults {
 public:
  struct Rule {
    std::string from = "*";            // local IP of the writing connection, or "*"
    std::string to = "*";              // remote IP, or "*"
    std::vector<MessageType> types{};  // frame types it applies to; empty: every type
    bool cut = false;                  // drop every frame
    double drop = 0;                   // probability of dropping a frame
    double duplicate = 0;              // probability of writing it twice
    std::chrono::milliseconds delayMin{0};
    std::chrono::milliseconds delayMax{0};  // > 0: hold each frame a random time in the range
  };
  struct Decision {
    bool drop = false;
    bool duplicate = false;
    std::chrono::milliseconds delay{0};
  };
  struct Counts {
    std::uint64_t judged = 0, dropped = 0, duplicated = 0, delayed = 0;
  };

  explicit FrameFaults(std::uint64_t seed = 1) : rng_(seed) {}

  // Installs a rule; returns its id for remove().
  int add(Rule rule);
  void remove(int id);
  void clear();
  bool active() const noexcept { return active_.load(std::memory_order_relaxed); }
  // What to do with one frame from `fromIp` to `toIp` (the first matching rule that acts wins;
  // delays of several matching rules do not add up).
  Decision decide(const std::string& fromIp, const std::string& toIp, MessageType type);
  Counts counts() const;

 private:
  mutable std::mutex mu_;
  std::atomic<bool> active_{false};
  std::map<int, Rule> rules_;  // guarded by mu_
  int nextId_ = 1;             // guarded by mu_
  std::mt19937_64 rng_;        // guarded by mu_
  Counts counts_;              // guarded by mu_
};

}  // namespace ingrid
