#include "cluster/shard/partition_workers.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

// Runs stop() on another thread and gives up (failing the whole run) if it has not returned
// within `limit`: a stop that never returns would otherwise hang the test until CTest kills it.
void stopWithin(PartitionWorkers& workers, std::chrono::seconds limit, int round) {
  std::promise<void> stopped;
  auto done = stopped.get_future();
  std::thread stopper([&] {
    workers.stop();
    stopped.set_value();
  });
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "PartitionWorkers::stop() did not return within %lld s (round %d)\n",
                 static_cast<long long>(limit.count()), round);
    std::_Exit(EXIT_FAILURE);  // the stopper thread cannot be joined
  }
  stopper.join();
}

}  // namespace

TEST_CASE("Worker pools stop even when an expiry sweep falls due while they stop",
          "[cluster][workers][lifecycle]") {
  // The race: the sweep timer expires while the worker is busy, so its completion is already
  // queued (with no error) when stop() cancels the timer. That sweep must not re-arm the timer.
  auto clock = std::make_shared<ManualClock>(0);
  for (int round = 0; round < 200; ++round) {
    PartitionWorkers workers(4, 1, clock, 1ms, 64);
    workers.start();
    std::promise<void> busy;
    auto busyNow = busy.get_future();
    workers.post(0, [&busy](PartitionStore&) {
      busy.set_value();
      // Keep the worker busy past the sweep's due time (a busy wait, not a sleep: the point is
      // to hold the thread while the timer expires).
      const auto until = std::chrono::steady_clock::now() + 3ms;
      while (std::chrono::steady_clock::now() < until) {
      }
    });
    busyNow.wait();
    stopWithin(workers, 10s, round);
  }
  SUCCEED("200 pools stopped");
}
