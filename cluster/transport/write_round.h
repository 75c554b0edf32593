// WriteRound: what one thread's handlers produce in one turn of its io_context leaves together.
//
// A round is every handler an io_context has queued when the first deferred frame or hook of the
// round is made: the reads that one epoll wait found ready, and what they posted. Its end is one
// handler posted behind them. At that end the hooks run first (the data plane's replication
// batches, which queue Replicate frames), then every connection with deferred frames starts one
// gathered write. So what a read of one connection produced on another (the answers that an
// acknowledgement from a backup releases to a client; a backup's acknowledgement and its own
// updates to the same member) leaves in one system call per connection per round, not one per
// handler.
//
// One per io_context (an Asio service: it lives and dies with the context). Thread safety: only
// the one thread that runs the io_context may call defer() and atEnd() (asserted with here());
// every connection and hook of a round runs there.
#pragma once

#include <memory>
#include <vector>

#include <asio/execution_context.hpp>
#include <asio/io_context.hpp>

#include <ingrid/unique_function.h>

namespace ingrid {

class Connection;

class WriteRound : public asio::execution_context::service {
 public:
  using key_type = WriteRound;
  static asio::execution_context::id id;

  explicit WriteRound(asio::execution_context& context);
  WriteRound(const WriteRound&) = delete;
  WriteRound& operator=(const WriteRound&) = delete;

  // The round of `io` (made on first use; the lookup takes Asio's registry lock, so callers keep
  // the pointer).
  static WriteRound& of(asio::io_context& io) { return asio::use_service<WriteRound>(io); }

  // Whether the calling thread runs this round's io_context now (so defer() and atEnd() may be
  // called).
  bool here() const noexcept { return io_.get_executor().running_in_this_thread(); }
  // Flushes `conn`'s deferred frames at the end of the round (Connection::flushDeferred). Once per
  // round per connection: the connection keeps a flag.
  void defer(std::shared_ptr<Connection> conn);
  // Runs `fn` at the end of the round, before the deferred frames leave. `fn` must not throw.
  void atEnd(UniqueFunction<void()> fn);

 private:
  // Releases the connections and hooks while every service of the context still lives (a
  // connection's socket needs its service): Asio calls every service's shutdown() before it
  // destroys any, and destroys them newest first, and this one is made before the sockets'.
  void shutdown() override;
  void post();
  void end();

  asio::io_context& io_;
  bool posted_ = false;
  std::vector<UniqueFunction<void()>> hooks_, runningHooks_;
  std::vector<std::shared_ptr<Connection>> conns_, flushing_;
};

}  // namespace ingrid
