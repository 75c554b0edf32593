// RlsConfig: the descriptor rules of the Envoy RLS gateway, loaded from a file in
// envoyproxy/ratelimit's YAML shape (docs/gateways.md "Envoy RLS v3" lists what is served), and
// the rule a descriptor's entries match, by envoyproxy/ratelimit's rules: at each level an entry
// matches the rule with its key and value before the rule with its key only, and the entries
// walk the nested `descriptors` in order; only the rule the last entry matches limits.
//
// Thread safety: loading is a pure function; an RlsConfig is immutable once loaded, shared as
// shared_ptr<const RlsConfig> and read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/result.h>

namespace ingrid {

// The units served: Envoy's RateLimitResponse.RateLimit.Unit numbers.
enum class RlsUnit { kSecond = 1, kMinute = 2, kHour = 3, kDay = 4 };
// The unit's length in nanoseconds.
Nanos rlsUnitNanos(RlsUnit unit) noexcept;
const char* rlsUnitName(RlsUnit unit) noexcept;  // "second", ...

// Bounds of a configuration file; past them it is refused, naming the line and the bound. A
// key or value is bounded as in a request (RlsRequestBounds, rls_mapping.h): a request value
// longer than kMaxValueBytes can then match no key+value rule. The string bounds hold however a
// string is reached (an alias repeats its anchor's string).
struct RlsConfigBounds {
  static constexpr std::size_t kMaxFileBytes = 16 * 1024 * 1024;
  static constexpr std::size_t kMaxDepth = 16;  // nested `descriptors` levels (= kMaxEntries)
  static constexpr std::size_t kMaxRules = 100'000;
  static constexpr std::size_t kMaxKeyBytes = 256;     // a descriptor's key
  static constexpr std::size_t kMaxValueBytes = 1024;  // a descriptor's value
  static constexpr std::size_t kMaxNameBytes = 256;    // rate_limit.name
};

struct RlsRateLimit {
  std::uint32_t requestsPerUnit = 0;  // 0: every request is over the limit
  RlsUnit unit = RlsUnit::kSecond;
  std::string name;        // reported in DescriptorStatus.current_limit.name
  bool unlimited = false;  // answered OK without touching a bucket
};

struct RlsRule;

// The rules at one level of nesting, indexed by key+value and by key (key-only rules).
struct RlsLevel {
  std::vector<RlsRule> rules;
  std::map<std::pair<std::string, std::string>, std::size_t> byKeyValue;
  std::map<std::string, std::size_t> byKey;

  // The rule for (key, value): key and value first, then key only; nullptr if neither.
  const RlsRule* find(const std::string& key, const std::string& value) const;
};

struct RlsRule {
  std::string key;
  std::optional<std::string> value;
  std::optional<RlsRateLimit> rateLimit;
  bool shadowMode = false;
  RlsLevel children;
};

struct RlsConfig {
  std::string domain;
  RlsLevel root;
  std::size_t ruleCount = 0;

  // The rule that limits a descriptor with these (key, value) entries, or nullptr (no rule, or
  // the matched rule has no rate_limit): envoyproxy/ratelimit's matching (header comment).
  const RlsRule* match(const std::vector<std::pair<std::string, std::string>>& entries) const;
};

using RlsConfigPtr = std::shared_ptr<const RlsConfig>;

// The configuration in `yaml`, or Errc::invalid_configuration with "SOURCE:LINE: reason" (line
// 1-based; SOURCE names the file for the reader). Never throws.
Result<RlsConfigPtr> parseRlsConfig(std::string_view yaml, const std::string& source);
// The configuration in the file at `path`, or an error naming the file, the line and the reason.
Result<RlsConfigPtr> loadRlsConfig(const std::string& path);

}  // namespace ingrid
