// Heap allocations per invocation, counted by a replacement of the global operator new in this
// process (every thread: the caller, the client's I/O thread, the nodes' network, worker and
// completion threads, and Asio's). Closed loop over prefilled keys, after a warm-up; the driver
// itself allocates nothing per call (its handler is one pointer, its keys fit std::string's
// small buffer), so every allocation counted is ingrid's or Asio's on its behalf.
//
// Cases:
//   embedded node, local primary        Node::invokeAsync on a node without a listen address
//   thin client, 1 node                 Client -> one ingrid Node over loopback, no backup
//   thin client, 3 nodes, 1 backup      Client -> primary -> backup, synchronous replication
//
//   bench_allocs [--ops N] [--inflight N] [--single-thread] [--where]
//
// --where also samples the call stacks of one allocation in 16 while counting and prints, per
// case, the functions that allocate most (the first frame outside the standard library, Asio and
// the allocator), as allocations per operation.
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

#include "acquire_loop.h"
#include "alloc_counter.h"

namespace {
// --where: call stacks of every kSampleEvery-th allocation while gSampling.
constexpr std::uint64_t kSampleEvery = 16;
constexpr int kDepth = 12;
constexpr std::size_t kMaxSamples = 1 << 16;
struct Sample {
  void* frames[kDepth];
  int depth;
};
std::atomic<bool> gSampling{false};
Sample gSamples[kMaxSamples];
std::atomic<std::size_t> gSampleCount{0};
thread_local bool tSampling = false;  // backtrace() itself may allocate

// The allocator's hook (alloc_counter.h).
void sampleStack(std::uint64_t count) {
  if (!gSampling.load(std::memory_order_relaxed) || tSampling || count % kSampleEvery != 0) return;
  const std::size_t i = gSampleCount.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxSamples) return;
  tSampling = true;
  gSamples[i].depth = backtrace(gSamples[i].frames, kDepth);
  tSampling = false;
}
}  // namespace

namespace {

constexpr int kKeys = 10'000;

// The demangled name of the function holding `pc` ("?" if unknown).
std::string functionAt(void* pc) {
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_sname == nullptr) return "?";
  int status = 0;
  char* name = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : info.dli_sname;
  std::free(name);
  return out;
}

// Frames that only carry an allocation to its cause: the allocator, the standard library, Asio,
// the string pool (a miss is charged to the code that took the string).
bool plumbing(const std::string& f) {
  for (const char* prefix :
       {"operator new", "std::", "__gnu_cxx::", "asio::", "(anonymous", "sampleStack",
        "void std::", "void asio::", "?", "ingrid::StringPool::"}) {
    if (f.rfind(prefix, 0) == 0) return true;
  }
  return f.find(" std::") != std::string::npos && f.find("ingrid::") == std::string::npos;
}

// Prints where the sampled allocations came from, as allocations per operation.
void printWhere(double ops) {
  const std::size_t n = std::min(gSampleCount.load(), kMaxSamples);
  std::map<std::string, std::size_t> byFunction;
  for (std::size_t i = 0; i < n; ++i) {
    std::string where = "?";
    for (int f = 1; f < gSamples[i].depth; ++f) {
      std::string name = functionAt(gSamples[i].frames[f]);
      if (!plumbing(name)) {
        where = name.substr(0, 150);
        break;
      }
    }
    ++byFunction[where];
  }
  std::vector<std::pair<std::size_t, std::string>> ranked;
  for (auto& [where, count] : byFunction) ranked.emplace_back(count, where);
  std::sort(ranked.rbegin(), ranked.rend());
  for (std::size_t i = 0; i < ranked.size() && i < 25; ++i) {
    std::printf("    %6.2f allocations/op  %s\n",
                static_cast<double>(ranked[i].first * kSampleEvery) / ops,
                ranked[i].second.c_str());
  }
}

bool gWhere = false;  // --where

