#include "cluster/control/raft_codec.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <string_view>

using namespace ingrid;

namespace {

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

// What decodeRaftMessage answers for `bytes`.
Result<bool> decode(std::string_view bytes) {
  DecodedRaftMessage d;
  return decodeRaftMessage(bytes, d);
}

}  // namespace

TEST_CASE("The Raft codec decodes what it encodes and refuses every malformed message, naming why",
          "[control][raft]") {
  const std::string good = appendEntries();
  {
    DecodedRaftMessage d;
    REQUIRE(decodeRaftMessage(good, d).ok());
    CHECK(d.message.type == RAFT_IO_APPEND_ENTRIES);
    CHECK(d.message.server_id == 7);
    CHECK(std::string(d.message.server_address) == "127.0.0.1:7400");
    const auto& a = d.message.append_entries;
    CHECK(a.term == 3);
    CHECK(a.prev_log_index == 10);
    CHECK(a.prev_log_term == 2);
    CHECK(a.leader_commit == 9);
    REQUIRE(a.n_entries == 2);
    CHECK(a.entries[1].type == RAFT_BARRIER);
    CHECK(std::string(static_cast<const char*>(a.entries[1].buf.base), a.entries[1].buf.len) ==
          "second entry");
    CHECK(raftMessageSender(good) == raft_id{7});
  }
  CHECK_FALSE(raftMessageSender(std::string_view(good).substr(0, 8)).has_value());

  SECTION("every truncation") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      INFO("first " << n << " bytes");
      auto r = decode(std::string_view(good).substr(0, n));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == Errc::malformed_message);
      CHECK_THAT(r.error().message(),
                 Catch::Contains("left") || Catch::Contains("needs") || Catch::Contains("exceeds"));
    }
  }
  SECTION("trailing bytes") {
    auto r = decode(good + "x");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("left over"));
  }
  SECTION("an entry count far beyond the bytes, before anything is allocated") {
    std::string bad = good;
    // type u8, id u64, address (u16 + 14), then four u64s: the count follows.
    const std::size_t at = 1 + 8 + 2 + std::strlen("127.0.0.1:7400") + 4 * 8;
    std::memset(&bad[at], 0xff, 4);
    auto r = decode(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains("entry count 4294967295 exceeds"));
  }
  SECTION("an unknown type, and ids or terms raft would assert on") {
    std::string unknown = good;
    unknown[0] = 42;
    CHECK_THAT(decode(unknown).error().message(), Catch::Contains("message type 42 unknown"));
    std::string noSender = good;
    std::memset(&noSender[1], 0, 8);
    CHECK_THAT(decode(noSender).error().message(), Catch::Contains("sender id 0"));
    raft_message vote{};
    vote.type = RAFT_IO_REQUEST_VOTE;
    vote.request_vote.candidate_id = 7;
    CHECK_THAT(decode(encodeRaftMessage(vote, 7, "a:1")).error().message(),
               Catch::Contains("term 0"));
  }
  SECTION("random bytes") {
    std::string noise;
    for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((i * 131 + 17) % 251));
    for (std::size_t n = 0; n < noise.size(); n += 97) {
      auto r = decode(std::string_view(noise).substr(n));
      if (r.ok()) continue;  // a chance well-formed message
      CHECK(r.error() == Errc::malformed_message);
    }
  }
}
