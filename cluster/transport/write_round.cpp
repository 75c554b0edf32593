#include "cluster/transport/write_round.h"

#include <cassert>
#include <utility>

#include <asio/post.hpp>

#include "cluster/transport/connection.h"

namespace ingrid {

asio::execution_context::id WriteRound::id;

WriteRound::WriteRound(asio::execution_context& context)
    : asio::execution_context::service(context), io_(static_cast<asio::io_context&>(context)) {}

void WriteRound::defer(std::shared_ptr<Connection> conn) {
  assert(here());
  conns_.push_back(std::move(conn));
  post();
}

void WriteRound::atEnd(UniqueFunction<void()> fn) {
  assert(here());
  hooks_.push_back(std::move(fn));
  post();
}

void WriteRound::post() {
  if (posted_) return;
  posted_ = true;
  // Behind every handler queued now: the rest of this round's reads and what they posted.
  asio::post(io_, [this] { end(); });
}

void WriteRound::end() {
  // If a hook throws (they must not; the exception leaves io.run()), the round still ends: a
  // context run again keeps writing.
  struct Reset {
    WriteRound& round;
    ~Reset() {
      round.runningHooks_.clear();
      round.posted_ = false;
    }
  } reset{*this};
  // Hooks first: they queue frames (and may add hooks and connections of this same round).
  while (!hooks_.empty()) {
    runningHooks_.swap(hooks_);
    for (auto& hook : runningHooks_) hook();
    runningHooks_.clear();
  }
  posted_ = false;
  // Swapped, not moved: both vectors keep their capacity, so a round allocates nothing.
  flushing_.swap(conns_);
  for (const auto& conn : flushing_) conn->flushDeferred();
  flushing_.clear();
}

void WriteRound::shutdown() {
  // The context is going away with its handlers: release the connections it held.
  hooks_.clear();
  runningHooks_.clear();
  conns_.clear();
  flushing_.clear();
}

}  // namespace ingrid
