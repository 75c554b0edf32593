#include "cluster/http_gateway/http_gateway.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <ingrid/node.h>

using namespace ingrid;

// The expected answers below follow docs/gateways.md: TOKEN_BUCKET is ingrid's token bucket of
// `limit` tokens refilled at `limit` per `duration`; LEAKY_BUCKET its leaky meter holding `burst`
// (or `limit`), leaking `limit` per `duration`. The durations are an hour, so nothing refills or
// leaks by a whole unit during the test.

namespace {

// Output (stdout and stderr) of a shell command; REQUIREs it to exit 0.
std::string run(const std::string& command) {
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  INFO(command << " printed:\n" << out);
  REQUIRE(status == 0);
  return out;
}

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::int64_t before = 0, after = 0;  // the wall clock around the call, ms

  // The body with every reset_time's digits replaced by "T", and those values in order.
  std::string bodyWithoutTimes(std::vector<std::int64_t>& times) const {
    std::string out = body;
    const std::string tag = "\"reset_time\":\"";
    for (std::size_t at = out.find(tag); at != std::string::npos; at = out.find(tag, at + 1)) {
      const std::size_t start = at + tag.size();
      const std::size_t end = out.find('"', start);
      times.push_back(std::stoll(out.substr(start, end - start)));
      out.replace(start, end - start, "T");
    }
    return out;
  }
};

struct Gateway {
  Node node;
  HttpGateway http{node};
  std::uint16_t port = 0;

  Gateway() {
    REQUIRE(node.start());
    auto p = http.start("127.0.0.1:0");
    INFO((p ? "" : p.error().message()));
    REQUIRE(p);
    port = *p;
  }

  // curl's answer to POST /v1/GetRateLimits with `json` (from a file: no shell quoting).
  Answer post(const std::string& json, const std::string& path = "/v1/GetRateLimits") {
    const std::string file = (std::filesystem::temp_directory_path() /
                              ("ingrid-http-" + std::to_string(::getpid()) + ".json"))
                                 .string();
    std::FILE* f = std::fopen(file.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
    Answer a;
    a.before = nowMs();
    const std::string out = run("curl -sS -i -H 'Content-Type: application/json' --data-binary @" +
                                file + " http://127.0.0.1:" + std::to_string(port) + path);
    a.after = nowMs();
    std::remove(file.c_str());
    return parse(out, a);
  }

  Answer get(const std::string& path) {
    Answer a;
    return parse(run("curl -sS -i http://127.0.0.1:" + std::to_string(port) + path), a);
  }

  static Answer parse(const std::string& out, Answer& a) {
    const std::size_t end = out.find("\r\n\r\n");
    REQUIRE(end != std::string::npos);
    a.status = std::stoi(out.substr(out.find(' ') + 1, 3));
    std::size_t line = out.find("\r\n") + 2;
    while (line < end) {
      const std::size_t next = out.find("\r\n", line);
      const std::string h = out.substr(line, next - line);
      const std::size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      a.headers[name] = h.substr(colon + 2);
      line = next + 2;
    }
    a.body = out.substr(end + 4);
    return a;
  }
};

std::string request(const std::string& key, int hits, int limit, const std::string& extra = "") {
  return R"({"name":"api","unique_key":")" + key + R"(","hits":)" + std::to_string(hits) +
         R"(,"limit":)" + std::to_string(limit) + R"(,"duration":3600000)" + extra + "}";
}

std::string response(const char* status, int limit, int remaining) {
  return std::string(R"({"status":")") + status + R"(","limit":")" + std::to_string(limit) +
         R"(","remaining":")" + std::to_string(remaining) +
         R"(","reset_time":"T","error":"","metadata":{}})";
}

}  // namespace

TEST_CASE("HTTP gateway: curl asks GetRateLimits of a token bucket", "[http_gateway][cluster]") {
  Gateway g;
  // limit 3 per hour: each hit leaves one fewer; the bucket is whole again after
  // (3 - remaining) * 1200 s (RateLimit t, and reset_time from now).
  for (int remaining = 2; remaining >= 0; --remaining) {
    const Answer a = g.post(R"({"requests":[)" + request("tb", 1, 3) + "]}");
    CHECK(a.status == 200);
    std::vector<std::int64_t> times;
    CHECK(a.bodyWithoutTimes(times) ==
          R"({"responses":[)" + response("UNDER_LIMIT", 3, remaining) + "]}");
    const std::int64_t full = (3 - remaining) * 1'200'000;
    REQUIRE(times.size() == 1);
    CHECK(times[0] >= a.before + full);
    CHECK(times[0] <= a.after + full);
    CHECK(a.headers.at("ratelimit-policy") == R"("api_tb";q=3;w=3600)");
    CHECK(a.headers.at("ratelimit") == "\"api_tb\";r=" + std::to_string(remaining) +
                                           ";t=" + std::to_string((3 - remaining) * 1200));
    CHECK(a.headers.at("content-type") == "application/json");
  }
  // Over the limit: nothing taken; reset_time is when one token is back (at most 1200 s).
  const Answer over = g.post(R"({"requests":[)" + request("tb", 1, 3) + "]}");
  std::vector<std::int64_t> times;
  CHECK(over.bodyWithoutTimes(times) == R"({"responses":[)" + response("OVER_LIMIT", 3, 0) + "]}");
  CHECK(times.at(0) > over.before + 1'100'000);
  CHECK(times.at(0) <= over.after + 1'200'000);
  CHECK(over.headers.at("ratelimit").find("\"api_tb\";r=0;t=1") == 0);
  // hits 0 reads: OVER_LIMIT while nothing remains, and takes nothing.
  const Answer peek = g.post(R"({"requests":[)" + request("tb", 0, 3) + "]}");
  times.clear();
  CHECK(peek.bodyWithoutTimes(times) == R"({"responses":[)" + response("OVER_LIMIT", 3, 0) + "]}");
  // Two requests in one call, each with its answer and its header item, in order.
  const Answer two =
      g.post(R"({"requests":[)" + request("a", 2, 5) + "," + request("b", 5, 5) + "]}");
  times.clear();
  CHECK(two.bodyWithoutTimes(times) == R"({"responses":[)" + response("UNDER_LIMIT", 5, 3) + "," +
                                           response("UNDER_LIMIT", 5, 0) + "]}");
  CHECK(two.headers.at("ratelimit-policy") == R"("api_a";q=5;w=3600, "api_b";q=5;w=3600)");
  CHECK(two.headers.at("ratelimit") == R"("api_a";r=3;t=1440, "api_b";r=0;t=3600)");
  CHECK(g.http.counts().overLimit == 2);
}

