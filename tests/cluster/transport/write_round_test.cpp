#include "cluster/transport/write_round.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/post.hpp>

using namespace ingrid;

TEST_CASE("write round: its end runs behind the handlers queued when it began, hooks in order",
          "[cluster][transport]") {
  asio::io_context io;
  WriteRound& round = WriteRound::of(io);
  CHECK(&round == &WriteRound::of(io));  // one per io_context
  CHECK_FALSE(round.here());             // nothing runs io now
  std::vector<std::string> order;
  asio::post(io, [&] {
    CHECK(round.here());
    order.push_back("a");
    round.atEnd([&] {
      order.push_back("hook 1");
      // A hook added by a hook runs in the same end, before the connections flush.
      round.atEnd([&] { order.push_back("hook 3"); });
    });
    round.atEnd([&] { order.push_back("hook 2"); });
    // Posted after the round's end was (at the first atEnd): it runs after that end.
    asio::post(io, [&] { order.push_back("next"); });
  });
  asio::post(io, [&] { order.push_back("b"); });  // queued before the round began: ahead of it
  io.run();
  CHECK(order == std::vector<std::string>{"a", "b", "hook 1", "hook 2", "hook 3", "next"});
}

TEST_CASE("write round: a round after the last one ended is posted again", "[cluster][transport]") {
  asio::io_context io;
  WriteRound& round = WriteRound::of(io);
  int ends = 0;
  asio::post(io, [&] { round.atEnd([&] { ++ends; }); });
  io.run();
  io.restart();
  asio::post(io, [&] { round.atEnd([&] { ++ends; }); });
  io.run();
  CHECK(ends == 2);
}

namespace {

// A service made after the round's, as a connection's socket service is: Asio destroys services
// newest first, so this one is gone before the round's destructor runs.
struct LaterService : asio::execution_context::service {
  using key_type = LaterService;
  static asio::execution_context::id id;
  explicit LaterService(asio::execution_context& context) : service(context) {}
  ~LaterService() override { *alive = false; }
  void shutdown() override {}
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};
asio::execution_context::id LaterService::id;

// Records, when released, whether the later service still lived.
struct Witness {
  Witness(std::shared_ptr<bool> alive, std::shared_ptr<bool> released)
      : serviceAlive(std::move(alive)), releasedWhileAlive(std::move(released)) {}
  Witness(const Witness&) = delete;
  Witness& operator=(const Witness&) = delete;
  ~Witness() { *releasedWhileAlive = *serviceAlive; }
  std::shared_ptr<bool> serviceAlive;
  std::shared_ptr<bool> releasedWhileAlive;
};

}  // namespace

TEST_CASE("write round: an io_context destroyed with a round pending releases what it held first",
          "[cluster][transport]") {
  auto releasedWhileAlive = std::make_shared<bool>(false);
  {
    asio::io_context io;
    WriteRound& round = WriteRound::of(io);
    std::shared_ptr<bool> alive = asio::use_service<LaterService>(io).alive;
    auto witness = std::make_shared<Witness>(alive, releasedWhileAlive);
    asio::post(
        io, [&round, witness = std::move(witness)] { round.atEnd([witness] { (void)witness; }); });
    io.run_one();  // the handler ran; the end of its round is still queued
  }
  // Released in shutdown(), while every service still lived (a connection's socket needs its
  // service to close), not in the round's destructor, after the newer services were destroyed.
  CHECK(*releasedWhileAlive);
}
