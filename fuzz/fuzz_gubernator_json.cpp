// fuzz_gubernator_json: the HTTP gateway's request mapping (cluster/http_gateway/
// gubernator_json.h) on any body, as POST /v1/GetRateLimits receives it. Properties: a refused
// body is refused with "path: reason"; an accepted one has at most kMaxGubernatorRequests
// requests, each either refused with an error and nothing to run, or mapped onto a token bucket
// or a leaky meter with valid parameters, a quantity of at least 1 and the key name "_"
// unique_key; the response built from answers to them is JSON with one response per request.
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cluster/http_gateway/gubernator_json.h"

#include "fuzz_support.h"

namespace ingrid::fuzz {
namespace {

[[noreturn]] void fail(const std::string& what) { fuzzFail("fuzz_gubernator_json", what); }

GubernatorAnswer answerTo(const GubernatorItem& item) {
  if (!item.request) return gubernatorRefusal(item);
  if (const auto* tb = std::get_if<TokenBucketAcquire>(&*item.request)) {
    if (tb->bucket.invalidReason() || tb->tokens < 1) fail("an invalid token bucket request");
    // Granted with what is left, and denied forever: both ends of the arithmetic.
    gubernatorAnswer(item, Result<AcquireAnswer>(AcquireAnswer{false, 0, kNever}));
    return gubernatorAnswer(item, Result<AcquireAnswer>(AcquireAnswer{true, item.limit / 2, 0}));
  }
  if (const auto* leaky = std::get_if<LeakyMeterAcquire>(&*item.request)) {
    if (leaky->params.invalidReason() || leaky->quantity < 1) fail("an invalid leaky request");
    return gubernatorAnswer(item,
                            Result<LimitAnswer>(LimitAnswer{false, item.limit, 0, kNever, kNever}));
  }
  fail("a request that is neither a token bucket nor a leaky meter");
}

}  // namespace
}  // namespace ingrid::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = parseGetRateLimits(body);
  if (const auto* refusal = std::get_if<std::string>(&parsed)) {
    if (refusal->find(": ") == std::string::npos)
      fuzz::fuzzFail("fuzz_gubernator_json", "a refusal without 'path: reason'");
    return 0;
  }
  const auto& items = std::get<std::vector<GubernatorItem>>(parsed);
  if (items.size() > kMaxGubernatorRequests)
    fuzz::fuzzFail("fuzz_gubernator_json", "more requests than the limit");
  std::vector<GubernatorAnswer> answers;
  for (const GubernatorItem& item : items) {
    if (item.request.has_value() == !item.error.empty()) {
      fuzz::fuzzFail("fuzz_gubernator_json", "a request both refused and run, or neither");
    }
    if (item.key != item.name + "_" + item.uniqueKey)
      fuzz::fuzzFail("fuzz_gubernator_json", "a key that is not name_unique_key");
    answers.push_back(fuzz::answerTo(item));
  }
  const std::string response = getRateLimitsResponse(answers, 1'790'000'000'000);
  rapidjson::Document doc;
  doc.Parse(response.data(), response.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("responses") ||
      !doc["responses"].IsArray() || doc["responses"].Size() != answers.size()) {
    fuzz::fuzzFail("fuzz_gubernator_json", "a response that is not one JSON response per request");
  }
  return 0;
}
