#include "cluster/control/raft_io.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace ingrid;

namespace {

struct NoNetwork final : RaftNetwork {
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override {}
};

// An AppendEntries with two entries, as server 7 at "127.0.0.1:7400" sends it.
std::string appendEntries() {
  char a[] = "first";
  char b[] = "second entry";
  raft_entry entries[2]{};
  entries[0].term = 3;
  entries[0].type = RAFT_COMMAND;
  entries[0].buf = raft_buffer{a, std::strlen(a)};
  entries[1].term = 3;
  entries[1].type = RAFT_BARRIER;
  entries[1].buf = raft_buffer{b, std::strlen(b)};
  raft_message m{};
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.append_entries.term = 3;
  m.append_entries.prev_log_index = 10;
  m.append_entries.prev_log_term = 2;
  m.append_entries.leader_commit = 9;
  m.append_entries.entries = entries;
  m.append_entries.n_entries = 2;
  return encodeRaftMessage(m, 7, "127.0.0.1:7400");
}

}  // namespace

TEST_CASE("RaftIo decodes what it encodes and refuses every malformed message, naming why",
          "[control][raft]") {
  asio::io_context ctx;
  NoNetwork net;
  RaftIo io(ctx, net);
  const std::string good = appendEntries();
  // Well-formed, but no raft runs on this io: dropped, not an error.
  auto dropped = io.deliver(good);
  REQUIRE(dropped.ok());
  CHECK_FALSE(*dropped);

  SECTION("every truncation") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      INFO("first " << n << " bytes");
      auto r = io.deliver(std::string_view(good).substr(0, n));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == Errc::malformed_message);
      CHECK_THAT(r.error().message(),
                 Catch::Contains("left") || Catch::Contains("needs") || Catch::Contains("exceeds"));
    }
  }
  SECTION("trailing bytes") {
    auto r = io.deliver(good + "x");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("left over"));
  }
  SECTION("an entry count far beyond the bytes, before anything is allocated") {
    std::string bad = good;
    // type u8, id u64, address (u16 + 14), then four u64s: the count follows.
    const std::size_t at = 1 + 8 + 2 + std::strlen("127.0.0.1:7400") + 4 * 8;
    std::memset(&bad[at], 0xff, 4);
    auto r = io.deliver(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("entry count 4294967295 exceeds"));
  }
  SECTION("an unknown type, and ids or terms raft would assert on") {
    std::string unknown = good;
    unknown[0] = 42;
    CHECK_THAT(io.deliver(unknown).error().message(), Catch::Contains("message type 42 unknown"));
    std::string noSender = good;
    std::memset(&noSender[1], 0, 8);
    CHECK_THAT(io.deliver(noSender).error().message(), Catch::Contains("sender id 0"));
    raft_message vote{};
    vote.type = RAFT_IO_REQUEST_VOTE;
    vote.request_vote.candidate_id = 7;
    CHECK_THAT(io.deliver(encodeRaftMessage(vote, 7, "a:1")).error().message(),
               Catch::Contains("term 0"));
  }
  SECTION("random bytes") {
    std::string noise;
    for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((i * 131 + 17) % 251));
    for (std::size_t n = 0; n < noise.size(); n += 97) {
      auto r = io.deliver(std::string_view(noise).substr(n));
      if (r.ok()) continue;  // a chance well-formed message is dropped like any other
      CHECK(r.error() == Errc::malformed_message);
    }
  }
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
