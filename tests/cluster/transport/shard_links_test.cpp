#include "cluster/transport/shard_links.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include "cluster/transport/transport.h"

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

// A loopback port that takes no new connection and answers nothing: its listen backlog is 0 and
// one connection already waits there unaccepted, so the kernel drops every later SYN, as a
// firewall that drops packets does (a dial hangs instead of being refused).
class BlackHole {
 public:
  BlackHole() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 0) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    filler_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(filler_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~BlackHole() {
    ::close(filler_);
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  int filler_ = -1;
  std::uint16_t port_ = 0;
};

// A transport that only dials, with its network thread, and ShardLinks on it.
struct Dialer final : ConnectionHandler {
  Dialer() : transport(io, options(), *this), guard(io.get_executor()) {
    thread = std::thread([this] { io.run(); });
  }
  // Runs f on the network thread (ShardLinks' thread) and returns what it returns.
  template <class F>
  auto onNet(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io, [&task] { task(); });
    REQUIRE(result.wait_for(20s) == std::future_status::ready);
    return result.get();
  }

  ~Dialer() override {
    onNet([this] {
      links.closeAll();
      return true;
    });
    transport.stop();
    guard.reset();
    io.stop();
    thread.join();
  }
  static TransportOptions options() {
    TransportOptions o;
    o.connectTimeout = 20s;  // far longer than a shard link's dial timeout
    return o;
  }
  void onRequest(const std::shared_ptr<Connection>&, Frame) override {}
  void onClosed(const std::shared_ptr<Connection>&, const Error&) override {}
  asio::io_context io;
  Transport transport;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  ShardLinks links{transport, [](MemberId) { return clientLinkOptions(""); }};
  std::thread thread;
};

}  // namespace

TEST_CASE(
    "A shard port that drops packets: calls fail not sent within the dial timeout, then "
    "the member port serves",
    "[cluster][transport][shard]") {
  BlackHole hole;
  Dialer dialer;
  const MemberInfo member{7, "127.0.0.1:1", 1, {hole.port()}};

  std::shared_ptr<Peer> link = dialer.onNet([&] { return dialer.links.forCall(member, 0); });
  REQUIRE(link != nullptr);
  std::promise<Result<Frame>> answered;
  dialer.onNet([&] {
    link->request(MessageType::kInvoke, 0, "body", std::chrono::milliseconds(30s),
                  [&answered](Result<Frame> r) { answered.set_value(std::move(r)); });
    return true;
  });
  auto answer = answered.get_future();
  // Far sooner than the request's 30 s deadline or the transport's 20 s connectTimeout.
  REQUIRE(answer.wait_for(15s) == std::future_status::ready);
  const Result<Frame> r = answer.get();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::unavailable);  // not sent: safe to send elsewhere
  CHECK_THAT(r.error().message(),
             Catch::Contains("not sent") &&
                 Catch::Contains("timed out after " +
                                 std::to_string(ShardLinks::kDialTimeout.count()) + " ms"));
  // Passed over now: the caller uses the member port (nullptr) until the window ends.
  CHECK(dialer.onNet([&] { return dialer.links.forCall(member, 0); }) == nullptr);
  // Another shard of the same member has a link of its own.
  const MemberInfo two{7, "127.0.0.1:1", 1, {hole.port(), hole.port()}};
  CHECK(dialer.onNet([&] { return dialer.links.forCall(two, 1); }) != nullptr);
}
