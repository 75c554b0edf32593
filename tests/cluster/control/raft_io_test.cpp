#include "cluster/control/raft_io.h"

#include <catch2/catch.hpp>

#include <string>

#include "cluster/control/raft_codec.h"

using namespace ingrid;

namespace {

struct NoNetwork final : RaftNetwork {
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override {}
};

}  // namespace

// The codec itself is raft_codec_test's: here, what deliver() does with its answer.
TEST_CASE("RaftIo drops a well-formed message while raft does not run, and refuses bad bytes",
          "[control][raft]") {
  asio::io_context ctx;
  NoNetwork net;
  RaftIo io(ctx, net);
  raft_message m{};
  m.type = RAFT_IO_TIMEOUT_NOW;
  m.timeout_now.term = 4;
  const std::string good = encodeRaftMessage(m, 7, "127.0.0.1:7400");
  auto dropped = io.deliver(good);
  REQUIRE(dropped.ok());
  CHECK_FALSE(*dropped);
  auto refused = io.deliver(good + "x");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Errc::malformed_message);
  CHECK_THAT(refused.error().message(), Catch::Contains("Raft message: 1 bytes left over"));
}

namespace {

struct CountingNetwork final : RaftNetwork {
  int sent = 0;
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override { ++sent; }
};

}  // namespace

TEST_CASE("A send raft does not await is never read again: raft may free its request at once",
          "[control][raft]") {
  asio::io_context ctx;
  CountingNetwork net;
  RaftIo io(ctx, net);
  raft_io* rio = io.get();
  char address[] = "127.0.0.1:7401";
  raft_message m{};
  m.type = RAFT_IO_TIMEOUT_NOW;
  m.server_id = 2;
  m.server_address = address;
  m.timeout_now.term = 4;
  m.timeout_now.last_log_index = 12;
  m.timeout_now.last_log_term = 4;

  // Leadership transfer sends TimeoutNow with no callback and frees the request when the transfer
  // ends, which may come before anything queued on the io_context runs.
  auto* transfer = new raft_io_send{};
  REQUIRE(rio->send(rio, transfer, &m, nullptr) == 0);
  delete transfer;
  ctx.run();  // reading the freed request here is what ASan caught in CI
  CHECK(net.sent == 1);

  // A send with a callback completes exactly once, after send() returned.
  int completions = 0;
  raft_io_send awaited{};
  awaited.data = &completions;
  REQUIRE(rio->send(rio, &awaited, &m, [](raft_io_send* req, int status) {
    CHECK(status == 0);
    ++*static_cast<int*>(req->data);
  }) == 0);
  CHECK(completions == 0);
  ctx.restart();
  ctx.run();
  CHECK(completions == 1);
  CHECK(net.sent == 2);
}
