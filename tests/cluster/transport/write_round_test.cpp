#include "cluster/transport/write_round.h"

#include <catch2/catch.hpp>

#include <string>
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

TEST_CASE("write round: an io_context destroyed with a round pending releases what it held",
          "[cluster][transport]") {
  auto held = std::make_shared<int>(7);
  {
    asio::io_context io;
    asio::post(io, [&io, held] { WriteRound::of(io).atEnd([held] { (void)held; }); });
    io.run_one();  // the handler ran; the end of its round is still queued
    CHECK(held.use_count() == 2);
  }
  CHECK(held.use_count() == 1);
}
