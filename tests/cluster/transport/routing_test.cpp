#include <ingrid/node.h>

#include <catch2/catch.hpp>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <future>
#include <random>
#include <string>
#include <thread>

#include <ingrid/processors/counter.h>

#include "cluster/transport/messages.h"
#include "cluster/transport/transport.h"

#include "support/raw_client.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::RawClient;
using ingrid::testing::TestCluster;

namespace {

NodeOptions smallCluster() {
  NodeOptions o;
  o.partitions = 16;
  o.workerThreads = 1;
  return o;
}

std::uint64_t executedEverywhere(TestCluster& cluster) {
  std::uint64_t n = 0;
  for (Node* node : cluster.live()) n += node->TEST_executed();
  return n;
}

}  // namespace

TEST_CASE("A request with a stale topology is redirected, then runs exactly once",
          "[cluster][multinode][routing]") {
  TestCluster cluster(smallCluster());
  REQUIRE(cluster.start(3));
  const TopologyPtr t = cluster.at(0).topology();
  const std::string key = "redirected-counter";
  const PartitionId p = partitionOf(key, t->table.partitionCount());
  Node* primary = cluster.byId(t->table.primary(p));
  Node* other = nullptr;
  for (Node* n : cluster.live()) {
    if (n != primary) other = n;
  }
  REQUIRE(primary != nullptr);
  REQUIRE(other != nullptr);

  RawClient client;
  const std::uint64_t before = executedEverywhere(cluster);
  const std::string body =
      encode(InvokeRequest{key, std::string(Increment::kName), encode(Increment{1})});
  // Version 1 is the one-member topology: by it, every partition belonged to member 1.
  auto wrong = client.connect(other->listenAddress());
  auto redirected = RawClient::send(*wrong, MessageType::kInvoke, 1, body);
  REQUIRE(redirected.ok());
  REQUIRE(redirected->header.type == MessageType::kRedirect);
  const Topology current = decode<TopologyBody>(redirected->body).topology;
  CHECK(current.version == t->version);
  CHECK(executedEverywhere(cluster) == before);  // nothing ran on the non-owner

  // Follow the redirect to the primary it names.
  const MemberInfo* owner = current.member(current.table.primary(p));
  REQUIRE(owner != nullptr);
  auto right = client.connect(owner->address);
  auto ran = RawClient::send(*right, MessageType::kInvoke, current.version, body);
  REQUIRE(ran.ok());
  REQUIRE(ran->header.type == MessageType::kInvoke);
  CHECK(decode<std::int64_t>(decode<InvokeReply>(ran->body).result) == 1);
  CHECK(executedEverywhere(cluster) == before + 1);  // exactly once
  CHECK(*cluster.at(0).invoke(key, GetCounter{}) == 1);
}

TEST_CASE("Bad frames to a node's port get an error and a closed connection: others go on",
          "[cluster][multinode][bad_frames]") {
  TestCluster cluster(smallCluster());
  cluster.add();
  REQUIRE(cluster.lastStart().ok());
  Node& node = cluster.at(0);
  const auto address = parseAddress(node.listenAddress());
  REQUIRE(address);

  RawClient client;
  auto good = client.connect(node.listenAddress());
  auto stillServes = [&] {
    auto r = RawClient::send(
        *good, MessageType::kInvoke, 0,
        encode(InvokeRequest{"k", std::string(Increment::kName), encode(Increment{1})}));
    return r.ok() && r->header.type == MessageType::kInvoke;
  };
  // A new member writes once its first primary lease is granted, which a loaded machine delays:
  // until then an Invoke is answered "unavailable" (no valid primary lease).
  REQUIRE(eventually(stillServes));

  asio::io_context io;
  auto rawSend = [&](const std::string& bytes) {
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(address->first), address->second});
    asio::write(s, asio::buffer(bytes));
    // Read until EOF (bounded: the node closes within its linger time): an error reply, then EOF.
    std::string got;
    std::error_code ec;
    char buf[4096];
    for (int i = 0; i < 1000 && !ec; ++i) {
      const std::size_t n = s.read_some(asio::buffer(buf), ec);
      got.append(buf, n);
    }
    CHECK(ec == asio::error::eof);
    return got;
  };
  auto header = [](MessageType type, std::uint32_t bodyLength, std::uint16_t version) {
    FrameHeader h;
    h.type = type;
    h.version = version;
    h.bodyLength = bodyLength;
    h.requestId = 7;
    const HeaderBytes b = encodeHeader(h);
    return std::string(b.begin(), b.end());
  };

  SECTION("random bytes") {
    std::mt19937 rng(42);
    std::string junk(200, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    rawSend(junk);
  }
  SECTION("a body longer than the maximum") {
    CHECK_THAT(rawSend(header(MessageType::kInvoke, kDefaultMaxBodyBytes + 1, kProtocolVersion)),
               Catch::Contains("exceeds"));
  }
  SECTION("a wrong protocol version") {
    CHECK_THAT(rawSend(header(MessageType::kInvoke, 0, kProtocolVersion + 1)),
               Catch::Contains("version"));
  }
  SECTION("an unknown message type") {
    CHECK_THAT(rawSend(header(static_cast<MessageType>(77), 0, kProtocolVersion)),
               Catch::Contains("77"));
  }
  SECTION("a well-framed Invoke whose body does not decode") {
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(address->first), address->second});
    asio::write(s,
                asio::buffer(header(MessageType::kInvoke, 3, kProtocolVersion) + "\x01\x02\x03"));
    HeaderBytes hb;
    asio::read(s, asio::buffer(hb));
    FrameHeader reply;
    REQUIRE_FALSE(decodeHeader(hb, kDefaultMaxBodyBytes, reply));
    CHECK(reply.isError());
    std::string body(reply.bodyLength, '\0');
    asio::read(s, asio::buffer(body));
    CHECK_THAT(decode<ErrorBody>(body).message, Catch::Contains("Invoke"));
  }
  SECTION("a 17-byte Invoke whose key claims 100 GiB: refused, nothing allocated") {
    std::string claim(8, '\0');
    for (int i = 0; i < 8; ++i) {
      claim[static_cast<std::size_t>(i)] = static_cast<char>((100ull << 30) >> (8 * i));
    }
    const std::string body = "\x01" + claim + "12345678";  // little-endian flag, size, 8 bytes
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(address->first), address->second});
    asio::write(s, asio::buffer(header(MessageType::kInvoke,
                                       static_cast<std::uint32_t>(body.size()), kProtocolVersion) +
                                body));
    HeaderBytes hb;
    asio::read(s, asio::buffer(hb));
    FrameHeader reply;
    REQUIRE_FALSE(decodeHeader(hb, kDefaultMaxBodyBytes, reply));
    CHECK(reply.isError());
    std::string text(reply.bodyLength, '\0');
    asio::read(s, asio::buffer(text));
    CHECK_THAT(decode<ErrorBody>(text).message,
               Catch::Contains("Invoke") && Catch::Contains("claims 107374182400"));
  }
  SECTION("a truncated frame, then the client goes away") {
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address(address->first), address->second});
    asio::write(s, asio::buffer(header(MessageType::kInvoke, 100, kProtocolVersion) + "abc"));
    s.close();
  }
  CHECK(stillServes());
  CHECK(node.running());
}
