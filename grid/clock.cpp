#include <ingrid/clock.h>

#include <chrono>

namespace ingrid {

Nanos SystemClock::now() const noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ingrid
