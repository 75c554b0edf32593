#include "cluster/http_gateway/gubernator_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <limits>

#include <ingrid/ratelimit_headers.h>

namespace ingrid {
namespace {

using Value = rapidjson::Value;

// A refusal of the whole body (400): "path: reason".
struct Refusal {
  std::string message;
};

std::string quoted(std::string_view s) { return "'" + std::string(s.substr(0, 64)) + "'"; }

// An int64 field: a JSON integer, or a decimal string as protobuf's JSON mapping allows.
std::int64_t int64Of(const Value& v, const std::string& path) {
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsString()) {
    const std::string_view s(v.GetString(), v.GetStringLength());
    std::int64_t out = 0;
    const auto [at, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (!s.empty() && ec == std::errc() && at == s.data() + s.size()) return out;
    throw Refusal{path + ": must be a whole number (int64), got the string " + quoted(s)};
  }
  throw Refusal{path + ": must be a whole number (int64)"};
}

std::string stringOf(const Value& v, const std::string& path) {
  if (!v.IsString()) throw Refusal{path + ": must be a string"};
  if (v.GetStringLength() > kMaxGubernatorKeyBytes) {
    throw Refusal{path + ": longer than " + std::to_string(kMaxGubernatorKeyBytes) + " bytes"};
  }
  return std::string(v.GetString(), v.GetStringLength());
}

// An enum field: its number, or its name among `names` (index = value).
std::int64_t enumOf(const Value& v, const std::string& path,
                    std::initializer_list<std::pair<std::string_view, std::int64_t>> names) {
  if (v.IsString()) {
    const std::string_view s(v.GetString(), v.GetStringLength());
    for (const auto& [name, value] : names) {
      if (s == name) return value;
    }
    std::string known;
    for (const auto& [name, value] : names)
      known += (known.empty() ? "" : ", ") + std::string(name);
    throw Refusal{path + ": unknown name " + quoted(s) + " (known: " + known + ")"};
  }
  return int64Of(v, path);
}

// Why `item`'s values cannot run, or empty.
std::string itemError(const GubernatorItem& item, std::int64_t behavior) {
  if (item.name.empty()) return "field 'name' cannot be empty";
  if (item.uniqueKey.empty()) return "field 'unique_key' cannot be empty";
  const auto range = [](const char* field, std::int64_t v, std::int64_t min, std::int64_t max) {
    return v < min || v > max
               ? std::string("field '") + field + "' must be in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got " + std::to_string(v)
               : std::string();
  };
  std::string e = range("hits", item.hits, 0, kMaxGubernatorLimit);
  if (e.empty()) e = range("limit", item.limit, 1, kMaxGubernatorLimit);
  if (e.empty()) e = range("duration", item.durationMs, 1, kMaxGubernatorDurationMs);
  if (e.empty()) e = range("burst", item.burst, 0, kMaxGubernatorLimit);
  if (e.empty()) e = range("algorithm", item.algorithm, 0, 1);
  if (!e.empty()) return e;
  const std::pair<std::int64_t, const char*> refused[] = {
      {kDurationIsGregorian, "DURATION_IS_GREGORIAN (calendar durations)"},
      {kResetRemaining, "RESET_REMAINING (no reset operation)"},
      {kMultiRegion, "MULTI_REGION (one cluster, no regions)"},
      {kDrainOverLimit, "DRAIN_OVER_LIMIT (an over-limit request takes nothing)"},
  };
  for (const auto& [flag, what] : refused) {
    if ((behavior & flag) != 0)
      return std::string("behavior ") + what + " is not supported by ingrid";
  }
  constexpr std::int64_t kKnown = kNoBatching | kGlobal | kDurationIsGregorian | kResetRemaining |
                                  kMultiRegion | kDrainOverLimit;
  if (behavior < 0 || (behavior & ~kKnown) != 0) {
    return "behavior " + std::to_string(behavior) + " has unknown flags";
  }
  return {};
}

GubernatorItem itemOf(const Value& r, const std::string& path) {
  if (!r.IsObject()) throw Refusal{path + ": must be an object"};
  GubernatorItem item;
  std::int64_t behavior = 0;
  // By index: rapidjson 1.1's iterator comparisons are ambiguous in C++20.
  for (rapidjson::SizeType i = 0; i < r.MemberCount(); ++i) {
    const auto m = r.MemberBegin() + i;
    const std::string_view name(m->name.GetString(), m->name.GetStringLength());
    const std::string at = path + "." + std::string(name.substr(0, 64));
    const Value& v = m->value;
    if (name == "name") {
      item.name = stringOf(v, at);
    } else if (name == "unique_key" || name == "uniqueKey") {
      item.uniqueKey = stringOf(v, at);
    } else if (name == "hits") {
      item.hits = int64Of(v, at);
    } else if (name == "limit") {
      item.limit = int64Of(v, at);
    } else if (name == "duration") {
      item.durationMs = int64Of(v, at);
    } else if (name == "burst") {
      item.burst = int64Of(v, at);
    } else if (name == "algorithm") {
      item.algorithm = enumOf(v, at, {{"TOKEN_BUCKET", 0}, {"LEAKY_BUCKET", 1}});
    } else if (name == "behavior") {
      behavior = enumOf(v, at,
                        {{"BATCHING", 0},
                         {"NO_BATCHING", kNoBatching},
                         {"GLOBAL", kGlobal},
                         {"DURATION_IS_GREGORIAN", kDurationIsGregorian},
                         {"RESET_REMAINING", kResetRemaining},
                         {"MULTI_REGION", kMultiRegion},
                         {"DRAIN_OVER_LIMIT", kDrainOverLimit}});
    } else if (name == "created_at" || name == "createdAt") {
      int64Of(v, at);  // read and checked; ingrid's own clock decides
    } else if (name == "metadata") {
      if (!v.IsObject()) throw Refusal{at + ": must be an object"};
    } else {
      throw Refusal{path + ": unknown field " + quoted(name)};
    }
  }
  item.key = item.name + "_" + item.uniqueKey;
  item.error = itemError(item, behavior);
  if (!item.error.empty()) return item;
  LimiterSpec spec;
  spec.capacity = item.limit;
  spec.period = item.durationMs * 1'000'000;
  std::int64_t capacity = item.limit;
  if (item.algorithm == 1) {
    spec.kind = LimiterKind::kLeakyMeter;
    capacity = spec.capacity = item.burst > 0 ? item.burst : item.limit;
    spec.refill = item.limit;
  }
  item.peek = item.hits == 0;
  auto request = limiterRequest(spec, item.peek ? capacity + 1 : item.hits);
  if (!request) {
    item.error = request.error().detail();
  } else {
    item.request = std::move(*request);
  }
  return item;
}

Nanos orWhenFull(Nanos wait, Nanos untilWhole) { return wait == kNever ? untilWhole : wait; }

}  // namespace

std::variant<std::vector<GubernatorItem>, std::string> parseGetRateLimits(std::string_view body) {
  rapidjson::Document doc;
  // Iterative: no recursion however deep the input nests.
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError()) {
    return std::string("body: not JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()) +
           " at byte " + std::to_string(doc.GetErrorOffset());
  }
  try {
    if (!doc.IsObject()) throw Refusal{"body: must be a JSON object"};
    if (!doc.HasMember("requests")) throw Refusal{"requests: missing"};
    const Value& requests = doc["requests"];
    for (rapidjson::SizeType i = 0; i < doc.MemberCount(); ++i) {
      const auto m = doc.MemberBegin() + i;
      const std::string_view name(m->name.GetString(), m->name.GetStringLength());
      if (name != "requests") throw Refusal{"body: unknown field " + quoted(name)};
    }
    if (!requests.IsArray()) throw Refusal{"requests: must be an array"};
    const auto list = requests.GetArray();
    if (list.Size() > kMaxGubernatorRequests) {
      throw Refusal{"requests: at most " + std::to_string(kMaxGubernatorRequests) +
                    " in one call, got " + std::to_string(list.Size())};
    }
    std::vector<GubernatorItem> items;
    items.reserve(list.Size());
    for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
      items.push_back(itemOf(list[i], "requests[" + std::to_string(i) + "]"));
    }
    return items;
  } catch (const Refusal& r) {
    return r.message;
  }
}

