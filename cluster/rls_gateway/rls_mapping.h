// The Envoy RLS request -> ingrid limiter mapping: each descriptor of a RateLimitRequest becomes
// a plan (no rule, unlimited, or one fixed-window acquire on a key of its own), through the
// shared adapter ingrid/limiter_request.h. docs/gateways.md "Envoy RLS v3" has the rules.
//
// Thread safety: pure functions of (request, config), any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/limiter_request.h>
#include <ingrid/result.h>

#include "cluster/rls_gateway/rls_config.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace ingrid {

// Bounds of one RateLimitRequest; past them it is refused INVALID_ARGUMENT naming the bound,
// except kMaxValueBytes: a longer value (a client's header) is served, matches key-only rules only
// and is counted under its hash (docs/gateways.md "Envoy RLS v3").
struct RlsRequestBounds {
  static constexpr std::size_t kMaxDomainBytes = 256;
  static constexpr std::size_t kMaxDescriptors = 64;
  static constexpr std::size_t kMaxEntries = 16;                              // per descriptor
  static constexpr std::size_t kMaxKeyBytes = RlsConfigBounds::kMaxKeyBytes;  // an entry's key
  static constexpr std::size_t kMaxValueBytes =
      RlsConfigBounds::kMaxValueBytes;  // an entry's value
  // ingrid's bound on either hits_addend. The RLS message does not bound them (uint32,
  // UInt64Value); 10^9 is the bound Envoy's route configuration puts on its
  // RateLimit.HitsAddend.number.
  static constexpr std::uint64_t kMaxHitsAddend = 1'000'000'000;
};

// What one descriptor asks for.
struct RlsPlan {
  enum class Kind {
    kNoRule,     // no rule limits it: OK, no current_limit (envoyproxy/ratelimit)
    kUnlimited,  // its rule is unlimited: OK, limit_remaining UINT32_MAX, no bucket touched
    kBlocked,    // its limit is 0 requests per unit: OVER_LIMIT, no bucket touched
    kLimit,      // `request` on `key` decides
  };
  Kind kind = Kind::kNoRule;
  std::string key;  // the ingrid key: domain + the descriptor's entries, escaped (a value past
                    // kMaxValueBytes as "#xxh3-" + its hash); + the unit
  std::optional<LimiterRequest> request;  // kLimit: a FixedWindowAcquire of `hits`
  RlsRateLimit limit;                     // kUnlimited, kBlocked, kLimit
  bool shadowMode = false;                // over the limit is reported, answered OK
  std::int64_t hits = 1;
};

// The plans for `request`'s descriptors, in order, under `config`; Errc::invalid_argument naming
// the field and the bound for a request that breaks one.
Result<std::vector<RlsPlan>> planRateLimit(
    const envoy::service::ratelimit::v3::RateLimitRequest& request, const RlsConfig& config);

// `s` with '%', '|', '=', '#' and every byte outside printable ASCII as %XX: so that the key's
// separators never occur in its parts, and distinct entries give distinct keys.
std::string rlsEscape(const std::string& s);

}  // namespace ingrid