template <class Invoker>
void measure(const char* name, Invoker& invoker, const std::vector<std::string>& keys,
             std::uint64_t ops, int inflight) {
  {  // Warm-up: creates every bucket, grows every map, opens every connection.
    ingrid::bench::AcquireLoop<Invoker> warm{invoker, keys};
    if (!warm.run(std::max<std::uint64_t>(ops / 4, 4 * kKeys), inflight)) {
      std::printf("%-34s warm-up did not finish within a minute\n", name);
      invoker.stop();  // its chains use the loop: ended before it goes
      return;
    }
  }
  ingrid::bench::AcquireLoop<Invoker> loop{invoker, keys};
  const std::uint64_t a0 = ingrid::alloc_counter::allocs.load();
  const std::uint64_t b0 = ingrid::alloc_counter::bytes.load();
  const auto t0 = std::chrono::steady_clock::now();
  gSampleCount = 0;
  gSampling = gWhere;
  const bool ok = loop.run(ops, inflight);
  gSampling = false;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::uint64_t allocs = ingrid::alloc_counter::allocs.load() - a0;
  const std::uint64_t bytes = ingrid::alloc_counter::bytes.load() - b0;
  const double done = static_cast<double>(loop.completed(inflight));
  if (!ok || done <= 0) {
    std::printf("%-34s did not finish within a minute\n", name);
    invoker.stop();  // its chains use the loop: ended before it goes
    return;
  }
  std::printf(
      "%-34s %3d in flight  %9.0f ops  %7.2f allocations/op  %8.0f bytes/op  failed %llu  "
      "(%.0f ops/s under counting)\n",
      name, inflight, done, static_cast<double>(allocs) / done, static_cast<double>(bytes) / done,
      static_cast<unsigned long long>(loop.failed.load()), done / secs);
  if (gWhere) printWhere(done);
  std::fflush(stdout);
}

ingrid::NodeOptions nodeOptions(bool singleThread, unsigned backups) {
  ingrid::NodeOptions o;
  o.workerThreads = 1;
  o.partitionsOnNetworkThread = singleThread;
  o.backups = backups;
  o.listenAddress = "127.0.0.1:0";
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t ops = 200'000;
  int inflight = 64;
  bool singleThread = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--inflight") && i + 1 < argc) {
      inflight = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--single-thread")) {
      singleThread = true;
    } else if (!std::strcmp(argv[i], "--where")) {
      gWhere = true;
      void* warm[2];
      backtrace(warm, 2);  // loads what backtrace() needs before any sampling
    } else {
      std::fprintf(stderr,
                   "usage: bench_allocs [--ops N] [--inflight N] [--single-thread] [--where]\n");
      return 2;
    }
  }
  if (ops == 0 || ops > 100'000'000 || inflight <= 0 || inflight > 4096) {
    std::fprintf(stderr, "bench_allocs: --ops 1..100000000, --inflight 1..4096\n");
    return 2;
  }
  const auto keys = ingrid::bench::smallKeys(kKeys);
  ingrid::alloc_counter::onAlloc = sampleStack;
  std::printf(
      "bench_allocs: heap allocations per token-bucket acquire, whole process, %s\n",
      singleThread ? "nodes with partitions on the network thread" : "nodes with 1 worker thread");

  {
    ingrid::NodeOptions o;
    o.workerThreads = 1;
    ingrid::Node node(o);
    if (auto s = node.start(); !s) {
      std::fprintf(stderr, "node: %s\n", s.error().message().c_str());
      return 1;
    }
    measure("embedded node, local primary", node, keys, ops, inflight);
    node.stop();
  }

  auto cluster = [&](int size, unsigned backups, const char* name) -> int {
    std::vector<std::unique_ptr<ingrid::Node>> nodes;
    for (int i = 0; i < size; ++i) {
      auto o = nodeOptions(singleThread, backups);
      if (!nodes.empty()) o.seeds = {nodes.front()->listenAddress()};
      nodes.push_back(std::make_unique<ingrid::Node>(o));
      if (auto s = nodes.back()->start(); !s) {
        std::fprintf(stderr, "node %d: %s\n", i, s.error().message().c_str());
        return 1;
      }
    }
    // Bounded wait for the joins to settle: every member on one topology with no sync under way.
    for (int i = 0; i < 30'000; ++i) {
      bool settled = true;
      for (auto& n : nodes) {
        const auto t = n->topology();
        settled = settled && t->members.size() == nodes.size() && t->syncing.empty() &&
                  t->version == nodes.front()->topology()->version;
      }
      if (settled) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ingrid::ClientOptions c;
    for (auto& n : nodes) c.seeds.push_back(n->listenAddress());
    ingrid::Client client(c);
    if (auto s = client.start(); !s) {
      std::fprintf(stderr, "client: %s\n", s.error().message().c_str());
      return 1;
    }
    measure(name, client, keys, ops, inflight);
    client.stop();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) (*it)->stop();
    return 0;
  };
  if (int rc = cluster(1, 0, "thin client, 1 node"); rc != 0) return rc;
  if (int rc = cluster(3, 1, "thin client, 3 nodes, 1 backup"); rc != 0) return rc;
  return 0;
}