GubernatorAnswer gubernatorAnswer(const GubernatorItem& item, const Result<AcquireAnswer>& r) {
  GubernatorAnswer a;
  a.limit = item.limit;
  if (!r) {
    a.error = std::string(errcName(r.error().code().value())) + ": " + r.error().message();
    return a;
  }
  a.remaining = r->remaining;
  const Nanos whole = untilFull(item.limit, item.durationMs * 1'000'000, r->remaining);
  a.over = item.peek ? r->remaining == 0 : !r->granted;
  a.resetAfter = a.over && !item.peek ? orWhenFull(r->waitNanos, whole) : whole;
  return a;
}

GubernatorAnswer gubernatorAnswer(const GubernatorItem& item, const Result<LimitAnswer>& r) {
  GubernatorAnswer a;
  a.limit = item.limit;
  if (!r) {
    a.error = std::string(errcName(r.error().code().value())) + ": " + r.error().message();
    return a;
  }
  a.remaining = r->remaining;
  a.over = item.peek ? r->remaining == 0 : !r->granted;
  a.resetAfter = a.over && !item.peek ? orWhenFull(r->retryAfter, r->resetAfter) : r->resetAfter;
  return a;
}

GubernatorAnswer gubernatorRefusal(const GubernatorItem& item) {
  GubernatorAnswer a;
  a.limit = item.limit;
  a.error = item.error;
  return a;
}

std::string getRateLimitsResponse(const std::vector<GubernatorAnswer>& answers,
                                  std::int64_t nowMs) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  const auto field = [&w](const char* name, const std::string& value) {
    w.Key(name);
    w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  };
  w.StartObject();
  w.Key("responses");
  w.StartArray();
  for (const GubernatorAnswer& a : answers) {
    w.StartObject();
    field("status", a.over ? "OVER_LIMIT" : "UNDER_LIMIT");
    field("limit", std::to_string(a.limit));
    field("remaining", std::to_string(a.remaining));
    // Milliseconds, rounded up; saturated far in the future.
    const std::int64_t resetMs = a.resetAfter / 1'000'000 + (a.resetAfter % 1'000'000 != 0);
    const std::int64_t at = a.error.empty()
                                ? (resetMs > std::numeric_limits<std::int64_t>::max() - nowMs
                                       ? std::numeric_limits<std::int64_t>::max()
                                       : nowMs + resetMs)
                                : 0;
    field("reset_time", std::to_string(at));
    field("error", a.error);
    w.Key("metadata");
    w.StartObject();
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(out.GetString(), out.GetSize());
}

}  // namespace ingrid
