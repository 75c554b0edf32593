// Timer: a member's timer, with the part of asio::steady_timer's interface the node uses
// (expires_after, expires_at, expiry, async_wait, cancel).
//
// Made outside a simulation it is an asio::steady_timer. Made inside one (runtime.h: a
// SimulatedMember installed for the calling thread) its deadlines go into the simulator's event
// queue, in the member's simulated time, and a due or cancelled wait's handler is posted to the
// timer's executor, as Asio does: never run inside async_wait, cancel or the destructor.
// Asio's semantics hold in both: setting the expiry cancels the waits in progress (their handlers
// get asio::error::operation_aborted), and so does destroying the timer.
//
// Thread safety: as an Asio timer: one thread at a time (the thread that runs its executor).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <ingrid/unique_function.h>

#include "cluster/transport/runtime.h"

namespace ingrid {

class Timer {
 public:
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  explicit Timer(asio::io_context& io) : Timer(asio::any_io_executor(io.get_executor())) {}
  Timer(asio::io_context& io, duration d) : Timer(io) { expires_after(d); }
  explicit Timer(const asio::any_io_executor& executor);
  Timer(const asio::any_io_executor& executor, duration d) : Timer(executor) { expires_after(d); }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // As Asio's: a moved-from timer may only be destroyed or assigned to.
  Timer(Timer&& other) noexcept;
  Timer& operator=(Timer&& other) noexcept;
  ~Timer();

  // Each cancels the waits in progress and returns how many it cancelled.
  std::size_t expires_after(duration d) {
    if (!sim_) return real_->expires_after(d);
    return simExpiresAt(steadyNow() + d);
  }
  std::size_t expires_at(time_point at) {
    if (!sim_) return real_->expires_at(at);
    return simExpiresAt(at);
  }
  time_point expiry() const;
  std::size_t cancel() {
    if (!sim_) return real_->cancel();
    return simCancel();
  }

  // `handler(const std::error_code&)` runs once: with no error at the expiry, or with
  // asio::error::operation_aborted if the wait was cancelled first.
  template <class Handler>
  void async_wait(Handler&& handler) {
    if (!sim_) {
      real_->async_wait(std::forward<Handler>(handler));
      return;
    }
    asio::any_io_executor to = asio::get_associated_executor(handler, executor_);
    simWait(std::move(to), UniqueFunction<void(std::error_code)>(std::forward<Handler>(handler)));
  }

 public:
  struct Sim;  // the simulated timer's state (timer.cpp)

 private:
  std::size_t simExpiresAt(time_point at);
  std::size_t simCancel();
  void simWait(asio::any_io_executor to, UniqueFunction<void(std::error_code)> handler);

  asio::any_io_executor executor_;
  std::optional<asio::steady_timer> real_;  // outside a simulation
  std::unique_ptr<Sim> sim_;                // inside one
};

}  // namespace ingrid
