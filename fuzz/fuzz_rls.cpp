// fuzz_rls: the Envoy RLS gateway's hostile inputs (cluster/rls_gateway/): the first byte picks
//  - even: the rest as a RateLimitRequest (ParseFromArray) mapped under a fixed configuration by
//    planRateLimit. Properties: a refusal is invalid_argument; an accepted request has one plan
//    per descriptor, within RlsRequestBounds, and each limited plan is a fixed window with valid
//    parameters, its configured limit, a quantity in [1, kMaxHitsAddend] and a key "rls|...#unit";
//  - odd: the rest as a YAML configuration file (parseRlsConfig). Properties: a refusal is
//    invalid_configuration naming the source; a loaded one has a domain and at most kMaxRules
//    rules, and matching its own rules' entries finds a rule or none without failing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cluster/rls_gateway/rls_mapping.h"

#include "fuzz_support.h"

namespace {

[[noreturn]] void fail(const std::string& what) { ingrid::fuzz::fuzzFail("fuzz_rls", what); }

const ingrid::RlsConfig& fixedConfig() {
  static const ingrid::RlsConfigPtr config = [] {
    auto c = ingrid::parseRlsConfig(R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 7}
    descriptors:
      - key: path
        value: /login
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    value: vip
    rate_limit: {unlimited: true}
  - key: closed
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 4294967295}
)",
                                    "fuzz.yaml");
    if (!c) fail("the fixed configuration does not load: " + c.error().message());
    return c.value();
  }();
  return *config;
}

void mapping(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  envoy::service::ratelimit::v3::RateLimitRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  auto plans = planRateLimit(request, fixedConfig());
  if (!plans) {
    if (!(plans.error() == Errc::invalid_argument)) fail("a refusal that is not invalid_argument");
    return;
  }
  if (plans->size() != static_cast<std::size_t>(request.descriptors_size()) ||
      plans->size() > RlsRequestBounds::kMaxDescriptors || request.domain().empty() ||
      request.domain().size() > RlsRequestBounds::kMaxDomainBytes) {
    fail("an accepted request past a bound, or plans not one per descriptor");
  }
  for (const RlsPlan& plan : *plans) {
    if (plan.hits < 1 || static_cast<std::uint64_t>(plan.hits) > RlsRequestBounds::kMaxHitsAddend)
      fail("hits outside [1, kMaxHitsAddend]");
    if (plan.kind != RlsPlan::Kind::kLimit) {
      if (plan.request) fail("a limiter request for a descriptor no bucket decides");
      continue;
    }
    if (!plan.request) fail("a limited descriptor without a limiter request");
    const auto* acquire = std::get_if<FixedWindowAcquire>(&*plan.request);
    if (acquire == nullptr) fail("a limiter request that is not a fixed window");
    if (acquire->params.invalidReason()) fail("invalid fixed-window parameters");
    if (acquire->params.limit != plan.limit.requestsPerUnit || acquire->quantity != plan.hits ||
        acquire->params.window != rlsUnitNanos(plan.limit.unit)) {
      fail("a fixed window that is not the plan's limit, unit and hits");
    }
    if (plan.key.rfind("rls|", 0) != 0 ||
        plan.key.substr(plan.key.rfind('#')) != std::string("#") + rlsUnitName(plan.limit.unit)) {
      fail("a key that is not rls|...#unit");
    }
  }
}

// Counts the rules under `level`.
void collect(const ingrid::RlsLevel& level, std::size_t& visited) {
  for (const ingrid::RlsRule& rule : level.rules) {
    if (++visited > ingrid::RlsConfigBounds::kMaxRules) fail("more rules than kMaxRules");
    collect(rule.children, visited);
  }
}

void config(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto loaded = parseRlsConfig(text, "fuzz.yaml");
  if (!loaded) {
    if (!(loaded.error() == Errc::invalid_configuration) ||
        loaded.error().message().find("fuzz.yaml") == std::string::npos) {
      fail("a refusal that is not invalid_configuration naming the source");
    }
    return;
  }
  const RlsConfig& c = *loaded.value();
  if (c.domain.empty()) fail("a configuration without a domain");
  std::vector<std::pair<std::string, std::string>> path;
  std::size_t visited = 0;
  collect(c.root, visited);
  if (visited != c.ruleCount) fail("ruleCount is not the number of rules");
  // Match a few paths through it: the first rule's chain, with values as configured.
  const RlsLevel* level = &c.root;
  path.clear();
  for (std::size_t depth = 0; depth <= RlsConfigBounds::kMaxDepth && !level->rules.empty();
       ++depth) {
    const RlsRule& rule = level->rules.front();
    path.emplace_back(rule.key, rule.value.value_or(""));
    const RlsRule* found = c.match(path);
    if (found != nullptr && !found->rateLimit) fail("a match without a rate_limit");
    level = &rule.children;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    mapping(data + 1, size - 1);
  } else {
    config(data + 1, size - 1);
  }
  return 0;
}
