// PartitionWorkers: the threads that own partitions (invariant 1).
//
// Partition p belongs to worker p % threads for the pool's whole life. Each worker is one thread
// running its own asio::io_context; a partition's store is touched only by code posted to that
// worker, one task after another, so processors are atomic with no lock on the hot path. Each
// worker also sweeps its partitions for expired entries on a timer.
//
// Thread safety: post() and the const members are safe from any thread; start() and stop() are
// called by the owning Node only. A simulation (runtime.h) runs them shared only: no thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <ingrid/clock.h>
#include <ingrid/hash.h>

#include "grid/partition_store.h"

#include "cluster/transport/timer.h"

namespace ingrid {

class PartitionWorkers {
 public:
  // With `shared`, there is one worker and no thread of its own: the partitions run on the thread
  // that runs `shared` (the node's network thread: one thread serves the connections and the
  // partitions, with no handoff between them). `threads` is then ignored.
  PartitionWorkers(std::uint32_t partitions, unsigned threads, std::shared_ptr<const Clock> clock,
                   std::chrono::milliseconds sweepInterval, std::size_t sweepEntries,
                   asio::io_context* shared = nullptr);
  PartitionWorkers(const PartitionWorkers&) = delete;
  PartitionWorkers& operator=(const PartitionWorkers&) = delete;
  ~PartitionWorkers();

  // How long a client's dedup records outlive its last request to a partition (the sweep drops
  // them after that). Before start().
  void setDedupWindow(std::chrono::milliseconds window) noexcept { dedupWindow_ = window; }

  // Starts the threads; each binds the stores of its partitions and begins sweeping.
  void start();
  // Stops sweeping, runs every task already posted, then joins the threads. Idempotent.
  // REQUIRES: no further post() (the Node stops admitting work first). With a shared io_context:
  // REQUIRES that its thread has ended (tasks still queued there are dropped with it).
  void stop();

  // Runs fn(PartitionStore&) on partition p's worker. Never runs fn inline.
  template <class F>
  void post(PartitionId p, F&& fn) {
    Worker& w = *workers_[p % workers_.size()];
    asio::post(*w.io, [store = &stores_[p], fn = std::forward<F>(fn)]() mutable { fn(*store); });
  }

  // Runs fn(PartitionStore&) on partition p's worker: at once when called there (partitions on
  // the network thread, whose handlers call this), otherwise posted. Every task of the data plane
  // goes this way, so on one thread they run in the order they were made.
  template <class F>
  void dispatch(PartitionId p, F&& fn) {
    if (onWorkerOf(p)) {
      fn(stores_[p]);
    } else {
      post(p, std::forward<F>(fn));
    }
  }
  // Whether the calling thread is partition p's worker.
  bool onWorkerOf(PartitionId p) const noexcept {
    return workers_[p % workers_.size()]->io->get_executor().running_in_this_thread();
  }

  // The worker that owns partition p.
  unsigned workerOf(PartitionId p) const noexcept {
    return static_cast<unsigned>(p % workers_.size());
  }
  // Runs fn(*this) on worker w, where it may use store(p) for each partition p that w owns. Never
  // runs fn inline.
  template <class F>
  void postToWorker(unsigned w, F&& fn) {
    asio::post(*workers_[w]->io, [this, fn = std::forward<F>(fn)]() mutable { fn(*this); });
  }
  // The io_context worker w runs (its thread, or the shared one).
  asio::io_context& io(unsigned w) noexcept { return *workers_[w]->io; }
  // Partition p's store. Only on p's worker (the store asserts it in debug builds).
  PartitionStore& store(PartitionId p) noexcept { return stores_[p]; }

  std::uint32_t partitionCount() const noexcept {
    return static_cast<std::uint32_t>(stores_.size());
  }
  unsigned threadCount() const noexcept { return static_cast<unsigned>(workers_.size()); }
  const Clock& clock() const noexcept { return *clock_; }

  // True on a thread of any PartitionWorkers of this process: blocking there would stall the
  // partitions that worker owns, or deadlock.
  static bool onAnyWorkerThread() noexcept;

  // Entries held across all partitions (live and expired-not-yet-reclaimed), and entries
  // reclaimed by sweeps so far. Blocks until every worker has answered; do not call from a worker.
  std::uint64_t TEST_entryCount();
  // What each worker holds, counted on the worker: entries (live and expired-not-yet-reclaimed)
  // and dedup records, and how many workers answered within `wait` (a worker whose loop is stuck
  // does not: liveness). Any thread but a worker's.
  struct Census {
    std::uint64_t entries = 0;
    std::uint64_t dedupRecords = 0;
    unsigned answered = 0;
    unsigned workers = 0;
  };
  Census census(std::chrono::milliseconds wait);
  std::uint64_t reclaimedCount() const noexcept;

 private:
  struct Worker {
    explicit Worker(asio::io_context* shared)
        : own(shared ? nullptr : std::make_unique<asio::io_context>(1)),
          io(shared ? shared : own.get()),
          sweepTimer(std::in_place, *io) {
      if (!shared) guard.emplace(io->get_executor());
    }
    std::unique_ptr<asio::io_context> own;  // null when shared
    asio::io_context* io;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::optional<Timer> sweepTimer;
    bool stopping = false;  // set by stop(), on the worker's own thread
    std::vector<PartitionId> partitions;
    std::thread thread;
    std::atomic<std::uint64_t> reclaimed{0};
  };

  void run(Worker& w);
  // The next sweep of w's partitions: after sweepInterval_, or kIdleSweepFactor times that when
  // the last sweep found them all empty (no entry, no dedup record).
  void scheduleSweep(Worker& w, bool idle = false);
  static constexpr int kIdleSweepFactor = 8;

  std::shared_ptr<const Clock> clock_;
  std::chrono::milliseconds sweepInterval_;
  std::size_t sweepEntries_;
  std::chrono::milliseconds dedupWindow_{60000};
  std::vector<PartitionStore> stores_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool shared_ = false;
  // Atomic: census() reads them from a scrape's thread while stop() may run.
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace ingrid
