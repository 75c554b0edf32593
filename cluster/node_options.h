// NodeOptions: how an embedded node is configured. A plain struct; every field has its default.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <ingrid/grid/clock.h>
#include <ingrid/grid/hash.h>

namespace ingrid {

struct NodeOptions {
  // Number of partitions the key space is cut into. Every member of a cluster must use the same
  // value, for the cluster's whole life. Default: 1024.
  std::uint32_t partitions = kDefaultPartitionCount;
  // Threads that own partitions and run processors; partition p belongs to worker p % threads.
  // 0 means std::thread::hardware_concurrency(). Default: 0.
  unsigned workerThreads = 0;
  // Threads that run completions (callbacks, futures) whose handler has no associated executor.
  // Completions never run on a partition worker (DESIGN invariant 9). Default: 1.
  unsigned completionThreads = 1;
  // The clock processors read "now" from. Default (nullptr): the system wall clock.
  std::shared_ptr<const Clock> clock = nullptr;
  // How often each worker sweeps its partitions for expired entries. Default: 1 s.
  std::chrono::milliseconds expirySweepInterval{1000};
  // Hash buckets of each partition examined per sweep; bounds the work of one sweep. Default: 64.
  std::size_t expirySweepBuckets = 64;
};

}  // namespace ingrid
