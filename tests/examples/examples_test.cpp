// Runs the example programs as a user would, so they cannot rot.
#include <catch2/catch.hpp>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "cluster/transport/transport.h"

#include "support/child_process.h"

using namespace std::chrono_literals;
using ingrid::testing::ChildProcess;

namespace {

std::string lastWord(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

// GET /?key=KEY from the server at host:port; returns the whole response.
std::string httpGet(const std::string& address, const std::string& key) {
  const auto a = ingrid::parseAddress(address);
  REQUIRE(a);
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address(a->first), a->second});
  const std::string request = "GET /?key=" + key + " HTTP/1.1\r\nHost: test\r\n\r\n";
  asio::write(s, asio::buffer(request));
  std::string response;
  std::error_code ec;
  asio::read(s, asio::dynamic_buffer(response), ec);  // until the server closes
  return response;
}

}  // namespace

TEST_CASE("Three HTTP servers embedding nodes answer 429 past a shared limit",
          "[examples][multiprocess]") {
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::vector<std::string> http;
  std::string seed;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args{"--limit", "10"};
    if (!seed.empty()) args.insert(args.end(), {"--seed", seed});
    servers.push_back(std::make_unique<ChildProcess>(INGRID_HTTP_EXAMPLE, args));
    REQUIRE(servers.back()->started());
    auto node = servers.back()->waitForLine("node ", 20s);
    REQUIRE(node);
    if (seed.empty()) seed = lastWord(*node);
    auto endpoint = servers.back()->waitForLine("http ", 5s);
    REQUIRE(endpoint);
    http.push_back(lastWord(*endpoint));
  }
  int ok = 0, limited = 0;
  for (int i = 0; i < 25; ++i) {  // round-robin over the three processes, like a load balancer
    const std::string r = httpGet(http[i % 3], "alice");
    if (r.rfind("HTTP/1.1 200", 0) == 0) ++ok;
    if (r.rfind("HTTP/1.1 429", 0) == 0) {
      ++limited;
      CHECK_THAT(r, Catch::Contains("Retry-After:"));
    }
  }
  CHECK(ok == 10);  // one limit for the whole cluster, not 10 per process
  CHECK(limited == 15);
  CHECK(httpGet(http[1], "bob").rfind("HTTP/1.1 200", 0) == 0);  // other keys are separate
  CHECK(httpGet(http[2], "").rfind("HTTP/1.1 400", 0) == 0);

  for (auto it = servers.rbegin(); it != servers.rend(); ++it) {
    (*it)->signal(SIGTERM);
    REQUIRE((*it)->waitForLine("stopped", 30s));
    auto status = (*it)->wait(10s);
    REQUIRE(status);
    CHECK(WEXITSTATUS(*status) == 0);
  }
}

TEST_CASE("The thin-client example rate-limits through a running cluster", "[examples]") {
  ChildProcess node(INGRID_NODE_PATH, {"--partitions", "64", "--workers", "1"});
  REQUIRE(node.started());
  auto listening = node.waitForLine("listening on", 10s);
  REQUIRE(listening);
  ChildProcess client(INGRID_THIN_CLIENT_EXAMPLE,
                      {"--seed", lastWord(*listening), "--requests", "30"});
  auto first = client.waitForLine("one at a time:", 20s);
  REQUIRE(first);
  CHECK_THAT(*first, Catch::Contains("granted 10, refused 20"));
  auto batched = client.waitForLine("batched:", 20s);
  REQUIRE(batched);
  CHECK_THAT(*batched, Catch::Contains("granted 10 of 30"));
  auto status = client.wait(10s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  node.signal(SIGTERM);
  CHECK(node.wait(20s));
}
