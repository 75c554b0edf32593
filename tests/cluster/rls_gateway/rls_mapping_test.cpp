#include "cluster/rls_gateway/rls_mapping.h"

#include <catch2/catch.hpp>

#include <string>

using namespace ingrid;
namespace rls = envoy::service::ratelimit::v3;

namespace {

RlsConfigPtr config() {
  auto c = parseRlsConfig(R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 7, name: per_tenant}
    descriptors:
      - key: path
        value: /login
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    value: vip
    rate_limit: {unlimited: true}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 0}
)",
                          "edge.yaml");
  REQUIRE(c);
  return c.value();
}

rls::RateLimitRequest request(const std::string& domain,
                              std::initializer_list<std::pair<const char*, const char*>> entries) {
  rls::RateLimitRequest r;
  r.set_domain(domain);
  auto* d = r.add_descriptors();
  for (const auto& [k, v] : entries) {
    auto* e = d->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  return r;
}

std::string refusal(const rls::RateLimitRequest& r) {
  auto plans = planRateLimit(r, *config());
  REQUIRE_FALSE(plans);
  CHECK(plans.error() == Errc::invalid_argument);
  return plans.error().message();
}

}  // namespace

TEST_CASE("RLS mapping: each descriptor becomes a fixed window on its own key, or no bucket",
          "[rls_gateway]") {
  const RlsConfigPtr c = config();
  rls::RateLimitRequest r = request("edge", {{"tenant", "acme"}});
  {
    auto* d = r.add_descriptors();
    auto* e = d->add_entries();
    e->set_key("tenant");
    e->set_value("acme");
    e = d->add_entries();
    e->set_key("path");
    e->set_value("/login");
    d->mutable_hits_addend()->set_value(0);  // taken as 1 (not envoyproxy/ratelimit's check)
  }
  r.add_descriptors()->add_entries()->set_key("tenant");
  r.mutable_descriptors(2)->mutable_entries(0)->set_value("vip");
  r.add_descriptors()->add_entries()->set_key("nobody");
  r.add_descriptors()->add_entries()->set_key("closed");
  r.set_hits_addend(3);
  auto plans = planRateLimit(r, *c);
  REQUIRE(plans);
  REQUIRE(plans->size() == 5);

  const RlsPlan& tenant = (*plans)[0];
  CHECK(tenant.kind == RlsPlan::Kind::kLimit);
  CHECK(tenant.key == "rls|edge|tenant=acme#minute");
  CHECK(tenant.hits == 3);  // the request's hits_addend
  CHECK(tenant.limit.name == "per_tenant");
  const auto& acquire = std::get<FixedWindowAcquire>(*tenant.request);
  CHECK(acquire.params == WindowParams{7, 60'000'000'000});
  CHECK(acquire.quantity == 3);

  const RlsPlan& login = (*plans)[1];
  CHECK(login.kind == RlsPlan::Kind::kLimit);
  CHECK(login.key == "rls|edge|tenant=acme|path=/login#second");
  CHECK(login.shadowMode);
  CHECK(login.hits == 1);  // its own hits_addend 0: ingrid takes 1 (see the test below)

  CHECK((*plans)[2].kind == RlsPlan::Kind::kUnlimited);
  CHECK((*plans)[3].kind == RlsPlan::Kind::kNoRule);
  CHECK((*plans)[4].kind == RlsPlan::Kind::kBlocked);

  // Another domain: no rule for anything.
  auto other = planRateLimit(request("elsewhere", {{"tenant", "acme"}}), *c);
  REQUIRE(other);
  CHECK((*other)[0].kind == RlsPlan::Kind::kNoRule);
}

TEST_CASE("RLS mapping: keys are escaped so that distinct entries never share a bucket",
          "[rls_gateway]") {
  const RlsConfigPtr c = config();
  auto a = planRateLimit(request("edge", {{"tenant", "a|tenant=b"}}), *c);
  auto b = planRateLimit(request("edge", {{"tenant", "a"}, {"tenant", "b"}}), *c);
  REQUIRE(a);
  REQUIRE(b);
  CHECK((*a)[0].key == "rls|edge|tenant=a%7Ctenant%3Db#minute");
  CHECK(rlsEscape("%#= \n\xff") == "%25%23%3D%20%0A%FF");
}

TEST_CASE("RLS mapping: requests past a bound are refused naming it", "[rls_gateway]") {
  CHECK(refusal(request("", {{"tenant", "a"}})).find("domain is empty") != std::string::npos);
  CHECK(refusal(request(std::string(RlsRequestBounds::kMaxDomainBytes + 1, 'd'), {{"a", "b"}}))
            .find("kMaxDomainBytes") != std::string::npos);
  rls::RateLimitRequest none;
  none.set_domain("edge");
  CHECK(refusal(none).find("descriptors is empty") != std::string::npos);
  rls::RateLimitRequest many = request("edge", {{"a", "b"}});
  for (std::size_t i = 0; i < RlsRequestBounds::kMaxDescriptors; ++i) {
    many.add_descriptors()->add_entries()->set_key("a");
  }
  CHECK(refusal(many).find("kMaxDescriptors") != std::string::npos);
  rls::RateLimitRequest deep = request("edge", {});
  for (std::size_t i = 0; i <= RlsRequestBounds::kMaxEntries; ++i) {
    deep.mutable_descriptors(0)->add_entries()->set_key("a");
  }
  CHECK(refusal(deep).find("kMaxEntries") != std::string::npos);
  CHECK(refusal(request("edge", {})).find("descriptors[0].entries is empty") != std::string::npos);
  CHECK(refusal(request("edge", {{"", "x"}})).find("descriptors[0].entries[0].key is empty") !=
        std::string::npos);
  const std::string longKey(RlsRequestBounds::kMaxKeyBytes + 1, 'k');
  CHECK(refusal(request("edge", {{longKey.c_str(), "x"}})).find("kMaxKeyBytes") !=
        std::string::npos);
  rls::RateLimitRequest hits = request("edge", {{"tenant", "a"}});
  hits.set_hits_addend(static_cast<std::uint32_t>(RlsRequestBounds::kMaxHitsAddend + 1));
  CHECK(refusal(hits).find("kMaxHitsAddend") != std::string::npos);
  hits.set_hits_addend(0);
  hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(RlsRequestBounds::kMaxHitsAddend +
                                                                1);
  CHECK(refusal(hits).find("descriptors[0].hits_addend") != std::string::npos);
}

TEST_CASE("RLS mapping: a value past kMaxValueBytes is served on key-only rules, keyed by its hash",
          "[rls_gateway]") {
  const RlsConfigPtr c = config();
  const std::string longA(RlsRequestBounds::kMaxValueBytes + 1, 'a');
  std::string longB = longA;
  longB.back() = 'b';
  const std::string atBound(RlsRequestBounds::kMaxValueBytes, 'a');
  auto a = planRateLimit(request("edge", {{"tenant", longA.c_str()}}), *c);
  auto again = planRateLimit(request("edge", {{"tenant", longA.c_str()}}), *c);
  auto b = planRateLimit(request("edge", {{"tenant", longB.c_str()}}), *c);
  auto literal = planRateLimit(request("edge", {{"tenant", atBound.c_str()}}), *c);
  REQUIRE(a);
  REQUIRE(again);
  REQUIRE(b);
  REQUIRE(literal);
  // The key-only tenant rule limits it, on a key holding the hash, not the value.
  const RlsPlan& plan = (*a)[0];
  CHECK(plan.kind == RlsPlan::Kind::kLimit);
  CHECK(plan.limit.name == "per_tenant");
  const std::string prefix = "rls|edge|tenant=#xxh3-";
  REQUIRE(plan.key.size() == prefix.size() + 32 + std::string("#minute").size());
  CHECK(plan.key.rfind(prefix, 0) == 0);
  CHECK(plan.key.substr(prefix.size() + 32) == "#minute");
  CHECK(plan.key.substr(prefix.size(), 32).find_first_not_of("0123456789abcdef") ==
        std::string::npos);
  CHECK((*again)[0].key == plan.key);  // the same value, the same counter
  CHECK((*b)[0].key != plan.key);      // another value, another counter
  // At the bound, the value itself; no literal value escapes to "#..." (it holds '#' as %23).
  CHECK((*literal)[0].key == "rls|edge|tenant=" + atBound + "#minute");
  CHECK(rlsEscape("#xxh3-0") == "%23xxh3-0");
  // Nested: a long path after tenant=acme matches no key+value rule (no configured value is
  // that long), and there is no key-only path rule: no rule.
  auto nested = planRateLimit(request("edge", {{"tenant", "acme"}, {"path", longA.c_str()}}), *c);
  REQUIRE(nested);
  CHECK((*nested)[0].kind == RlsPlan::Kind::kNoRule);
}

TEST_CASE(
    "RLS mapping: a descriptor's explicit hits_addend 0 takes 1, where envoyproxy/ratelimit "
    "only checks",
    "[rls_gateway]") {
  // envoyproxy/ratelimit counts nothing for a descriptor's explicit 0 (a check); ingrid's fixed
  // window has no read without a take, so the mapping takes 1, as for the request's 0 (unset).
  rls::RateLimitRequest r = request("edge", {{"tenant", "acme"}});
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  r.set_hits_addend(5);
  auto plans = planRateLimit(r, *config());
  REQUIRE(plans);
  CHECK((*plans)[0].hits == 1);  // not the request's 5: the descriptor's field is set
  CHECK(std::get<FixedWindowAcquire>(*(*plans)[0].request).quantity == 1);
  r.clear_hits_addend();
  r.mutable_descriptors(0)->clear_hits_addend();
  plans = planRateLimit(r, *config());
  REQUIRE(plans);
  CHECK((*plans)[0].hits == 1);  // the request's 0 (unset) means 1, as in envoyproxy/ratelimit
}
