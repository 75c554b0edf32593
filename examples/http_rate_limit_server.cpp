// An HTTP endpoint that answers "429 Too Many Requests" past a limit shared by every process.
//
// Each process embeds an ingrid node; run three, joined through the first:
//   http_rate_limit_server --http 8081
//   http_rate_limit_server --http 8082 --seed 127.0.0.1:<first node's port>
// GET /?key=alice  -> 200 while alice's bucket (--limit per hour) has tokens, then 429 with
// Retry-After, whichever process answers. Prints "node HOST:PORT" and "http HOST:PORT" on start.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <string>

#include <ingrid/node.h>
#include <ingrid/rate_limiter.h>

using asio::ip::tcp;

namespace {

std::string response(int status, const std::string& extra, const std::string& body) {
  const char* reason = status == 200   ? "OK"
                       : status == 429 ? "Too Many Requests"
                       : status == 400 ? "Bad Request"
                                       : "Service Unavailable";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// One request per connection: read the request line, check the caller's bucket, answer.
asio::awaitable<void> serve(tcp::socket socket, ingrid::Node& node, ingrid::BucketParams limit) {
  asio::streambuf buffer;
  std::error_code ec;
  co_await asio::async_read_until(socket, buffer, "\r\n\r\n",
                                  asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  std::istream in(&buffer);
  std::string method, target;
  in >> method >> target;
  const auto at = target.find("key=");
  std::string reply;
  const std::string name =
      at == std::string::npos ? "" : target.substr(at + 4, target.find('&', at) - at - 4);
  if (method != "GET" || name.empty()) {
    reply = response(400, "", "use GET /?key=NAME\n");
  } else {
    ingrid::RateLimiter limiter(node, "http:" + name, limit);
    auto answer = co_await limiter.tryAcquireAsync(1, asio::use_awaitable);
    if (!answer) {
      const bool bad = answer.error() == ingrid::Errc::invalid_key;
      reply = response(bad ? 400 : 503, "", answer.error().message() + "\n");
    } else if (answer->granted) {
      reply = response(200, "", "ok, " + std::to_string(answer->remaining) + " left\n");
    } else {
      const long long retry = answer->waitNanos / ingrid::kNanosPerSecond + 1;
      reply = response(429, "Retry-After: " + std::to_string(retry) + "\r\n", "slow down\n");
    }
  }
  co_await asio::async_write(socket, asio::buffer(reply),
                             asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> listen(tcp::acceptor& acceptor, ingrid::Node& node,
                             ingrid::BucketParams limit) {
  for (;;) {
    std::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (!ec)
      asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), node, limit),
                     asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short httpPort = 0;
  long long perHour = 10;
  ingrid::NodeOptions options;
  options.listenAddress = "127.0.0.1:0";
  options.workerThreads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--http"))
      httpPort = static_cast<unsigned short>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--seed"))
      options.seeds.emplace_back(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--limit"))
      perHour = std::atoll(argv[i + 1]);
  }
  if (perHour <= 0) {
    std::fprintf(stderr,
                 "usage: http_rate_limit_server [--http PORT] [--seed HOST:PORT] [--limit N>0]\n");
    return 2;
  }
  ingrid::Node node(options);
  if (auto started = node.start(); !started) {
    std::fprintf(stderr, "cannot start the node: %s\n", started.error().message().c_str());
    return 1;
  }
  const auto limit = ingrid::BucketParams::perPeriod(perHour, 3600 * ingrid::kNanosPerSecond);

  asio::io_context io(1);
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), httpPort});
  std::printf("node %s\nhttp 127.0.0.1:%u\n", node.listenAddress().c_str(),
              acceptor.local_endpoint().port());
  std::fflush(stdout);
  asio::co_spawn(io, listen(acceptor, node, limit), asio::detached);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code, int) {
    acceptor.close();
    io.stop();
  });
  io.run();
  node.stop();  // leaves the cluster; its buckets live on in the other processes
  std::printf("stopped\n");
  return 0;
}
