#include "cluster/rls_gateway/rls_config.h"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace ingrid;

namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

RlsConfigPtr parsed(const std::string& yaml) {
  auto c = parseRlsConfig(yaml, "test.yaml");
  INFO((c ? "" : c.error().message()));
  REQUIRE(c);
  return c.value();
}

// The refusal's message for `yaml`.
std::string refusal(const std::string& yaml) {
  auto c = parseRlsConfig(yaml, "test.yaml");
  REQUIRE_FALSE(c);
  return c.error().message();
}

// envoyproxy/ratelimit's README example shape: nested descriptors, a key-only default beside a
// key+value rule, shadow_mode, unlimited.
const char* kConfig = R"(domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
    shadow_mode: true
  - key: remote_address
    rate_limit:
      unit: MINUTE
      requests_per_unit: 10
      name: per_ip
    detailed_metric: true
  - key: remote_address
    value: 10.0.0.1
    rate_limit:
      unlimited: true
  - key: to_number
    descriptors:
      - key: from_number
        rate_limit: {unit: day, requests_per_unit: 10}
      - key: from_number
        value: "+1555"
        rate_limit: {unit: hour, requests_per_unit: 0}
)";

}  // namespace

TEST_CASE("RLS config: key+value rules match before key-only ones, nesting follows the entries",
          "[rls_gateway]") {
  const RlsConfigPtr c = parsed(kConfig);
  CHECK(c->domain == "mongo_cps");
  CHECK(c->ruleCount == 7);

  const RlsRule* users = c->match(Entries{{"database", "users"}});
  REQUIRE(users != nullptr);
  CHECK(users->rateLimit->requestsPerUnit == 500);
  CHECK(users->rateLimit->unit == RlsUnit::kSecond);
  CHECK_FALSE(users->shadowMode);
  CHECK(c->match(Entries{{"database", "default"}})->shadowMode);
  CHECK(c->match(Entries{{"database", "other"}}) == nullptr);  // no key-only default

  const RlsRule* ip = c->match(Entries{{"remote_address", "10.1.2.3"}});
  REQUIRE(ip != nullptr);
  CHECK(ip->rateLimit->requestsPerUnit == 10);
  CHECK(ip->rateLimit->unit == RlsUnit::kMinute);  // units are case-insensitive
  CHECK(ip->rateLimit->name == "per_ip");
  const RlsRule* special = c->match(Entries{{"remote_address", "10.0.0.1"}});
  REQUIRE(special != nullptr);
  CHECK(special->rateLimit->unlimited);

  // Nesting: the last entry's rule limits; an intermediate rule without rate_limit does not.
  CHECK(c->match(Entries{{"to_number", "2"}}) == nullptr);
  const RlsRule* from = c->match(Entries{{"to_number", "2"}, {"from_number", "3"}});
  REQUIRE(from != nullptr);
  CHECK(from->rateLimit->unit == RlsUnit::kDay);
  const RlsRule* blocked = c->match(Entries{{"to_number", "2"}, {"from_number", "+1555"}});
  REQUIRE(blocked != nullptr);
  CHECK(blocked->rateLimit->requestsPerUnit == 0);
  // More entries than levels: no rule; entries in another order: no rule.
  CHECK(c->match(Entries{{"to_number", "2"}, {"from_number", "3"}, {"x", "y"}}) == nullptr);
  CHECK(c->match(Entries{{"from_number", "3"}, {"to_number", "2"}}) == nullptr);
  CHECK(c->match(Entries{{"database", "users"}, {"x", "y"}}) == nullptr);
}

TEST_CASE("RLS config: a bad file is refused naming the line and the reason", "[rls_gateway]") {
  CHECK(refusal("descriptors: []\n").find("domain is missing") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: week, "
                "requests_per_unit: 1}\n")
            .find("test.yaml:4: rate_limit.unit 'week' is not second, minute, hour or day") !=
        std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    ratelimit: {}\n")
            .find("test.yaml:4: unknown field 'ratelimit'") != std::string::npos);
  CHECK(
      refusal("domain: d\ndescriptors:\n  - value: a\n").find("test.yaml:3: a descriptor's key") !=
      std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n  - key: a\n")
            .find("test.yaml:4: duplicate descriptor 'a'") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
                "requests_per_unit: -1}\n")
            .find("requests_per_unit '-1'") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: "
                "second}\n")
            .find("must not be set when unlimited") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n"
                "      requests_per_unit: 1\n      replaces: [{name: x}]\n")
            .find("test.yaml:7: rate_limit.replaces is not served") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors: [\n").find("test.yaml:") != std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n")
            .find("shadow_mode must be true or false") != std::string::npos);
  // Nesting past the bound.
  std::string deep = "domain: d\ndescriptors:\n";
  std::string indent = "  ";
  for (std::size_t i = 0; i <= RlsConfigBounds::kMaxDepth; ++i) {
    deep += indent + "- key: k\n" + indent + "  descriptors:\n";
    indent += "    ";
  }
  deep += indent + "- key: last\n";
  CHECK(refusal(deep).find("kMaxDepth") != std::string::npos);
  // Strings past their bounds, named with their line; an alias repeats its anchor's string, and
  // is refused where it is used.
  const std::string longKey(RlsConfigBounds::kMaxKeyBytes + 1, 'k');
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n  - key: " + longKey + "\n")
            .find("test.yaml:4: key is longer than 256 bytes (RlsConfigBounds::kMaxKeyBytes)") !=
        std::string::npos);
  CHECK(
      refusal("domain: d\ndescriptors:\n  - key: a\n    value: " +
              std::string(RlsConfigBounds::kMaxValueBytes + 1, 'v') + "\n")
          .find("test.yaml:4: value is longer than 1024 bytes (RlsConfigBounds::kMaxValueBytes)") !=
      std::string::npos);
  CHECK(refusal("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n"
                "      requests_per_unit: 1\n      name: " +
                std::string(RlsConfigBounds::kMaxNameBytes + 1, 'n') + "\n")
            .find("test.yaml:7: rate_limit.name is longer than 256 bytes "
                  "(RlsConfigBounds::kMaxNameBytes)") != std::string::npos);
  CHECK(refusal("domain: &long " + longKey +
                "\ndescriptors:\n  - key: a\n    descriptors:\n      - key: *long\n")
            .find("kMaxKeyBytes") != std::string::npos);
  // At the bounds: served.
  const std::string atKey(RlsConfigBounds::kMaxKeyBytes, 'k');
  const std::string atValue(RlsConfigBounds::kMaxValueBytes, 'v');
  const RlsConfigPtr at =
      parsed("domain: d\ndescriptors:\n  - key: " + atKey + "\n    value: " + atValue +
             "\n    rate_limit: {unit: second, requests_per_unit: 1, "
             "name: " +
             std::string(RlsConfigBounds::kMaxNameBytes, 'n') + "}\n");
  CHECK(at->match(Entries{{atKey, atValue}}) != nullptr);
  // A file that is not there.
  auto missing = loadRlsConfig("/nonexistent/rls.yaml");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message().find("/nonexistent/rls.yaml: cannot open it") !=
        std::string::npos);
}