TEST_CASE("HTTP gateway: curl asks GetRateLimits of a leaky bucket", "[http_gateway][cluster]") {
  Gateway g;
  // limit 2 per hour, burst 4: the meter holds 4 and leaks one per 30 minutes.
  const std::string leaky = R"(,"algorithm":1,"burst":4)";
  Answer a = g.post(R"({"requests":[)" + request("lb", 1, 2, leaky) + "]}");
  std::vector<std::int64_t> times;
  CHECK(a.bodyWithoutTimes(times) == R"({"responses":[)" + response("UNDER_LIMIT", 2, 3) + "]}");
  // Empty again after the one unit leaks: 1800 s.
  CHECK(times.at(0) >= a.before + 1'800'000 - 1000);
  CHECK(times.at(0) <= a.after + 1'800'000);
  CHECK(a.headers.at("ratelimit-policy") == R"("api_lb";q=2;w=3600)");
  CHECK(a.headers.at("ratelimit") == R"("api_lb";r=3;t=1800)");
  // Three more fill it; then one is over, with reset_time when a unit has leaked (<= 1800 s).
  a = g.post(R"({"requests":[)" + request("lb", 3, 2, R"(,"algorithm":"LEAKY_BUCKET","burst":4)") +
             "]}");
  times.clear();
  CHECK(a.bodyWithoutTimes(times) == R"({"responses":[)" + response("UNDER_LIMIT", 2, 0) + "]}");
  CHECK(a.headers.at("ratelimit") == R"("api_lb";r=0;t=7200)");
  a = g.post(R"({"requests":[)" + request("lb", 1, 2, leaky) + "]}");
  times.clear();
  CHECK(a.bodyWithoutTimes(times) == R"({"responses":[)" + response("OVER_LIMIT", 2, 0) + "]}");
  CHECK(times.at(0) <= a.after + 1'800'000);
  CHECK(times.at(0) > a.before + 1'700'000);
}

TEST_CASE("HTTP gateway: bad bodies are refused with 400 and the node keeps serving",
          "[http_gateway][cluster]") {
  Gateway g;
  Answer a = g.post("{\"requests\": [");
  CHECK(a.status == 400);
  CHECK(a.body.find(R"({"code":3,"message":"body: not JSON: )") == 0);
  a = g.post(R"({"requests":[{"name":"api","unique_key":"k","hits":"many"}]})");
  CHECK(a.status == 400);
  CHECK(a.body == R"({"code":3,"message":"requests[0].hits: must be a whole number (int64), )"
                  R"(got the string 'many'","details":[]})");
  CHECK(a.headers.count("ratelimit") == 0);
  // A behaviour ingrid does not map: that request's error, the others answered.
  a = g.post(R"({"requests":[)" + request("x", 1, 3, R"(,"behavior":"RESET_REMAINING")") + "," +
             request("y", 1, 3) + "]}");
  CHECK(a.status == 200);
  CHECK(a.body.find(R"("error":"behavior RESET_REMAINING (no reset operation) is not supported )"
                    R"(by ingrid")") != std::string::npos);
  CHECK(a.headers.at("ratelimit") == R"("api_y";r=2;t=1200)");
  // Still serving; health and counts.
  a = g.post(R"({"requests":[)" + request("z", 1, 3) + "]}");
  CHECK(a.status == 200);
  const Answer health = g.get("/v1/HealthCheck");
  CHECK(health.status == 200);
  CHECK(health.body == R"({"status":"healthy","message":"member 1 is serving","peer_count":1})");
  CHECK(g.get("/v1/GetRateLimits").status == 405);
  const HttpGatewayCounts c = g.http.counts();
  CHECK(c.refused == 2);
  CHECK(c.calls == 2);
  CHECK(c.itemErrors == 1);
  CHECK(g.http.metricsText().find("ingrid_http_gateway_refused_total 2\n") != std::string::npos);
}

TEST_CASE("HTTP gateway: starts and stops many times", "[http_gateway][cluster]") {
  Node node;
  REQUIRE(node.start());
  for (int i = 0; i < 10; ++i) {
    HttpGateway http(node);
    auto port = http.start("127.0.0.1:0");
    INFO((port ? "" : port.error().message()));
    REQUIRE(port);
    http.stop();
  }
  HttpGateway http(node);
  CHECK(!http.start("no-port"));
}
