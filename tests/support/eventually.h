// eventually(): the tests' one way to wait for a condition, bounded by a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace ingrid::testing {

// Waits until pred() holds or `limit` passes; returns whether it held. Polls every millisecond
// (the conditions are states of other threads, which signal nothing a test could wait on).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace ingrid::testing
