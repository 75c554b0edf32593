// The composite bucket: several bandwidths (token buckets) checked and consumed all-or-nothing,
// with a versioned configuration stored in the state and replaced by a stated rule.
// docs/composite-bucket.md is the specification; each bandwidth's math is token_bucket.h's.
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/limiter_support.h>
#include <ingrid/processors/token_bucket.h>

namespace ingrid {

// How a newer configuration treats the tokens of the stored one.
enum class Replacement : std::uint8_t {
  kAsIs = 0,          // each band keeps its tokens, capped at the new capacity
  kProportional = 1,  // tokens * newCapacity / oldCapacity
  kReset = 2,         // each band starts as a new bucket (its initial tokens)
};

struct CompositeParams {
  // The most bandwidths one bucket has.
  static constexpr std::size_t kMaxBandwidths = 8;

  // REQUIRES: 1..kMaxBandwidths of them, each valid.
  std::vector<BucketParams> bandwidths;
  // REQUIRES: >= 0. A higher version replaces a stored lower one.
  std::int64_t version = 0;
  Replacement replacement = Replacement::kProportional;

  std::optional<std::string> invalidReason() const;
  template <class Archive>
  void save(Archive& ar) const {
    ar(bandwidths, version, static_cast<std::uint8_t>(replacement));
  }
  template <class Archive>
  void load(Archive& ar) {
    bandwidths.resize(loadBoundedSize(ar, kMaxBandwidths, "CompositeParams.bandwidths"));
    for (auto& b : bandwidths) ar(b);
    std::uint8_t rule = 0;
    ar(version, rule);
    replacement = static_cast<Replacement>(rule);  // checked by invalidReason()
  }
  friend bool operator==(const CompositeParams&, const CompositeParams&) = default;
};

// One bandwidth of a stored bucket: its configuration and its level.
struct Band {
  BucketParams config;
  BucketState level;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(config, level);
  }
  friend bool operator==(const Band&, const Band&) = default;
};

struct CompositeState {
  std::int64_t version = 0;
  // 1..CompositeParams::kMaxBandwidths.
  std::vector<Band> bands;

  template <class Archive>
  void save(Archive& ar) const {
    ar(version, bands);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(version);
    bands.resize(loadBoundedSize(ar, CompositeParams::kMaxBandwidths, "CompositeState.bands"));
    for (auto& b : bands) ar(b);
  }
  friend bool operator==(const CompositeState&, const CompositeState&) = default;
};

struct CompositeAnswer {
  bool granted = false;
  // The fewest tokens any bandwidth holds after this request.
  std::int64_t remaining = 0;
  // Denied: the longest bandwidth's wait for the tokens, from now (kNever if they exceed some
  // capacity). Granted: 0.
  Nanos waitNanos = 0;
  // The version of the configuration that answered (the stored one, if newer than the request's).
  std::int64_t version = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, remaining, waitNanos, version);
  }
  friend bool operator==(const CompositeAnswer&, const CompositeAnswer&) = default;
};

namespace composite_bucket {

// The state a request runs on: the stored one, replaced if `params` is newer, or a new bucket;
// every band refilled to `now`. Sets `replaced` when the configuration changed.
// REQUIRES: valid params.
CompositeState prepare(const std::optional<CompositeState>& stored, const CompositeParams& params,
                       Nanos now, bool& replaced);
// Takes `tokens` from every band if every band holds them. REQUIRES: prepare()d; tokens > 0.
CompositeAnswer take(CompositeState& state, std::int64_t tokens, Nanos now) noexcept;
// When every band would be full.
Nanos expiresAt(const CompositeState& state) noexcept;

}  // namespace composite_bucket

struct CompositeBucketBatchAcquire;

struct CompositeBucketAcquire {
  static constexpr std::string_view kName = "ingrid.CompositeBucketAcquire";
  using Result = CompositeAnswer;
  using Batch = CompositeBucketBatchAcquire;

  CompositeParams params;
  // REQUIRES: > 0.
  std::int64_t tokens = 1;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(params, tokens);
  }
  static bool joinable(const CompositeBucketAcquire& first, const CompositeBucketAcquire& other) {
    return first.params == other.params;
  }
  static CompositeBucketBatchAcquire batch(std::vector<CompositeBucketAcquire> items);
};

// Several acquires on one composite bucket, in order at the same `now`; read once, written once.
struct CompositeBucketBatchAcquire {
  static constexpr std::string_view kName = "ingrid.CompositeBucketBatchAcquire";
  using Result = std::vector<CompositeAnswer>;
  static constexpr std::size_t kMaxWants = limiter::kMaxBatch;

  CompositeParams params;
  // REQUIRES: each > 0; 1..kMaxWants of them.
  std::vector<std::int64_t> tokens;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void save(Archive& ar) const {
    ar(params, tokens);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(params);
    limiter::loadQuantities(ar, tokens, "CompositeBucketBatchAcquire.tokens");
  }
};

inline CompositeBucketBatchAcquire CompositeBucketAcquire::batch(
    std::vector<CompositeBucketAcquire> items) {
  CompositeBucketBatchAcquire out;
  if (!items.empty()) out.params = items.front().params;
  out.tokens.reserve(items.size());
  for (const auto& item : items) out.tokens.push_back(item.tokens);
  return out;
}

}  // namespace ingrid
