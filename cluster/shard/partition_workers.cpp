#include "cluster/shard/partition_workers.h"

#include <algorithm>
#include <cassert>
#include <future>

#include "cluster/transport/runtime.h"

namespace ingrid {
namespace {
thread_local bool tlOnWorker = false;
}  // namespace

PartitionWorkers::PartitionWorkers(std::uint32_t partitions, unsigned threads,
                                   std::shared_ptr<const Clock> clock,
                                   std::chrono::milliseconds sweepInterval,
                                   std::size_t sweepEntries, asio::io_context* shared)
    : clock_(std::move(clock)),
      sweepInterval_(sweepInterval),
      sweepEntries_(sweepEntries),
      stores_(partitions),
      shared_(shared != nullptr) {
  if (shared_) threads = 1;
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(shared));
  for (PartitionId p = 0; p < partitions; ++p) workers_[p % threads]->partitions.push_back(p);
}

PartitionWorkers::~PartitionWorkers() { stop(); }

void PartitionWorkers::start() {
  if (started_) return;
  started_ = true;
  // A simulation starts no thread: its node shares the network thread's io_context, polled.
  assert((shared_ || simulatedMember() == nullptr) && "worker threads in a simulation");
  if (shared_) {
    // First in the shared context's queue: every task posted later finds its stores bound.
    Worker* worker = workers_.front().get();
    asio::post(*worker->io, [this, worker] {
      tlOnWorker = true;  // that thread now owns partitions: it must not block on them either
      for (PartitionId p : worker->partitions) stores_[p].bindOwner();
      scheduleSweep(*worker);
    });
    return;
  }
  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->thread = std::thread([this, worker] { run(*worker); });
  }
}

void PartitionWorkers::run(Worker& w) {
  tlOnWorker = true;
  for (PartitionId p : w.partitions) stores_[p].bindOwner();
  scheduleSweep(w);
  w.io->run();
  tlOnWorker = false;
}

void PartitionWorkers::scheduleSweep(Worker& w, bool idle) {
  // A worker whose partitions hold nothing has nothing to expire until something is written: it
  // sweeps kIdleSweepFactor times less often (an idle member's wake-ups are most of its cost).
  w.sweepTimer->expires_after(idle ? sweepInterval_ * kIdleSweepFactor : sweepInterval_);
  w.sweepTimer->async_wait([this, &w](std::error_code ec) {
    // A sweep that was already due when stop() cancelled the timer still runs with no error:
    // the flag, not the error code, ends the sweeping, or run() would never return.
    if (ec || w.stopping) return;
    const Nanos now = clock_->now();
    std::uint64_t reclaimed = 0;
    const auto steadyNow = ingrid::steadyNow();
    bool empty = true;
    for (PartitionId p : w.partitions) {
      reclaimed += stores_[p].reclaimExpired(now, sweepEntries_);
      stores_[p].dedup().expireIdle(steadyNow, dedupWindow_);
      empty = empty && stores_[p].size() == 0 && stores_[p].dedup().clients() == 0;
    }
    if (reclaimed != 0) w.reclaimed.fetch_add(reclaimed, std::memory_order_relaxed);
    scheduleSweep(w, empty);
  });
}

void PartitionWorkers::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  if (shared_) {
    // The shared context's thread has ended: nothing runs the sweep any more. The timer goes now,
    // while that context still exists (it may be destroyed before this object).
    workers_.front()->stopping = true;
    workers_.front()->sweepTimer.reset();
    return;
  }
  for (auto& w : workers_) {
    asio::post(*w->io, [worker = w.get()] {
      worker->stopping = true;
      worker->sweepTimer->cancel();
    });
    w->guard.reset();  // run() returns once the posted tasks are done
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

bool PartitionWorkers::onAnyWorkerThread() noexcept { return tlOnWorker; }

std::uint64_t PartitionWorkers::TEST_entryCount() {
  std::uint64_t total = 0;
  if (!started_ || stopped_) return 0;  // no worker would answer
  for (auto& w : workers_) {
    std::promise<std::uint64_t> counted;
    auto answer = counted.get_future();
    asio::post(*w->io, [this, worker = w.get(), &counted] {
      std::uint64_t n = 0;
      for (PartitionId p : worker->partitions) n += stores_[p].size();
      counted.set_value(n);
    });
    total += answer.get();
  }
  return total;
}

PartitionWorkers::Census PartitionWorkers::census(std::chrono::milliseconds wait) {
  Census total;
  total.workers = static_cast<unsigned>(workers_.size());
  if (!started_ || stopped_) return total;  // no worker would answer
  struct Count {
    std::promise<std::pair<std::uint64_t, std::uint64_t>> done;
  };
  std::vector<std::future<std::pair<std::uint64_t, std::uint64_t>>> answers;
  for (auto& w : workers_) {
    auto count = std::make_shared<Count>();  // outlives a wait that gave up
    answers.push_back(count->done.get_future());
    asio::post(*w->io, [this, worker = w.get(), count] {
      std::uint64_t entries = 0, records = 0;
      for (PartitionId p : worker->partitions) {
        entries += stores_[p].size();
        records += stores_[p].dedup().records();
      }
      count->done.set_value({entries, records});
    });
  }
  const auto until = steadyNow() + wait;
  const auto ready = [](const std::future<std::pair<std::uint64_t, std::uint64_t>>& a) {
    return a.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  // In a simulation (a baton thread) the simulator runs until they answer; `until` is its time.
  SimulatedMember* sim = simulatedMember();
  if (sim) {
    sim->block(until, [&] { return std::all_of(answers.begin(), answers.end(), ready); });
  }
  for (auto& answer : answers) {
    if (sim ? !ready(answer) : answer.wait_until(until) != std::future_status::ready) continue;
    const auto [entries, records] = answer.get();
    total.entries += entries;
    total.dedupRecords += records;
    ++total.answered;
  }
  return total;
}

std::uint64_t PartitionWorkers::reclaimedCount() const noexcept {
  std::uint64_t total = 0;
  for (const auto& w : workers_) total += w->reclaimed.load(std::memory_order_relaxed);
  return total;
}

}  // namespace ingrid
