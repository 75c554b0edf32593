#include "cluster/rls_gateway/rls_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace ingrid {
namespace {

// A refusal at a node of the file: "SOURCE:LINE: reason".
struct Refusal {
  YAML::Mark mark;
  std::string reason;
};

[[noreturn]] void refuse(const YAML::Node& at, std::string reason) {
  throw Refusal{at.Mark(), std::move(reason)};
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The map's keys must be among `allowed`; `what` names the map in a refusal.
void onlyKeys(const YAML::Node& map, const std::set<std::string>& allowed, const char* what) {
  if (!map.IsMap()) refuse(map, std::string(what) + " must be a map");
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    if (!allowed.count(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      refuse(kv.first, "unknown field '" + k + "' in " + what + " (known: " + list + ")");
    }
  }
}

std::string scalar(const YAML::Node& n, const char* what) {
  if (!n.IsScalar()) refuse(n, std::string(what) + " must be a string");
  return n.as<std::string>();
}

// scalar(), refused past `bound` bytes (`name`: the bound's name in RlsConfigBounds).
std::string boundedScalar(const YAML::Node& n, const char* what, std::size_t bound,
                          const char* name) {
  if (n.IsScalar() && n.Scalar().size() > bound) {
    refuse(n, std::string(what) + " is longer than " + std::to_string(bound) +
                  " bytes (RlsConfigBounds::" + name + ")");
  }
  return scalar(n, what);
}

bool boolean(const YAML::Node& n, const char* what) {
  bool b = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b)) {
    refuse(n, std::string(what) + " must be true or false");
  }
  return b;
}

RlsRateLimit rateLimitOf(const YAML::Node& n) {
  onlyKeys(n, {"requests_per_unit", "unit", "unlimited", "name", "replaces"}, "rate_limit");
  if (n["replaces"]) {
    refuse(n["replaces"], "rate_limit.replaces is not served by ingrid (docs/gateways.md)");
  }
  RlsRateLimit r;
  if (n["name"]) {
    r.name = boundedScalar(n["name"], "rate_limit.name", RlsConfigBounds::kMaxNameBytes,
                           "kMaxNameBytes");
  }
  if (n["unlimited"]) r.unlimited = boolean(n["unlimited"], "rate_limit.unlimited");
  if (r.unlimited) {
    if (n["unit"]) refuse(n["unit"], "rate_limit.unit must not be set when unlimited is true");
    return r;
  }
  if (!n["unit"]) refuse(n, "rate_limit.unit is missing (second, minute, hour or day)");
  const std::string unit = lower(scalar(n["unit"], "rate_limit.unit"));
  if (unit == "second") {
    r.unit = RlsUnit::kSecond;
  } else if (unit == "minute") {
    r.unit = RlsUnit::kMinute;
  } else if (unit == "hour") {
    r.unit = RlsUnit::kHour;
  } else if (unit == "day") {
    r.unit = RlsUnit::kDay;
  } else {
    refuse(n["unit"], "rate_limit.unit '" + unit + "' is not second, minute, hour or day");
  }
  if (!n["requests_per_unit"]) refuse(n, "rate_limit.requests_per_unit is missing");
  const YAML::Node rpu = n["requests_per_unit"];
  const std::string digits = scalar(rpu, "rate_limit.requests_per_unit");
  if (digits.empty() || digits.size() > 10 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoull(digits) > 0xFFFF'FFFFull) {
    refuse(rpu, "rate_limit.requests_per_unit '" + digits + "' is not a whole number in [0, " +
                    "4294967295]");
  }
  r.requestsPerUnit = static_cast<std::uint32_t>(std::stoull(digits));
  return r;
}

