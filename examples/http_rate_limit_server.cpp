// An HTTP endpoint that answers "429 Too Many Requests" past a limit shared by every process.
//
// Each process embeds an ingrid node; run three, joined through the first:
//   http_rate_limit_server --http 8081
//   http_rate_limit_server --http 8082 --seed 127.0.0.1:<first node's port>
// GET /?key=alice -> 200 while alice's bucket (--limit tokens, refilled at --limit per --window
// seconds; default 10 per 3600) has tokens, then 429 with Retry-After, whichever process answers.
// Every 200 and 429 carries the IETF headers (draft-ietf-httpapi-ratelimit-headers-10):
//   RateLimit-Policy: "default";q=<limit>;w=<window seconds>
//   RateLimit: "default";r=<tokens left>;t=<seconds>
// where t is, on a 200, the seconds until the bucket is full again and, on a 429, the seconds
// until the request would be granted (Retry-After says the same: never earlier than t).
// A missing or invalid key is 400, a cluster error 503, each with a one-line reason.
// Prints "node HOST:PORT" and "http HOST:PORT" on start; SIGINT or SIGTERM leaves the cluster.
//
// cpp-httplib serves each connection on a thread of its pool, so a handler may block: it asks the
// cluster with the blocking RateLimiter::tryAcquire.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <ingrid/node.h>
#include <ingrid/rate_limiter.h>
#include <ingrid/ratelimit_headers.h>

namespace {

// Bounds that keep the header arithmetic in int64 (limit * window < 2^63).
constexpr long long kMaxLimit = 1'000'000'000;
constexpr long long kMaxWindowSeconds = 10LL * 365 * 24 * 3600;
// A key names a caller (an API key, a user), not a document.
constexpr std::size_t kMaxKeyBytes = 256;
// Each open (keep-alive) connection holds one of the pool's threads until it closes.
constexpr std::size_t kHttpThreads = 64;

struct Limit {
  long long tokens;   // the bucket's capacity, q
  long long seconds;  // the window it refills in, w
};

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body + "\n", "text/plain; charset=utf-8");
}

void handle(ingrid::Node& node, Limit limit, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("key"))
    return reply(res, 400, "missing query parameter 'key': GET /?key=NAME");
  const std::string key = req.get_param_value("key");
  if (key.empty()) return reply(res, 400, "invalid query parameter 'key': it must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return reply(
        res, 400,
        "invalid query parameter 'key': longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  ingrid::RateLimiter limiter(
      node, "http:" + key,
      ingrid::BucketParams::perPeriod(limit.tokens, limit.seconds * ingrid::kNanosPerSecond));
  const auto answer = limiter.tryAcquire(1);
  if (!answer) {
    const ingrid::Error& e = answer.error();
    if (e == ingrid::Errc::invalid_key)
      return reply(res, 400, "invalid query parameter 'key': " + e.detail());
    return reply(
        res, 503,
        "cluster error " + std::string(ingrid::errcName(e.code().value())) + ": " + e.message());
  }
  // granted: the bucket refills its deficit at limit.tokens per limit.seconds.
  const long long t =
      answer->granted
          ? ingrid::ceilSeconds(ingrid::untilFull(
                limit.tokens, limit.seconds * ingrid::kNanosPerSecond, answer->remaining))
          : std::max<long long>(1, ingrid::ceilSeconds(answer->waitNanos));
  res.set_header("RateLimit-Policy",
                 ingrid::rateLimitPolicyItem("default", limit.tokens, limit.seconds));
  res.set_header("RateLimit", ingrid::rateLimitItem("default", answer->remaining, t));
  if (answer->granted) return reply(res, 200, "ok, " + std::to_string(answer->remaining) + " left");
  res.set_header("Retry-After", std::to_string(t));
  reply(res, 429, "slow down: try again in " + std::to_string(t) + " s");
}

long long number(const char* text) {
  char* end = nullptr;
  const long long n = std::strtoll(text, &end, 10);
  return *text != '\0' && *end == '\0' ? n : -1;
}

}  // namespace

int main(int argc, char** argv) {
  long long httpPort = 0;
  Limit limit{10, 3600};
  ingrid::NodeOptions options;
  options.listenAddress = "127.0.0.1:0";
  options.workerThreads = 1;
  bool usable = argc % 2 == 1;
  for (int i = 1; usable && i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--http"))
      httpPort = number(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed"))
      options.seeds.emplace_back(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--limit"))
      limit.tokens = number(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--window"))
      limit.seconds = number(argv[i + 1]);
    else
      usable = false;
  }
  if (!usable || httpPort < 0 || httpPort > 65535 || limit.tokens <= 0 ||
      limit.tokens > kMaxLimit || limit.seconds <= 0 || limit.seconds > kMaxWindowSeconds) {
    std::fprintf(stderr,
                 "usage: http_rate_limit_server [--http PORT] [--seed HOST:PORT]... "
                 "[--limit N (1..%lld)] [--window SECONDS (1..%lld)]\n",
                 kMaxLimit, kMaxWindowSeconds);
    return 2;
  }
  // SIGINT and SIGTERM are taken by sigwait below: blocked here, before any thread starts, so
  // every thread inherits the mask.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  ingrid::Node node(options);
  if (auto started = node.start(); !started) {
    std::fprintf(stderr, "cannot start the node: %s\n", started.error().message().c_str());
    return 1;
  }
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  server.set_keep_alive_max_count(1'000'000);
  // The status line and headers, then the body: two writes, and Nagle's algorithm would hold the
  // second until the client's delayed ACK (40 ms on Linux) on a kept-alive connection.
  server.set_tcp_nodelay(true);
  server.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    handle(node, limit, req, res);
  });
  const int port = httpPort == 0 ? server.bind_to_any_port("127.0.0.1")
                                 : (server.bind_to_port("127.0.0.1", static_cast<int>(httpPort))
                                        ? static_cast<int>(httpPort)
                                        : -1);
  if (port <= 0) {
    std::fprintf(stderr, "cannot listen for HTTP on 127.0.0.1:%lld\n", httpPort);
    return 1;
  }
  std::printf("node %s\nhttp 127.0.0.1:%d\n", node.listenAddress().c_str(), port);
  std::fflush(stdout);

  std::atomic<bool> listening{true};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stopSignals, &signal);
    // stop() is a no-op until the server runs (cpp-httplib 0.11): wait for that, bounded.
    for (int i = 0; i < 5000 && listening && !server.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server.stop();
  });
  const bool served = server.listen_after_bind();
  listening = false;
  if (!served) pthread_kill(stopper.native_handle(), SIGTERM);  // ends the sigwait
  stopper.join();
  node.stop();  // leaves the cluster; its buckets live on in the other processes
  std::printf("stopped\n");
  return 0;
}
