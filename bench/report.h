// Small helpers the benchmarks share: latency percentiles and peak memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace ingrid::bench {

// Peak resident set size of this process in KiB (VmHWM), or -1 if unknown.
inline long peakRssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Prints "name: ops/s, p50/p90/p99/p99.9/max latency in microseconds, peak RSS".
inline void report(const char* name, std::vector<std::int64_t> latenciesNs, double seconds) {
  if (latenciesNs.empty()) {
    std::printf("%-28s no operations completed\n", name);
    return;
  }
  std::sort(latenciesNs.begin(), latenciesNs.end());
  auto pct = [&](double p) {
    const auto i = static_cast<std::size_t>(p * static_cast<double>(latenciesNs.size() - 1));
    return static_cast<double>(latenciesNs[i]) / 1000.0;
  };
  std::printf(
      "%-28s %10.0f ops/s  p50 %7.1f us  p90 %7.1f us  p99 %7.1f us  p99.9 %8.1f us  "
      "max %8.1f us  (n=%zu, peak RSS %ld KiB)\n",
      name, static_cast<double>(latenciesNs.size()) / seconds, pct(0.50), pct(0.90), pct(0.99),
      pct(0.999), pct(1.0), latenciesNs.size(), peakRssKiB());
}

}  // namespace ingrid::bench
