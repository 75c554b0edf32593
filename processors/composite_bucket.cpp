#include <ingrid/processors/composite_bucket.h>

#include <algorithm>
#include <exception>
#include <limits>

#include <ingrid/processors/limiter_support.h>

namespace ingrid {
namespace {

using limiter::int128;
using limiter::kMaxInt64;
using limiter::saturate;

std::optional<std::string> invalidState(const CompositeState& s) {
  if (s.bands.empty()) return std::string("no bandwidth");
  for (std::size_t i = 0; i < s.bands.size(); ++i) {
    const Band& b = s.bands[i];
    if (auto why = b.config.invalidReason()) return "band " + std::to_string(i) + ": " + *why;
    if (b.level.tokens < 0 || b.level.remainder < 0) {
      return "band " + std::to_string(i) + " holds negative tokens or remainder";
    }
  }
  return std::nullopt;
}

std::optional<CompositeState> readState(const MutableEntry& entry) {
  if (!entry.exists()) return std::nullopt;
  CompositeState state;
  std::optional<std::string> why;
  try {
    decodeInto(entry.value(), state);
    why = invalidState(state);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why) {
    throw ProcessorError(Errc::processor_failed, "entry does not hold a composite bucket: " + *why);
  }
  return state;
}

void writeState(MutableEntry& entry, const CompositeState& state) {
  entry.setValue(encode(state));
  entry.setExpiresAt(composite_bucket::expiresAt(state));
}

void checkRequest(const CompositeParams& params) {
  if (auto reason = params.invalidReason()) throwInvalidArgument(*reason);
}

// The band `fresh` replacing `old` (refilled to now under its own configuration) by `rule`.
BucketState inherit(const Band& old, const BucketParams& fresh, Replacement rule, Nanos now) {
  if (rule == Replacement::kReset) return token_bucket::create(fresh, now);
  std::int64_t tokens = old.level.tokens;
  if (rule == Replacement::kProportional) {
    tokens = static_cast<std::int64_t>(int128{tokens} * fresh.capacity / old.config.capacity);
  }
  return BucketState{std::min(tokens, fresh.capacity), 0, old.level.lastRefill};
}

}  // namespace

std::optional<std::string> CompositeParams::invalidReason() const {
  if (bandwidths.empty() || bandwidths.size() > kMaxBandwidths) {
    return "bandwidths must hold 1 to " + std::to_string(kMaxBandwidths) + ", got " +
           std::to_string(bandwidths.size());
  }
  for (std::size_t i = 0; i < bandwidths.size(); ++i) {
    if (auto why = bandwidths[i].invalidReason()) {
      return "bandwidths[" + std::to_string(i) + "]: " + *why;
    }
  }
  if (version < 0) return "version must be >= 0, got " + std::to_string(version);
  if (static_cast<std::uint8_t>(replacement) > static_cast<std::uint8_t>(Replacement::kReset)) {
    return "replacement must be 0 (as-is), 1 (proportional) or 2 (reset), got " +
           std::to_string(static_cast<int>(replacement));
  }
  return std::nullopt;
}

namespace composite_bucket {

CompositeState prepare(const std::optional<CompositeState>& stored, const CompositeParams& params,
                       Nanos now, bool& replaced) {
  replaced = false;
  CompositeState state;
  if (stored) state = *stored;
  for (Band& b : state.bands) token_bucket::refill(b.level, b.config, now);
  if (stored && stored->version >= params.version) return state;

  CompositeState next{params.version, {}};
  next.bands.reserve(params.bandwidths.size());
  for (std::size_t i = 0; i < params.bandwidths.size(); ++i) {
    const BucketParams& fresh = params.bandwidths[i];
    next.bands.push_back(Band{fresh, i < state.bands.size()
                                         ? inherit(state.bands[i], fresh, params.replacement, now)
                                         : token_bucket::create(fresh, now)});
    token_bucket::refill(next.bands.back().level, fresh, now);
  }
  replaced = stored.has_value();
  return next;
}

CompositeAnswer take(CompositeState& state, std::int64_t tokens, Nanos now) noexcept {
  CompositeAnswer a;
  a.version = state.version;
  bool enough = true;
  for (const Band& b : state.bands) {
    if (tokens <= b.level.tokens) continue;
    enough = false;
    Nanos wait = token_bucket::nanosUntil(b.level, b.config, tokens);
    if (wait != kNever && b.level.lastRefill > now) {
      wait = saturate(int128{wait} + b.level.lastRefill - now);
    }
    a.waitNanos = std::max(a.waitNanos, wait);
  }
  a.granted = enough;
  a.remaining = kMaxInt64;
  for (Band& b : state.bands) {
    if (enough) b.level.tokens -= tokens;
    a.remaining = std::min(a.remaining, b.level.tokens);
  }
  return a;
}

Nanos expiresAt(const CompositeState& state) noexcept {
  Nanos at = std::numeric_limits<Nanos>::min();
  for (const Band& b : state.bands) {
    const Nanos untilFull = token_bucket::nanosUntil(b.level, b.config, b.config.capacity);
    at = std::max(at,
                  untilFull == kNever ? kNever : saturate(int128{b.level.lastRefill} + untilFull));
  }
  return at;
}

}  // namespace composite_bucket

CompositeAnswer CompositeBucketAcquire::process(MutableEntry& entry, Nanos now) const {
  checkRequest(params);
  if (tokens <= 0) throwInvalidArgument("tokens must be > 0, got " + std::to_string(tokens));
  const std::optional<CompositeState> stored = readState(entry);
  bool replaced = false;
  CompositeState state = composite_bucket::prepare(stored, params, now, replaced);
  const CompositeAnswer answer = composite_bucket::take(state, tokens, now);
  if (!stored || replaced || answer.granted) writeState(entry, state);
  return answer;
}

std::vector<CompositeAnswer> CompositeBucketBatchAcquire::process(MutableEntry& entry,
                                                                  Nanos now) const {
  checkRequest(params);
  limiter::checkQuantities(tokens, 1, "tokens");
  const std::optional<CompositeState> stored = readState(entry);
  bool replaced = false;
  CompositeState state = composite_bucket::prepare(stored, params, now, replaced);
  std::vector<CompositeAnswer> answers;
  answers.reserve(tokens.size());
  bool write = !stored || replaced;
  for (const std::int64_t want : tokens) {
    answers.push_back(composite_bucket::take(state, want, now));
    write = write || answers.back().granted;
  }
  if (write) writeState(entry, state);
  return answers;
}

}  // namespace ingrid
