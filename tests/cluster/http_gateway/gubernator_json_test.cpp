#include "cluster/http_gateway/gubernator_json.h"

#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

using namespace ingrid;

namespace {

std::vector<GubernatorItem> items(const std::string& body) {
  auto parsed = parseGetRateLimits(body);
  INFO(body);
  REQUIRE(std::holds_alternative<std::vector<GubernatorItem>>(parsed));
  return std::get<std::vector<GubernatorItem>>(parsed);
}

std::string refusal(const std::string& body) {
  auto parsed = parseGetRateLimits(body);
  INFO(body);
  REQUIRE(std::holds_alternative<std::string>(parsed));
  return std::get<std::string>(parsed);
}

}  // namespace

TEST_CASE("gubernator JSON: requests map onto the token bucket and the leaky meter",
          "[http_gateway]") {
  const auto list = items(
      R"({"requests":[{"name":"n","unique_key":"k","hits":2,"limit":"10","duration":60000},)"
      R"({"name":"n","uniqueKey":"k2","hits":"0","limit":5,"duration":1000,"algorithm":"LEAKY_BUCKET","burst":8,"behavior":"GLOBAL"}]})");
  REQUIRE(list.size() == 2);
  CHECK(list[0].key == "n_k");
  CHECK(list[0].error.empty());
  REQUIRE(list[0].request);
  const auto* tb = std::get_if<TokenBucketAcquire>(&*list[0].request);
  REQUIRE(tb != nullptr);
  CHECK(tb->bucket == BucketParams::perPeriod(10, 60'000'000'000));
  CHECK(tb->tokens == 2);
  // hits 0 reads: more than the burst, which takes nothing.
  CHECK(list[1].peek);
  const auto* leaky = std::get_if<LeakyMeterAcquire>(&*list[1].request);
  REQUIRE(leaky != nullptr);
  CHECK(leaky->params == LeakyMeterParams{8, 5, 1'000'000'000});
  CHECK(leaky->quantity == 9);
}

TEST_CASE("gubernator JSON: a bad body is refused naming the field and the reason",
          "[http_gateway]") {
  CHECK(refusal("{").find("body: not JSON: ") == 0);
  CHECK(refusal("[]") == "body: must be a JSON object");
  CHECK(refusal("{}") == "requests: missing");
  CHECK(refusal(R"({"requests":{}})") == "requests: must be an array");
  CHECK(refusal(R"({"requests":[],"x":1})") == "body: unknown field 'x'");
  CHECK(refusal(R"({"requests":[1]})") == "requests[0]: must be an object");
  CHECK(refusal(R"({"requests":[{"name":"n","hits":"1x"}]})") ==
        "requests[0].hits: must be a whole number (int64), got the string '1x'");
  CHECK(refusal(R"({"requests":[{"name":7}]})") == "requests[0].name: must be a string");
  CHECK(refusal(R"({"requests":[{"algorithm":"SLIDING"}]})") ==
        "requests[0].algorithm: unknown name 'SLIDING' (known: TOKEN_BUCKET, LEAKY_BUCKET)");
  CHECK(refusal(R"({"requests":[{"nmae":"n"}]})") == "requests[0]: unknown field 'nmae'");
  CHECK(refusal(R"({"requests":[{"hits":1.5}]})") ==
        "requests[0].hits: must be a whole number (int64)");
  // Deep nesting is read without recursion, then refused for its type.
  CHECK(refusal(R"({"requests":[)" + std::string(100000, '[') + std::string(100000, ']') + "]}") ==
        "requests[0]: must be an object");
}

TEST_CASE("gubernator JSON: requests that cannot run carry their error", "[http_gateway]") {
  const auto list =
      items(R"({"requests":[{"unique_key":"k","limit":1,"duration":1},)"
            R"({"name":"n","unique_key":"k","limit":0,"duration":1},)"
            R"({"name":"n","unique_key":"k","limit":1,"duration":1,"behavior":4},)"
            R"({"name":"n","unique_key":"k","limit":1,"duration":1,"behavior":"DRAIN_OVER_LIMIT"},)"
            R"({"name":"n","unique_key":"k","limit":1,"duration":1,"behavior":64},)"
            R"({"name":"n","unique_key":"k","limit":1,"duration":1,"hits":-1}]})");
  REQUIRE(list.size() == 6);
  CHECK(list[0].error == "field 'name' cannot be empty");
  CHECK(list[1].error == "field 'limit' must be in [1, 1000000000], got 0");
  CHECK(list[2].error ==
        "behavior DURATION_IS_GREGORIAN (calendar durations) is not supported by ingrid");
  CHECK(list[3].error ==
        "behavior DRAIN_OVER_LIMIT (an over-limit request takes nothing) is not supported by "
        "ingrid");
  CHECK(list[4].error == "behavior 64 has unknown flags");
  CHECK(list[5].error == "field 'hits' must be in [0, 1000000000], got -1");
  for (const auto& item : list) CHECK(!item.request);
}

TEST_CASE("gubernator JSON: answers and the response body", "[http_gateway]") {
  const auto list =
      items(R"({"requests":[{"name":"n","unique_key":"k","hits":1,"limit":4,"duration":4000}]})");
  // Granted with 3 left: full again after 1 s (4 per 4 s).
  const GubernatorAnswer under =
      gubernatorAnswer(list[0], Result<AcquireAnswer>(AcquireAnswer{true, 3, 0}));
  CHECK(!under.over);
  CHECK(under.resetAfter == 1'000'000'000);
  // Denied: reset_time is when this request would be granted.
  const GubernatorAnswer over =
      gubernatorAnswer(list[0], Result<AcquireAnswer>(AcquireAnswer{false, 0, 250'000'000}));
  CHECK(over.over);
  CHECK(over.resetAfter == 250'000'000);
  const GubernatorAnswer failed = gubernatorAnswer(
      list[0], Result<AcquireAnswer>(Error(Errc::unavailable, "partition 3 has no owner")));
  CHECK(
      getRateLimitsResponse({under, over, failed}, 1000) ==
      R"({"responses":[{"status":"UNDER_LIMIT","limit":"4","remaining":"3","reset_time":"2000","error":"","metadata":{}},)"
      R"({"status":"OVER_LIMIT","limit":"4","remaining":"0","reset_time":"1250","error":"","metadata":{}},)"
      R"({"status":"UNDER_LIMIT","limit":"4","remaining":"0","reset_time":"0","error":")" +
          failed.error + R"(","metadata":{}}]})");
  CHECK(failed.error.find("unavailable: ") == 0);
}
