#include "cluster/transport/timer.h"

#include <vector>

#include <asio/error.hpp>
#include <asio/post.hpp>

namespace ingrid {

namespace detail {
thread_local constinit SimulatedMember* tlSimulatedMember = nullptr;
}  // namespace detail

SimulatedMemberScope::SimulatedMemberScope(SimulatedMember* member) noexcept
    : previous_(detail::tlSimulatedMember) {
  detail::tlSimulatedMember = member;
}

SimulatedMemberScope::~SimulatedMemberScope() { detail::tlSimulatedMember = previous_; }

struct Timer::Sim {
  struct Waiter {
    asio::any_io_executor to;
    UniqueFunction<void(std::error_code)> handler;
  };
  SimulatedMember* member = nullptr;
  time_point expiry{};
  std::uint64_t event = 0;  // the scheduled expiry; 0: none
  std::vector<Waiter> waiters;

  // Posts every waiter's handler with `ec`; returns how many.
  std::size_t complete(std::error_code ec) {
    std::vector<Waiter> done = std::move(waiters);
    waiters.clear();
    for (Waiter& w : done) {
      asio::post(w.to, [h = std::move(w.handler), ec]() mutable { h(ec); });
    }
    return done.size();
  }
};

Timer::Timer(const asio::any_io_executor& executor) : executor_(executor) {
  if (SimulatedMember* member = simulatedMember()) {
    sim_ = std::make_unique<Sim>();
    sim_->member = member;
  } else {
    real_.emplace(executor);
  }
}

Timer::~Timer() {
  if (sim_) simCancel();
}

Timer::Timer(Timer&& other) noexcept = default;

Timer& Timer::operator=(Timer&& other) noexcept {
  if (this != &other) {
    if (sim_) simCancel();
    executor_ = std::move(other.executor_);
    real_ = std::move(other.real_);
    sim_ = std::move(other.sim_);
  }
  return *this;
}

Timer::time_point Timer::expiry() const { return sim_ ? sim_->expiry : real_->expiry(); }

std::size_t Timer::simCancel() {
  if (sim_->event != 0) {
    sim_->member->cancel(sim_->event);
    sim_->event = 0;
  }
  return sim_->complete(asio::error::operation_aborted);
}

std::size_t Timer::simExpiresAt(time_point at) {
  const std::size_t cancelled = simCancel();
  sim_->expiry = at;
  return cancelled;
}

void Timer::simWait(asio::any_io_executor to, UniqueFunction<void(std::error_code)> handler) {
  sim_->waiters.push_back({std::move(to), std::move(handler)});
  if (sim_->event != 0) return;
  Sim* sim = sim_.get();  // the destructor cancels the event before sim goes
  sim_->event = sim_->member->schedule(sim_->expiry, [sim] {
    sim->event = 0;
    sim->complete({});
  });
}

}  // namespace ingrid
