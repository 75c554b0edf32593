#include "cluster/transport/timer.h"

#include <map>
#include <vector>

#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
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

// Named, not anonymous: Timer::Sim holds a pointer to it (GCC's -Wsubobject-linkage in a unity
// build, where this file is an included one).
namespace timer_detail {
struct SimTimerService;
}
using timer_detail::SimTimerService;

struct Timer::Sim {
  struct Waiter {
    asio::any_io_executor to;  // tracks work: a waiting timer keeps its io_context from stopping
    UniqueFunction<void(std::error_code)> handler;
  };
  SimulatedMember* member = nullptr;
  SimTimerService* service = nullptr;  // null once the timer's io_context is going away
  std::uint64_t serial = 0;            // creation order within its service
  time_point expiry{};
  std::uint64_t event = 0;  // the scheduled expiry; 0: none
  std::vector<Waiter> waiters;

  // Posts every waiter's handler with `ec`; returns how many.
  std::size_t complete(std::error_code ec) {
    std::vector<Waiter> done = std::move(waiters);
    waiters.clear();
    if (service == nullptr) return done.size();  // destroyed uncalled, as Asio does at shutdown
    for (Waiter& w : done) {
      asio::post(w.to, [h = std::move(w.handler), ec]() mutable { h(ec); });
    }
    return done.size();
  }
  // The io_context is being destroyed: the expiry is forgotten and the waiting handlers are
  // destroyed uncalled (what Asio does with a real timer's).
  void shutdown() {
    if (event != 0) member->cancel(event);
    event = 0;
    service = nullptr;
    std::vector<Waiter> dropped = std::move(waiters);
    waiters.clear();
  }
};

namespace timer_detail {

// The simulated timers of one io_context, so that its destruction reaches them (Asio calls a
// service's shutdown() when its execution context goes).
struct SimTimerService final : asio::execution_context::service {
  static inline asio::execution_context::id id;
  explicit SimTimerService(asio::execution_context& context)
      : asio::execution_context::service(context) {}
  void shutdown() override {
    // Destroying a handler may destroy other timers (which leave `timers`): one at a time.
    while (!timers.empty()) {
      Timer::Sim* sim = timers.begin()->second;
      timers.erase(timers.begin());
      sim->shutdown();
    }
  }
  // By creation order, not by address: the shutdown's order is the same in every run.
  std::map<std::uint64_t, Timer::Sim*> timers;
  std::uint64_t nextSerial = 1;
};

}  // namespace timer_detail

Timer::Timer(const asio::any_io_executor& executor) : executor_(executor) {
  if (SimulatedMember* member = simulatedMember()) {
    sim_ = std::make_unique<Sim>();
    sim_->member = member;
    auto& service =
        asio::use_service<SimTimerService>(asio::query(executor, asio::execution::context));
    sim_->service = &service;
    sim_->serial = service.nextSerial++;
    service.timers.emplace(sim_->serial, sim_.get());
  } else {
    real_.emplace(executor);
  }
}

Timer::~Timer() {
  if (!sim_) return;
  simCancel();
  if (sim_->service != nullptr) sim_->service->timers.erase(sim_->serial);
}

Timer::Timer(Timer&& other) noexcept = default;

Timer& Timer::operator=(Timer&& other) noexcept {
  if (this != &other) {
    if (sim_) {
      simCancel();
      if (sim_->service != nullptr) sim_->service->timers.erase(sim_->serial);
    }
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
  if (sim_->service == nullptr) return;  // its io_context is gone: the handler is dropped
  sim_->waiters.push_back(
      {asio::prefer(std::move(to), asio::execution::outstanding_work.tracked), std::move(handler)});
  if (sim_->event != 0) return;
  Sim* sim = sim_.get();  // the destructor cancels the event before sim goes
  sim_->event = sim_->member->schedule(sim_->expiry, [sim] {
    sim->event = 0;
    sim->complete({});
  });
}

}  // namespace ingrid
