// Memory of the dedup table (grid/dedup_table.h): the resident-set growth per record and per
// client, for records holding a token-bucket answer (25 bytes encoded). Two shapes: many clients
// with a few records each (records waiting for doneBelow to pass them: the steady state), and one
// client with many records in every partition (a client whose doneBelow lags).
// Each shape runs in a process of its own (freed memory would hide the second one's growth).
//   bench_dedup [--shape spread|lagging] [--clients N] [--records-per-client M]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "grid/dedup_table.h"

namespace {

double rssBytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return 0;
}

// Fills `tables` (one per partition) with clients x perClient records; prints the cost.
void measure(const char* shape, std::uint64_t clients, std::uint64_t perClient) {
  constexpr std::size_t kPartitions = 271;
  const double before = rssBytes();
  auto tables = std::make_unique<ingrid::DedupTable[]>(kPartitions);
  const auto now = ingrid::DedupTable::Clock::now();
  const std::string answer(25, 'a');  // an encoded AcquireAnswer's size
  for (std::uint64_t c = 1; c <= clients; ++c) {
    for (std::uint64_t s = 1; s <= perClient; ++s) {
      tables[(c * 7919 + s) % kPartitions].record({c, s, 1}, answer, nullptr, now);
    }
  }
  std::size_t records = 0, clientEntries = 0;
  for (std::size_t p = 0; p < kPartitions; ++p) {
    records += tables[p].records();
    clientEntries += tables[p].clients();
  }
  const double grew = rssBytes() - before;
  std::printf("%-28s records=%zu client_entries=%zu rss_growth=%.1f MiB bytes_per_record=%.1f\n",
              shape, records, clientEntries, grew / (1 << 20), grew / static_cast<double>(records));
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t clients = 10000, perClient = 100;
  std::string shape = "spread";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--shape") {
      shape = argv[i + 1];
    } else if (arg == "--clients") {
      clients = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (arg == "--records-per-client") {
      perClient = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "bench_dedup: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (clients == 0 || perClient == 0) {
    std::fprintf(stderr, "bench_dedup: --clients and --records-per-client must be > 0\n");
    return 2;
  }
  if (shape == "spread") {
    measure("spread (clients x records)", clients, perClient);
  } else if (shape == "lagging") {
    measure("one client, all the records", 1, clients * perClient);
  } else {
    std::fprintf(stderr, "bench_dedup: --shape is spread or lagging, not '%s'\n", shape.c_str());
    return 2;
  }
  return 0;
}