void levelOf(const YAML::Node& list, RlsLevel& level, std::size_t depth, std::size_t& rules) {
  if (!list.IsSequence()) refuse(list, "descriptors must be a list");
  if (depth > RlsConfigBounds::kMaxDepth) {
    refuse(list, "descriptors nest deeper than " + std::to_string(RlsConfigBounds::kMaxDepth) +
                     " levels (RlsConfigBounds::kMaxDepth)");
  }
  for (const YAML::Node& d : list) {
    onlyKeys(d, {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric"},
             "a descriptor");
    if (++rules > RlsConfigBounds::kMaxRules) {
      refuse(d, "more than " + std::to_string(RlsConfigBounds::kMaxRules) +
                    " descriptors (RlsConfigBounds::kMaxRules)");
    }
    RlsRule rule;
    if (!d["key"]) refuse(d, "a descriptor's key is missing");
    rule.key = boundedScalar(d["key"], "key", RlsConfigBounds::kMaxKeyBytes, "kMaxKeyBytes");
    if (rule.key.empty()) refuse(d["key"], "a descriptor's key is empty");
    if (d["value"]) {
      rule.value =
          boundedScalar(d["value"], "value", RlsConfigBounds::kMaxValueBytes, "kMaxValueBytes");
    }
    if (d["rate_limit"]) rule.rateLimit = rateLimitOf(d["rate_limit"]);
    if (d["shadow_mode"]) rule.shadowMode = boolean(d["shadow_mode"], "shadow_mode");
    if (d["detailed_metric"]) boolean(d["detailed_metric"], "detailed_metric");  // no effect
    if (d["descriptors"]) levelOf(d["descriptors"], rule.children, depth + 1, rules);
    const std::size_t index = level.rules.size();
    const bool fresh =
        rule.value ? level.byKeyValue.emplace(std::pair(rule.key, *rule.value), index).second
                   : level.byKey.emplace(rule.key, index).second;
    if (!fresh) {
      refuse(d, "duplicate descriptor '" + rule.key + (rule.value ? "_" + *rule.value : "") +
                    "' at this level");
    }
    level.rules.push_back(std::move(rule));
  }
}

}  // namespace

Nanos rlsUnitNanos(RlsUnit unit) noexcept {
  constexpr Nanos kSecond = 1'000'000'000;
  switch (unit) {
    case RlsUnit::kSecond:
      return kSecond;
    case RlsUnit::kMinute:
      return 60 * kSecond;
    case RlsUnit::kHour:
      return 3600 * kSecond;
    case RlsUnit::kDay:
      return 86400 * kSecond;
  }
  return kSecond;
}

const char* rlsUnitName(RlsUnit unit) noexcept {
  switch (unit) {
    case RlsUnit::kSecond:
      return "second";
    case RlsUnit::kMinute:
      return "minute";
    case RlsUnit::kHour:
      return "hour";
    case RlsUnit::kDay:
      return "day";
  }
  return "second";
}

const RlsRule* RlsLevel::find(const std::string& key, const std::string& value) const {
  if (auto it = byKeyValue.find(std::pair(key, value)); it != byKeyValue.end()) {
    return &rules[it->second];
  }
  if (auto it = byKey.find(key); it != byKey.end()) return &rules[it->second];
  return nullptr;
}

const RlsRule* RlsConfig::match(
    const std::vector<std::pair<std::string, std::string>>& entries) const {
  const RlsLevel* level = &root;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const RlsRule* rule = level->find(entries[i].first, entries[i].second);
    if (rule == nullptr) return nullptr;
    if (i + 1 == entries.size()) return rule->rateLimit ? rule : nullptr;
    level = &rule->children;
  }
  return nullptr;
}

Result<RlsConfigPtr> parseRlsConfig(std::string_view yaml, const std::string& source) {
  const auto error = [&source](const YAML::Mark& mark, const std::string& reason) {
    std::string where = source;
    if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1);
    return Error(Errc::invalid_configuration, where + ": " + reason);
  };
  if (yaml.size() > RlsConfigBounds::kMaxFileBytes) {
    return error(YAML::Mark::null_mark(), "larger than " +
                                              std::to_string(RlsConfigBounds::kMaxFileBytes) +
                                              " bytes (RlsConfigBounds::kMaxFileBytes)");
  }
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    if (!doc.IsMap())
      return error(doc.Mark(), "the file must be a map with domain and descriptors");
    onlyKeys(doc, {"domain", "descriptors"}, "the file");
    auto config = std::make_shared<RlsConfig>();
    if (!doc["domain"]) return error(doc.Mark(), "domain is missing");
    config->domain = scalar(doc["domain"], "domain");
    if (config->domain.empty()) return error(doc["domain"].Mark(), "domain is empty");
    if (doc["descriptors"]) levelOf(doc["descriptors"], config->root, 1, config->ruleCount);
    return RlsConfigPtr(std::move(config));
  } catch (const Refusal& r) {
    return error(r.mark, r.reason);
  } catch (const YAML::Exception& e) {
    return error(e.mark, e.msg);
  } catch (const std::exception& e) {
    return error(YAML::Mark::null_mark(), e.what());
  }
}

Result<RlsConfigPtr> loadRlsConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Errc::invalid_configuration, path + ": cannot open it");
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > RlsConfigBounds::kMaxFileBytes) break;
  }
  if (in.bad()) return Error(Errc::invalid_configuration, path + ": cannot read it");
  return parseRlsConfig(text, path);
}

}  // namespace ingrid
