#include "cluster/rls_gateway/rls_mapping.h"

#include <cstdio>
#include <utility>

// Header-only use of libxxhash-dev, as grid/hash.cpp.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ingrid {
namespace {

// An entry's value as a part of the bucket key: the value escaped; or, for a value longer than
// kMaxValueBytes, "#xxh3-" and its XXH3-128 in 32 hex digits, which an escaped value never is
// (it holds no '#'). Such a value comes from a client's header; no configured value is that long
// (RlsConfigBounds), so it matches key-only rules only, each value its own counter as before.
std::string valuePart(const std::string& value) {
  if (value.size() <= RlsRequestBounds::kMaxValueBytes) return rlsEscape(value);
  const XXH128_hash_t h = XXH3_128bits(value.data(), value.size());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string("#xxh3-") + hex;
}

Error refuse(std::string reason) { return Error(Errc::invalid_argument, std::move(reason)); }

std::string tooLong(const std::string& what, std::size_t bound, const char* name) {
  return what + " is longer than " + std::to_string(bound) + " bytes (RlsRequestBounds::" + name +
         ")";
}

}  // namespace

std::string rlsEscape(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x21 || b > 0x7E || c == '%' || c == '|' || c == '=' || c == '#') {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::vector<RlsPlan>> planRateLimit(
    const envoy::service::ratelimit::v3::RateLimitRequest& request, const RlsConfig& config) {
  using Bounds = RlsRequestBounds;
  if (request.domain().empty()) return refuse("domain is empty");
  if (request.domain().size() > Bounds::kMaxDomainBytes) {
    return refuse(tooLong("domain", Bounds::kMaxDomainBytes, "kMaxDomainBytes"));
  }
  const int count = request.descriptors_size();
  if (count == 0) return refuse("descriptors is empty");
  if (static_cast<std::size_t>(count) > Bounds::kMaxDescriptors) {
    return refuse("more than " + std::to_string(Bounds::kMaxDescriptors) +
                  " descriptors (RlsRequestBounds::kMaxDescriptors)");
  }
  const std::uint64_t requestHits = request.hits_addend() == 0 ? 1 : request.hits_addend();
  if (requestHits > Bounds::kMaxHitsAddend) {
    return refuse("hits_addend " + std::to_string(requestHits) + " is over " +
                  std::to_string(Bounds::kMaxHitsAddend) + " (RlsRequestBounds::kMaxHitsAddend)");
  }
  const bool ourDomain = request.domain() == config.domain;
  std::vector<RlsPlan> plans(static_cast<std::size_t>(count));
  std::vector<std::pair<std::string, std::string>> entries;
  for (int d = 0; d < count; ++d) {
    const auto& descriptor = request.descriptors(d);
    const std::string at = "descriptors[" + std::to_string(d) + "]";
    if (descriptor.entries_size() == 0) return refuse(at + ".entries is empty");
    if (static_cast<std::size_t>(descriptor.entries_size()) > Bounds::kMaxEntries) {
      return refuse(at + " has more than " + std::to_string(Bounds::kMaxEntries) +
                    " entries (RlsRequestBounds::kMaxEntries)");
    }
    RlsPlan& plan = plans[static_cast<std::size_t>(d)];
    plan.hits = static_cast<std::int64_t>(requestHits);
    if (descriptor.has_hits_addend()) {
      const std::uint64_t hits = descriptor.hits_addend().value();
      if (hits > Bounds::kMaxHitsAddend) {
        return refuse(at + ".hits_addend " + std::to_string(hits) + " is over " +
                      std::to_string(Bounds::kMaxHitsAddend) +
                      " (RlsRequestBounds::kMaxHitsAddend)");
      }
      // An explicit 0 is a check without counting in envoyproxy/ratelimit; the fixed window has
      // no read without a take, so it takes 1 here (docs/gateways.md says so).
      plan.hits = hits == 0 ? 1 : static_cast<std::int64_t>(hits);
    }
    entries.clear();
    std::string key = "rls|" + rlsEscape(request.domain());
    for (int e = 0; e < descriptor.entries_size(); ++e) {
      const auto& entry = descriptor.entries(e);
      const std::string where = at + ".entries[" + std::to_string(e) + "]";
      if (entry.key().empty()) return refuse(where + ".key is empty");
      if (entry.key().size() > Bounds::kMaxKeyBytes) {
        return refuse(tooLong(where + ".key", Bounds::kMaxKeyBytes, "kMaxKeyBytes"));
      }
      entries.emplace_back(entry.key(), entry.value());
      key += "|" + rlsEscape(entry.key()) + "=" + valuePart(entry.value());
    }
    if (descriptor.has_limit()) {  // Envoy's override: this limit, on a key of its own
      const auto& o = descriptor.limit();
      const int unit = static_cast<int>(o.unit());
      if (unit < static_cast<int>(RlsUnit::kSecond) || unit > static_cast<int>(RlsUnit::kDay)) {
        return refuse(at + ".limit.unit " + std::to_string(unit) +
                      " is not SECOND, MINUTE, HOUR or DAY");
      }
      plan.limit.requestsPerUnit = o.requests_per_unit();
      plan.limit.unit = static_cast<RlsUnit>(unit);
      key += "#override=" + std::to_string(o.requests_per_unit());
      const RlsRule* rule = ourDomain ? config.match(entries) : nullptr;
      plan.shadowMode = rule != nullptr && rule->shadowMode;
    } else {
      const RlsRule* rule = ourDomain ? config.match(entries) : nullptr;
      if (rule == nullptr) continue;  // kNoRule
      plan.limit = *rule->rateLimit;
      plan.shadowMode = rule->shadowMode;
      if (plan.limit.unlimited) {
        plan.kind = RlsPlan::Kind::kUnlimited;
        continue;
      }
    }
    if (plan.limit.requestsPerUnit == 0) {
      plan.kind = RlsPlan::Kind::kBlocked;
      continue;
    }
    LimiterSpec spec;
    spec.kind = LimiterKind::kFixedWindow;
    spec.capacity = plan.limit.requestsPerUnit;
    spec.period = rlsUnitNanos(plan.limit.unit);
    auto limiter = limiterRequest(spec, plan.hits);
    if (!limiter) return refuse(at + ": " + limiter.error().message());
    plan.kind = RlsPlan::Kind::kLimit;
    plan.key = key + "#" + rlsUnitName(plan.limit.unit);
    plan.request = std::move(limiter).value();
  }
  return plans;
}

}  // namespace ingrid
