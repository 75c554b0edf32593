#include "cluster/http_gateway/http_gateway.h"

#include <httplib.h>

#include <variant>
#include <vector>

#include <ingrid/ratelimit_headers.h>

#include "cluster/http_gateway/gubernator_json.h"
#include "cluster/http_server_thread.h"

namespace ingrid {
namespace {

// `s` as a JSON string's contents: '"' and '\' escaped, control bytes as spaces.
std::string jsonEscape(const std::string& s) {
  std::string escaped;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      escaped += ' ';
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// grpc-gateway's error body: code 3 is gRPC's INVALID_ARGUMENT.
std::string errorBody(const std::string& message) {
  return "{\"code\":3,\"message\":\"" + jsonEscape(message) + "\",\"details\":[]}";
}

std::int64_t wallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HttpGateway::HttpGateway(Node& node, HttpGatewayOptions options)
    : node_(node), options_(options), server_(std::make_unique<httplib::Server>()) {
  const std::size_t threads = options_.threads == 0 ? 1 : options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.maxBodyBytes);
  // A kept-alive connection serves requests until it idles (cpp-httplib's default is 5).
  server_->set_keep_alive_max_count(1'000'000);
  const auto idle = std::chrono::duration_cast<std::chrono::seconds>(options_.idleTimeout);
  server_->set_keep_alive_timeout(std::max<long>(1, static_cast<long>(idle.count())));
  server_->set_read_timeout(
      std::chrono::seconds(std::max<long>(1, static_cast<long>(idle.count()))));
  // The headers and the body are two writes: without TCP_NODELAY a kept-alive answer waits for
  // the client's delayed ACK.
  server_->set_tcp_nodelay(true);
  server_->Post("/v1/GetRateLimits", [this](const httplib::Request& req, httplib::Response& res) {
    int status = 200;
    std::string body, policy, rateLimit;
    getRateLimits(req.body, status, body, policy, rateLimit);
    res.status = status;
    if (!policy.empty()) res.set_header("RateLimit-Policy", policy);
    if (!rateLimit.empty()) res.set_header("RateLimit", rateLimit);
    res.set_content(body, "application/json");
  });
  server_->Get("/v1/GetRateLimits", [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "POST");
    res.set_content(errorBody("GetRateLimits takes POST with a JSON body"), "application/json");
  });
  server_->Get("/v1/HealthCheck", [this](const httplib::Request&, httplib::Response& res) {
    const Probe ready = node_.readiness();
    const TopologyPtr t = node_.topology();
    res.set_content(std::string("{\"status\":\"") + (ready.ok ? "healthy" : "unhealthy") +
                        "\",\"message\":" + "\"" + jsonEscape(ready.reason) + "\"" +
                        ",\"peer_count\":" + std::to_string(t ? t->members.size() : 0) + "}",
                    "application/json");
  });
}

HttpGateway::~HttpGateway() { stop(); }

void HttpGateway::getRateLimits(const std::string& body, int& status, std::string& out,
                                std::string& policy, std::string& rateLimit) {
  auto parsed = parseGetRateLimits(body);
  if (auto* refusal = std::get_if<std::string>(&parsed)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    status = 400;
    out = errorBody(*refusal);
    return;
  }
  auto& items = std::get<std::vector<GubernatorItem>>(parsed);
  std::vector<GubernatorAnswer> answers;
  answers.reserve(items.size());
  for (GubernatorItem& item : items) {
    if (!item.request) {
      answers.push_back(gubernatorRefusal(item));
    } else {
      std::visit(
          [&](const auto& request) {
            using Request = std::decay_t<decltype(request)>;
            if constexpr (std::is_same_v<Request, TokenBucketAcquire> ||
                          std::is_same_v<Request, LeakyMeterAcquire>) {
              answers.push_back(gubernatorAnswer(item, node_.invoke(item.key, request)));
            } else {  // the mapping makes no other request
              answers.push_back(gubernatorRefusal(item));
            }
          },
          *item.request);
      requests_.fetch_add(1, std::memory_order_relaxed);
    }
    const GubernatorAnswer& a = answers.back();
    if (!a.error.empty()) {
      itemErrors_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (a.over) overLimit_.fetch_add(1, std::memory_order_relaxed);
    const std::int64_t window = ceilSeconds(item.durationMs * 1'000'000);
    policy += (policy.empty() ? "" : ", ") + rateLimitPolicyItem(item.key, item.limit, window);
    rateLimit += (rateLimit.empty() ? "" : ", ") +
                 rateLimitItem(item.key, a.remaining, ceilSeconds(a.resetAfter));
  }
  calls_.fetch_add(1, std::memory_order_relaxed);
  out = getRateLimitsResponse(answers, wallMs());
}

Result<std::uint16_t> HttpGateway::start(const std::string& address) {
  return startHttpServer(*server_, thread_, address, "the HTTP gateway");
}

void HttpGateway::stop() { stopHttpServer(*server_, thread_); }

HttpGatewayCounts HttpGateway::counts() const noexcept {
  constexpr auto r = std::memory_order_relaxed;
  return HttpGatewayCounts{calls_.load(r), refused_.load(r), requests_.load(r), overLimit_.load(r),
                           itemErrors_.load(r)};
}

std::string HttpGateway::metricsText() const {
  const HttpGatewayCounts c = counts();
  std::string out;
  const auto counter = [&out](const char* name, const char* help, std::uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           " " + std::to_string(value) + "\n";
  };
  counter("ingrid_http_gateway_calls_total", "GetRateLimits calls answered 200.", c.calls);
  counter("ingrid_http_gateway_refused_total", "GetRateLimits calls refused 400.", c.refused);
  counter("ingrid_http_gateway_requests_total", "GetRateLimits requests run on a limiter.",
          c.requests);
  counter("ingrid_http_gateway_over_limit_total", "GetRateLimits requests answered OVER_LIMIT.",
          c.overLimit);
  counter("ingrid_http_gateway_request_errors_total",
          "GetRateLimits requests answered with an error.", c.itemErrors);
  return out;
}

}  // namespace ingrid
