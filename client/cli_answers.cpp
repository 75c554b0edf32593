// ingrid-cli's reading of limiters' answers and stored states (cli_answers.h).
#include "client/cli_answers.h"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include <ingrid/processors/codec.h>

namespace ingrid::cli {
namespace {

// "never", or whole microseconds.
std::string duration(ingrid::Nanos ns) {
  return ns == ingrid::kNever ? "never" : std::to_string(ns / 1000) + " us";
}

}  // namespace

std::string describe(const ingrid::AcquireAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", remaining " +
         std::to_string(r.remaining) + ", wait " +
         (r.waitNanos == ingrid::kNever ? "never (more than the capacity)" : duration(r.waitNanos));
}
std::string describe(const ingrid::GcraAnswer& r) {
  return "granted " + std::string(r.granted() ? "yes" : "no") + ", limited " +
         (r.limited ? "yes" : "no") + ", limit " + std::to_string(r.limit) + ", remaining " +
         std::to_string(r.remaining) + ", retry after " + duration(r.retryAfter) +
         ", reset after " + duration(r.resetAfter);
}
std::string describe(const ingrid::LimitAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", limit " + std::to_string(r.limit) +
         ", remaining " + std::to_string(r.remaining) + ", retry after " + duration(r.retryAfter) +
         ", reset after " + duration(r.resetAfter);
}
std::string describe(const ingrid::ShaperAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", limit " + std::to_string(r.limit) + ", remaining " + std::to_string(r.remaining) +
         ", retry after " + duration(r.retryAfter) + ", reset after " + duration(r.resetAfter);
}

std::string describe(const ingrid::ReserveAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", remaining " + std::to_string(r.remaining);
}
std::string describe(const ingrid::WarmupAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", delay " + duration(r.delay) +
         ", cost " + duration(r.cost) + ", stored " + std::to_string(r.stored);
}
std::string describe(const ingrid::CompositeAnswer& r) {
  return "granted " + std::string(r.granted ? "yes" : "no") + ", remaining " +
         std::to_string(r.remaining) + ", wait " +
         (r.waitNanos == ingrid::kNever ? "never (more than a capacity)" : duration(r.waitNanos)) +
         ", version " + std::to_string(r.version);
}
std::string describe(const ingrid::LeaseAnswer& r) {
  std::string text = "granted " + std::string(r.granted ? "yes" : "no") + ", lease " +
                     std::to_string(r.lease) + ", expires after " + duration(r.expiresAfter);
  if (r.limit > 0) {  // an acquire
    text += ", limit " + std::to_string(r.limit) + ", held " + std::to_string(r.held) +
            ", remaining " + std::to_string(r.remaining()) + ", retry after " +
            duration(r.retryAfter);
  } else {
    text += ", held " + std::to_string(r.held);
  }
  return text;
}

int describeState(Limiter limiter, bool warmup, const std::string& value) {
  auto ll = [](std::int64_t v) { return static_cast<long long>(v); };
  try {
    switch (limiter) {
      case Limiter::kTokenBucket: {
        if (warmup) {
          const auto s = ingrid::decode<ingrid::WarmupState>(value);
          std::printf("warm-up: %lld stored permits, remainder %lld, next free at %lld ns\n",
                      ll(s.stored), ll(s.remainder), ll(s.nextFree));
          return 0;
        }
        const auto s = ingrid::decode<ingrid::BucketState>(value);
        std::printf("token bucket: %lld tokens, remainder %lld, refilled up to %lld ns\n",
                    ll(s.tokens), ll(s.remainder), ll(s.lastRefill));
        return 0;
      }
      case Limiter::kGcra:
      case Limiter::kLeakyShaper:
        std::printf("%s: theoretical arrival time %lld ns\n",
                    limiter == Limiter::kGcra ? "gcra" : "leaky shaper",
                    ll(ingrid::decode<std::int64_t>(value)));
        return 0;
      case Limiter::kFixedWindow: {
        const auto s = ingrid::decode<ingrid::FixedWindowState>(value);
        std::printf("fixed window: %lld granted in the window from %lld ns\n", ll(s.count),
                    ll(s.windowStart));
        return 0;
      }
      case Limiter::kSlidingLog: {
        const auto s = ingrid::decode<ingrid::SlidingLogState>(value);
        std::int64_t units = 0;
        for (const auto& rec : s.records) units += rec.count;
        std::printf("sliding log: %lld granted in %zu record(s), the newest at %lld ns\n",
                    ll(units), s.records.size(), ll(s.records.empty() ? 0 : s.records.back().at));
        return 0;
      }
      case Limiter::kSlidingWindow: {
        const auto s = ingrid::decode<ingrid::SlidingWindowState>(value);
        std::printf(
            "sliding window: %lld granted in the window from %lld ns, %lld in the one "
            "before\n",
            ll(s.current), ll(s.windowStart), ll(s.previous));
        return 0;
      }
      case Limiter::kLeakyMeter: {
        const auto s = ingrid::decode<ingrid::LeakyMeterState>(value);
        std::printf("leaky meter: level %lld, drained %lld, leaked up to %lld ns\n", ll(s.level),
                    ll(s.drained), ll(s.lastLeak));
        return 0;
      }
      case Limiter::kConcurrency: {
        const auto s = ingrid::decode<ingrid::ConcurrencyState>(value);
        std::printf("concurrency: %zu lease(s), next id %lld\n", s.leases.size(), ll(s.nextId));
        for (const auto& l : s.leases) {
          std::printf("  lease %lld: %lld unit(s), expires at %lld ns\n", ll(l.id), ll(l.units),
                      ll(l.expiresAt));
        }
        return 0;
      }
      case Limiter::kComposite: {
        const auto s = ingrid::decode<ingrid::CompositeState>(value);
        std::printf("composite: version %lld, %zu band(s)\n", ll(s.version), s.bands.size());
        for (const auto& b : s.bands) {
          std::printf("  capacity %lld per %lld ns: %lld tokens, refilled up to %lld ns\n",
                      ll(b.config.capacity), ll(b.config.refillPeriod), ll(b.level.tokens),
                      ll(b.level.lastRefill));
        }
        return 0;
      }
    }
  } catch (const std::exception& e) {
    std::printf("not a %s: %s (%zu bytes of state)\n", kLimiterNames[static_cast<int>(limiter)],
                e.what(), value.size());
  }
  return 1;
}

}  // namespace ingrid::cli
