#include "cluster/transport/transport.h"

#include <catch2/catch.hpp>

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/processors/codec.h>

#include "cluster/transport/messages.h"
#include "cluster/transport/peer.h"
#include "support/eventually.h"

using namespace ingrid;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = 5000ms;  // the most any condition below may take

using ingrid::testing::eventually;  // bounded waits for conditions (support/eventually.h)

// Answers by message type: Hello -> Hello (or an error if refuseHello), Invoke -> echo,
// Join -> error join_refused, Heartbeat -> no answer, Leave -> closes the connection.
class TestHandler : public ConnectionHandler {
 public:
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override {
    const FrameHeader& h = frame.header;
    if (refuseOverLimit && conn->overLimit) {  // as a node does for all but members' links
      conn->refuse(Error(Errc::overloaded, "this connection is past the limit"));
      return;
    }
    {
      std::lock_guard lock(mu);
      if (conn->peerId == 0) {  // first frame on this connection
        // peerId marks the connection as seen; with markEveryPeer off only a Hello does, as a
        // member's Hello does on a node (what idle timeouts and queue limits exempt).
        if (markEveryPeer || h.type == MessageType::kHello) conn->peerId = 1;
        firstTypes.push_back(h.type);
      }
      ++counts[h.type];
      if (h.type == MessageType::kHello) helloBodies.push_back(frame.body);
      if (h.type == MessageType::kRaft) raftFlags.push_back(h.flags);
    }
    switch (h.type) {
      case MessageType::kHello:
        if (refuseHello) {
          conn->replyError(h, Error(Errc::join_refused, "go away"));
          return;
        }
        conn->reply(h, MessageType::kHello, 0, "welcome");
        if (onHello) onHello(conn);
        return;
      case MessageType::kInvoke:
        conn->reply(h, MessageType::kInvoke, 7, std::move(frame.body));
        return;
      case MessageType::kJoin:
        conn->replyError(h, Error(Errc::join_refused, "no room for " + frame.body));
        return;
      case MessageType::kHeartbeat:
        return;
      case MessageType::kLeave:
        conn->close(Error(Errc::shutting_down, "test closes on Leave"));
        return;
      default:
        conn->replyError(h, Error(Errc::protocol_error, "unexpected"));
    }
  }
  void onClosed(const std::shared_ptr<Connection>&, const Error& why) override {
    {
      std::lock_guard lock(mu);
      closeReasons += why.message() + "\n";
    }
    ++closed;
  }
  std::string reasons() {
    std::lock_guard lock(mu);
    return closeReasons;
  }

  int count(MessageType type) {
    std::lock_guard lock(mu);
    return counts[type];
  }

  std::atomic<bool> refuseHello{false};
  std::atomic<bool> markEveryPeer{true};
  std::atomic<bool> refuseOverLimit{false};
  std::function<void(const std::shared_ptr<Connection>&)> onHello;  // set before traffic
  std::atomic<int> closed{0};
  std::mutex mu;
  std::vector<MessageType> firstTypes;   // guarded by mu
  std::vector<std::string> helloBodies;  // guarded by mu
  std::vector<std::uint16_t> raftFlags;  // each Raft frame's flags, guarded by mu
  std::map<MessageType, int> counts;     // guarded by mu
  std::string closeReasons;              // guarded by mu
};

// A transport with its own io_context and network thread.
struct Net {
  explicit Net(TransportOptions options = {}, bool listen = true)
      : transport(io, options, handler) {
    if (listen) REQUIRE(transport.listen().ok());
    thread = std::thread([this] {
      io.run();
      ran_out = true;
    });
  }
  ~Net() { shutdown(); }
  // Stops the transport and lets the io_context run out (bounded).
  void shutdown() {
    if (!thread.joinable()) return;
    transport.stop();
    guard.reset();
    const bool drained = eventually([this] { return ran_out.load(); });
    if (!drained) io.stop();
    thread.join();
    CHECK(drained);
  }
  std::string address() const { return transport.listenAddress(); }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  TestHandler handler;
  Transport transport;
  std::atomic<bool> ran_out{false};
  std::thread thread;
};

Result<std::shared_ptr<Connection>> tryDial(Transport& transport, const std::string& address) {
  auto p = std::make_shared<std::promise<Result<std::shared_ptr<Connection>>>>();
  auto f = p->get_future();
  transport.connect(address, [p](Result<std::shared_ptr<Connection>> r) { p->set_value(r); });
  REQUIRE(f.wait_for(kWait) == std::future_status::ready);
  return f.get();
}

std::shared_ptr<Connection> dial(Transport& transport, const std::string& address) {
  auto r = tryDial(transport, address);
  REQUIRE(r.ok());
  return r.value();
}

using Reply = std::future<Result<Frame>>;

template <class Target>
Reply send(Target& target, MessageType type, std::string body,
           std::chrono::milliseconds timeout = kWait) {
  auto p = std::make_shared<std::promise<Result<Frame>>>();
  auto f = p->get_future();
  target->request(type, 3, std::move(body), timeout, [p](Result<Frame> r) { p->set_value(r); });
  return f;
}

Result<Frame> get(Reply& reply, std::chrono::milliseconds limit = 2 * kWait) {
  REQUIRE(reply.wait_for(limit) == std::future_status::ready);
  return reply.get();
}

// The reply's body, or "error: ..." (for readable failures).
std::string answer(Reply& reply) {
  auto r = get(reply);
  return r.ok() ? r->body : "error: " + r.error().message();
}

std::uint16_t freePort() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// A plain socket that writes whatever bytes a test wants and reads with a deadline.
class ByteSocket {
 public:
  explicit ByteSocket(std::uint16_t port) : socket_(io_) {
    socket_.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  // Takes a connection already waiting in `acceptor`'s backlog (so the accept cannot block).
  explicit ByteSocket(asio::ip::tcp::acceptor& acceptor) : socket_(io_) {
    acceptor.accept(socket_);
  }
  void send(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  std::error_code trySend(const std::string& bytes) {
    std::error_code ec;
    asio::write(socket_, asio::buffer(bytes), ec);
    return ec;
  }
  void close() { socket_.close(); }
  void shutdownSend() { socket_.shutdown(asio::ip::tcp::socket::shutdown_send); }

  std::error_code read(std::string& out, std::size_t n) {
    out.assign(n, '\0');
    std::error_code result;
    bool done = false;
    asio::async_read(socket_, asio::buffer(out), [&](const std::error_code& ec, std::size_t got) {
      result = ec;
      done = true;
      out.resize(got);
    });
    io_.restart();
    io_.run_for(kWait);
    if (done) return result;
    socket_.cancel();
    io_.restart();
    io_.run();
    return asio::error::timed_out;
  }

  // Reads one frame that must be an error reply; returns its header and ErrorBody.
  std::pair<FrameHeader, ErrorBody> readErrorReply() {
    std::string bytes;
    REQUIRE_FALSE(read(bytes, kFrameHeaderBytes));
    HeaderBytes raw{};
    std::copy(bytes.begin(), bytes.end(), raw.begin());
    FrameHeader h;
    REQUIRE_FALSE(decodeHeader(raw, kDefaultMaxBodyBytes, h).has_value());
    CHECK(h.isResponse());
    CHECK(h.isError());
    REQUIRE_FALSE(read(bytes, h.bodyLength));
    return {h, decode<ErrorBody>(bytes)};
  }

  std::error_code readEof() {
    std::string bytes;
    return read(bytes, 1);
  }

  // Reads one frame (header validated) and returns it.
  Frame readFrame() {
    std::string bytes;
    REQUIRE_FALSE(read(bytes, kFrameHeaderBytes));
    HeaderBytes raw{};
    std::copy(bytes.begin(), bytes.end(), raw.begin());
    Frame frame;
    REQUIRE_FALSE(decodeHeader(raw, kDefaultMaxBodyBytes, frame.header).has_value());
    REQUIRE_FALSE(read(frame.body, frame.header.bodyLength));
    return frame;
  }

  // True once a write fails: the other side has closed the socket (not just shut it down).
  bool writeFails() {
    std::error_code ec;
    socket_.write_some(asio::buffer("x", 1), ec);
    return static_cast<bool>(ec);
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

std::string headerBytes(const FrameHeader& h) {
  const HeaderBytes raw = encodeHeader(h);
  return std::string(raw.begin(), raw.end());
}

std::string frameBytes(FrameHeader h, const std::string& body) {
  h.bodyLength = static_cast<std::uint32_t>(body.size());
  return headerBytes(h) + body;
}

}  // namespace

TEST_CASE("frame header: layout, round trip and every rejected field", "[cluster][transport]") {
  FrameHeader h;
  h.type = MessageType::kInvoke;
  h.flags = kFlagResponse;
  h.bodyLength = 0x01020304;
  h.requestId = 0x1112131415161718;
  h.topologyVersion = 42;
  const HeaderBytes raw = encodeHeader(h);
  CHECK(std::string(raw.begin(), raw.begin() + 4) == "IGRD");
  CHECK(raw[4] == kProtocolVersion);
  CHECK(raw[6] == 6);
  CHECK(raw[12] == 0x04);
  CHECK(raw[16] == 0x18);
  CHECK(raw[24] == 42);
  FrameHeader back;
  REQUIRE_FALSE(decodeHeader(raw, 1u << 30, back).has_value());
  CHECK(back.type == MessageType::kInvoke);
  CHECK(back.requestId == h.requestId);
  CHECK(back.topologyVersion == 42);
  CHECK(back.isResponse());

  auto rejects = [](FrameHeader bad, Errc code, const std::string& says) {
    FrameHeader out;
    auto error = decodeHeader(encodeHeader(bad), 1000, out);
    REQUIRE(error.has_value());
    CHECK(*error == code);
    CHECK_THAT(error->detail(), Catch::Contains(says));
  };
  FrameHeader bad;
  bad.magic = 0x12345678;
  rejects(bad, Errc::protocol_error, "bad frame magic 0x12345678");
  bad = {};
  bad.version = kProtocolVersion + 1;
  rejects(bad, Errc::protocol_error,
          "protocol version " + std::to_string(kProtocolVersion + 1) +
              " not supported (this node speaks " + std::to_string(kProtocolVersion) + ")");
  bad = {};
  bad.type = static_cast<MessageType>(99);
  rejects(bad, Errc::protocol_error, "unknown message type 99");
  bad.type = static_cast<MessageType>(0);
  rejects(bad, Errc::protocol_error, "unknown message type 0");
  bad = {};
  bad.flags = 0x8;
  rejects(bad, Errc::protocol_error, "unknown frame flags 0x0008");
  bad.flags = kFlagError;
  rejects(bad, Errc::protocol_error, "without response");
  bad.flags = kFlagOneWay;  // a Hello
  rejects(bad, Errc::protocol_error, "on a reply or on a Hello frame (only a Raft request");
  bad.type = MessageType::kRaft;
  bad.flags = kFlagOneWay | kFlagResponse;
  rejects(bad, Errc::protocol_error, "set one-way (0x0004) on a reply");
  FrameHeader oneWay;
  oneWay.type = MessageType::kRaft;
  oneWay.flags = kFlagOneWay;
  FrameHeader decoded;
  CHECK_FALSE(decodeHeader(encodeHeader(oneWay), 1000, decoded).has_value());
  CHECK(decoded.isOneWay());
  bad = {};
  bad.reserved = 5;
  rejects(bad, Errc::protocol_error, "reserved header field is 5, must be 0");
  bad = {};
  bad.bodyLength = 1001;
  rejects(bad, Errc::malformed_message, "frame body of 1001 bytes exceeds the limit of 1000");
  CHECK(std::string(messageTypeName(MessageType::kRedirect)) == "Redirect");
}

TEST_CASE("parseAddress accepts host:port only", "[cluster][transport]") {
  CHECK(parseAddress("127.0.0.1:5701") == std::make_pair(std::string("127.0.0.1"), uint16_t{5701}));
  CHECK(parseAddress("[::1]:80") == std::make_pair(std::string("::1"), uint16_t{80}));
  CHECK(parseAddress("localhost:65535").has_value());
  for (const char* bad :
       {"", "127.0.0.1", ":80", "h:0", "h:65536", "h:8x", "h:", "::1:80", "[]:1"}) {
    INFO(bad);
    CHECK_FALSE(parseAddress(bad).has_value());
  }
}

TEST_CASE("transport: request/reply round trip, error replies and timeouts",
          "[cluster][transport]") {
  Net server;
  Net client({}, /*listen=*/false);
  auto conn = dial(client.transport, server.address());
  CHECK(conn->isOpen());

  auto echo = send(conn, MessageType::kInvoke, "hello");
  auto r = get(echo);
  REQUIRE(r.ok());
  CHECK(r->body == "hello");
  CHECK(r->header.type == MessageType::kInvoke);
  CHECK(r->header.topologyVersion == 7);

  auto refused = send(conn, MessageType::kJoin, "node-9");
  r = get(refused);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::join_refused);
  CHECK(r.error().detail() == "no room for node-9");

  auto silent = send(conn, MessageType::kHeartbeat, "", 100ms);
  r = get(silent);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::timeout);
  CHECK_THAT(r.error().detail(), Catch::Contains("Heartbeat") && Catch::Contains("100 ms"));

  // Still usable after a timeout.
  auto again = send(conn, MessageType::kInvoke, "again");
  CHECK(answer(again) == "again");
}

TEST_CASE("transport: a one-way frame reaches the handler and is never answered",
          "[cluster][transport]") {
  Net server;
  Net client({}, /*listen=*/false);
  auto conn = dial(client.transport, server.address());
  // The handler answers Raft with an error reply; to a one-way frame (request id 0) it would
  // close this connection (a refusal of the connection itself), so none may be sent.
  conn->notify(MessageType::kRaft, 3, "append entries");
  REQUIRE(eventually([&] { return server.handler.count(MessageType::kRaft) == 1; }, kWait));
  auto echo = send(conn, MessageType::kInvoke, "after");
  CHECK(answer(echo) == "after");
  CHECK(conn->isOpen());
  CHECK(server.handler.closed == 0);
}

TEST_CASE("transport: a connection owes an answer from its first unanswered request until a frame",
          "[cluster][transport]") {
  // Heartbeats go unanswered by the test handler; Invokes are echoed.
  Net server;
  Net client({}, /*listen=*/false);
  auto conn = dial(client.transport, server.address());
  const auto owed = [&] {  // read on the connection's own thread
    std::promise<std::chrono::steady_clock::time_point> p;
    asio::post(client.io, [&] { p.set_value(conn->owedSince()); });
    return p.get_future().get();
  };
  using Clock = std::chrono::steady_clock;
  CHECK(owed() == Clock::time_point::max());  // nothing asked

  const auto beforeFirst = Clock::now();
  auto first = send(conn, MessageType::kHeartbeat, "", 50ms);
  REQUIRE_FALSE(get(first).ok());             // timed out, unanswered
  CHECK(owed() == Clock::time_point::max());  // nothing waits now
  const auto beforeSecond = Clock::now();
  auto second = send(conn, MessageType::kHeartbeat, "", kWait);
  // Waiting again, with nothing heard since the first: owed since the first was sent.
  const auto since = owed();
  CHECK(since >= beforeFirst);
  CHECK(since < beforeSecond);

  // Any frame that arrives resets it, though the second still waits.
  const auto beforeEcho = Clock::now();
  auto echo = send(conn, MessageType::kInvoke, "x");
  CHECK(answer(echo) == "x");
  const auto after = owed();
  CHECK(after >= beforeEcho);
  CHECK(after != Clock::time_point::max());
  CHECK(second.wait_for(0s) == std::future_status::timeout);  // still waiting (fails at stop)
}

TEST_CASE("transport: many concurrent requests are correlated", "[cluster][transport]") {
  std::atomic<int> matched{0};  // outlive the client, whose callbacks count here
  std::atomic<int> wrong{0};
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string body = std::to_string(t) + "/" + std::to_string(i);
        conn->request(MessageType::kInvoke, 0, body, kWait, [&, body](Result<Frame> r) {
          (r.ok() && r->body == body ? matched : wrong)++;
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(eventually([&] { return matched + wrong == kThreads * kPerThread; }));
  CHECK(matched == kThreads * kPerThread);
  CHECK(wrong == 0);
}

TEST_CASE("transport: one deadline timer serves requests with mixed timeouts",
          "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  // Unanswered requests, the longest first: the later, shorter ones must re-arm the timer.
  auto forever = send(conn, MessageType::kHeartbeat, "", 60'000ms);
  auto slow = send(conn, MessageType::kHeartbeat, "", 400ms);
  auto fast = send(conn, MessageType::kHeartbeat, "", 50ms);
  // Many answered requests between them leave stale heap entries (and force rebuilds).
  std::vector<Reply> echoes;
  for (int i = 0; i < 500; ++i)
    echoes.push_back(send(conn, MessageType::kInvoke, std::to_string(i)));
  for (int i = 0; i < 500; ++i)
    CHECK(answer(echoes[static_cast<std::size_t>(i)]) == std::to_string(i));

  auto f = get(fast);
  REQUIRE_FALSE(f.ok());
  CHECK(f.error() == Errc::timeout);
  CHECK_THAT(f.error().detail(), Catch::Contains("50 ms"));
  auto s = get(slow);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error() == Errc::timeout);
  CHECK_THAT(s.error().detail(), Catch::Contains("400 ms"));
  // The 60 s one is still pending (not expired with the others); closing fails it at once.
  CHECK(forever.wait_for(0ms) == std::future_status::timeout);
  conn->close(Error(Errc::shutting_down, "test over"));
  auto r = get(forever);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::unreachable);
}

TEST_CASE("transport: a request made on the network thread is queued inline, answered later",
          "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  auto p = std::make_shared<std::promise<Result<Frame>>>();
  auto second = p->get_future();
  std::atomic<bool> returned{false};
  std::atomic<bool> doneInsideCall{false};
  auto first = std::make_shared<std::promise<void>>();
  auto firstDone = first->get_future();
  conn->request(MessageType::kInvoke, 0, "one", kWait, [&, conn, p, first](Result<Frame> r) {
    CHECK(r.ok());
    // On the network thread now: this request skips the post but must not complete inside.
    conn->request(MessageType::kInvoke, 0, "two", kWait, [&, p](Result<Frame> r2) {
      if (!returned) doneInsideCall = true;
      p->set_value(r2);
    });
    returned = true;
    first->set_value();
  });
  REQUIRE(firstDone.wait_for(kWait) == std::future_status::ready);
  REQUIRE(second.wait_for(kWait) == std::future_status::ready);
  auto r = second.get();
  REQUIRE(r.ok());
  CHECK(r->body == "two");
  CHECK_FALSE(doneInsideCall);
}

TEST_CASE("transport: frames queued by several handlers of one round leave in one write",
          "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  Reply warm = send(conn, MessageType::kInvoke, "warm");
  REQUIRE(get(warm).ok());
  constexpr int kRequests = 10;
  std::atomic<int> answered{0};
  std::atomic<std::uint64_t> writesBefore{0};
  asio::post(client.io, [&, conn] {
    writesBefore = conn->TEST_writes();
    // Ten handlers queued together: one round. Each queues a request on the connection's own
    // thread; the first posts the round's end behind the other nine.
    for (int i = 0; i < kRequests; ++i) {
      asio::post(client.io, [&, conn, i] {
        conn->request(MessageType::kInvoke, 0, "r" + std::to_string(i), kWait,
                      [&](Result<Frame> r) {
                        CHECK(r.ok());
                        ++answered;
                      });
      });
    }
  });
  REQUIRE(eventually([&] { return answered.load() == kRequests; }));
  // Read on the connection's thread, which owns the count.
  std::promise<std::uint64_t> writesAfter;
  asio::post(client.io, [&, conn] { writesAfter.set_value(conn->TEST_writes()); });
  auto after = writesAfter.get_future();
  REQUIRE(after.wait_for(kWait) == std::future_status::ready);
  CHECK(after.get() - writesBefore.load() == 1);
}

TEST_CASE("transport: a frame still waiting for its round's end is sent before a close",
          "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  asio::post(client.io, [conn] {
    // Deferred to the end of this round, which the close comes before: it must still leave.
    conn->request(MessageType::kInvoke, 0, "last words", kWait, [](Result<Frame>) {});
    conn->close(Error(Errc::shutting_down, "closed by the test right after queueing"));
  });
  CHECK(eventually([&] { return server.handler.count(MessageType::kInvoke) == 1; }));
}

TEST_CASE(
    "transport: replies larger than the socket's buffers leave whole and in order when the "
    "kernel takes them in parts",
    "[cluster][transport]") {
  Net server;
  ByteSocket client(server.transport.listenPort());
  // 12.5 MiB of echoes sent before any is read: the server's sends fill the socket's buffers, so
  // its writes are taken in part and go on where they stopped, mid-frame.
  constexpr int kFrames = 200;
  auto bodyOf = [](int i) {
    std::string body = "frame " + std::to_string(i) + ":";
    body.resize(64 * 1024 + static_cast<std::size_t>(i) * 7, static_cast<char>('a' + i % 26));
    return body;
  };
  FrameHeader invoke;
  invoke.type = MessageType::kInvoke;
  for (int i = 0; i < kFrames; ++i) {
    invoke.requestId = static_cast<std::uint64_t>(i + 1);
    client.send(frameBytes(invoke, bodyOf(i)));
  }
  for (int i = 0; i < kFrames; ++i) {
    const auto frame = client.readFrame();
    REQUIRE(frame.header.requestId == static_cast<std::uint64_t>(i + 1));
    REQUIRE(frame.body == bodyOf(i));
  }
}

TEST_CASE("transport: a closed connection fails its pending requests", "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto conn = dial(client.transport, server.address());
  auto pending = send(conn, MessageType::kHeartbeat, "");  // never answered
  auto leave = send(conn, MessageType::kLeave, "");        // the server closes the connection
  for (Reply* reply : {&pending, &leave}) {
    auto r = get(*reply);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::unreachable);
    CHECK(r.error().detail() == "connection to " + server.address() + " closed: closed by peer");
  }
  CHECK(eventually([&] { return !conn->isOpen() && client.handler.closed == 1; }));
  auto late = send(conn, MessageType::kInvoke, "x");
  CHECK(get(late).error() == Errc::unreachable);
}

TEST_CASE("transport: oversized request bodies are refused before sending",
          "[cluster][transport]") {
  Net server;
  TransportOptions small;
  small.connection.maxBodyBytes = 1024;
  Net client(small, false);
  auto conn = dial(client.transport, server.address());
  auto big = send(conn, MessageType::kInvoke, std::string(2000, 'x'));
  auto r = get(big);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::malformed_message);
  CHECK_THAT(r.error().detail(), Catch::Contains("2000 bytes exceeds the limit of 1024"));
  CHECK(server.handler.count(MessageType::kInvoke) == 0);
}

TEST_CASE("transport: dial errors, listen errors and stop", "[cluster][transport]") {
  Net server;
  Net client({}, false);
  const std::string nobody = "127.0.0.1:" + std::to_string(freePort());
  auto r1 = tryDial(client.transport, nobody);
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.error() == Errc::unreachable);
  CHECK_THAT(r1.error().detail(), Catch::Contains(nobody));

  auto r2 = tryDial(client.transport, "nonsense");
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error() == Errc::unreachable);
  CHECK_THAT(r2.error().detail(), Catch::Contains("'nonsense'"));

  TransportOptions same;
  same.listenPort = server.transport.listenPort();
  Net clash(same, false);
  auto listened = clash.transport.listen();
  REQUIRE_FALSE(listened.ok());
  CHECK_THAT(listened.error().detail(), Catch::Contains(server.address()));

  client.transport.stop();
  client.transport.stop();  // idempotent
  auto r3 = tryDial(client.transport, server.address());
  REQUIRE_FALSE(r3.ok());
  CHECK(r3.error() == Errc::shutting_down);
}

TEST_CASE("transport: bad frames get an error reply and a close: others carry on",
          "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto good = dial(client.transport, server.address());

  struct Case {
    const char* name;
    std::string bytes;
    bool halfClose;
    std::string says;         // in the ErrorBody message
    std::uint64_t requestId;  // echoed when the magic was right
    MessageType type;         // of the reply
    Errc code;
  };
  std::mt19937 random(12345);
  std::string noise(200, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  noise[0] = 'X';  // never the magic

  FrameHeader huge;
  huge.type = MessageType::kInvoke;
  huge.requestId = 77;
  huge.bodyLength = kDefaultMaxBodyBytes + 1;
  FrameHeader truncated;
  truncated.type = MessageType::kInvoke;
  truncated.requestId = 42;
  truncated.bodyLength = 100;
  FrameHeader unknownType;
  unknownType.type = static_cast<MessageType>(99);
  unknownType.requestId = 5;
  FrameHeader newer;
  newer.version = kProtocolVersion + 1;
  newer.type = MessageType::kInvoke;
  newer.requestId = 6;
  FrameHeader reserved;
  reserved.type = MessageType::kHeartbeat;
  reserved.reserved = 5;
  reserved.requestId = 8;

  const std::vector<Case> cases{
      {"random bytes", noise, false, "bad frame magic", 0, MessageType::kHello,
       Errc::protocol_error},
      {"body too large", headerBytes(huge), false,
       "frame body of 16777217 bytes exceeds the limit of 16777216", 77, MessageType::kInvoke,
       Errc::malformed_message},
      {"truncated body", headerBytes(truncated) + std::string(10, 'b'), true,
       "frame truncated: connection closed after 10 of 100 body bytes", 42, MessageType::kInvoke,
       Errc::malformed_message},
      {"truncated header", std::string("IGRD\x01", 5), true, "after 5 of 32 header bytes", 0,
       MessageType::kHello, Errc::malformed_message},
      {"unknown type", headerBytes(unknownType), false, "unknown message type 99", 5,
       MessageType::kHello, Errc::protocol_error},
      {"wrong version", headerBytes(newer), false,
       "protocol version " + std::to_string(kProtocolVersion + 1) +
           " not supported (this node speaks " + std::to_string(kProtocolVersion) + ")",
       6, MessageType::kInvoke, Errc::protocol_error},
      {"reserved field", headerBytes(reserved), false, "reserved header field is 5, must be 0", 8,
       MessageType::kHeartbeat, Errc::protocol_error},
  };
  int closedBefore = server.handler.closed;
  for (const Case& c : cases) {
    INFO(c.name);
    ByteSocket raw(server.transport.listenPort());
    raw.send(c.bytes);
    if (c.halfClose) raw.shutdownSend();
    auto [header, body] = raw.readErrorReply();
    CHECK(header.requestId == c.requestId);
    CHECK(header.type == c.type);
    CHECK(body.code == static_cast<std::uint16_t>(c.code));
    CHECK_THAT(body.message, Catch::Contains(c.says));
    CHECK(raw.readEof() == asio::error::eof);
    CHECK(eventually([&] { return server.handler.closed == closedBefore + 1; }));
    closedBefore = server.handler.closed;

    auto reply = send(good, MessageType::kInvoke, c.name);
    CHECK(answer(reply) == c.name);
  }

  {  // a truncated frame, then the client vanishes entirely: nothing to answer, no harm done
    ByteSocket raw(server.transport.listenPort());
    raw.send(headerBytes(truncated) + "abc");
  }
  CHECK(eventually([&] { return server.handler.closed == closedBefore + 1; }));
  auto reply = send(good, MessageType::kInvoke, "still here");
  CHECK(answer(reply) == "still here");
  CHECK(server.handler.count(MessageType::kInvoke) == static_cast<int>(cases.size()) + 1);
}

TEST_CASE("transport: a peer that neither reads nor closes is cut off after the linger",
          "[cluster][transport]") {
  Net server;
  ByteSocket raw(server.transport.listenPort());
  FrameHeader bad;
  bad.version = kProtocolVersion + 1;
  raw.send(headerBytes(bad) + std::string(100, 'z'));
  CHECK_THAT(raw.readErrorReply().second.message,
             Catch::Contains("protocol version " + std::to_string(kProtocolVersion + 1)));
  CHECK(raw.readEof() == asio::error::eof);
  // We keep our side open: the server closes anyway, about a second later.
  const auto start = std::chrono::steady_clock::now();
  CHECK(eventually([&] { return raw.writeFails(); }, 3000ms));
  CHECK(std::chrono::steady_clock::now() - start < 2500ms);
}

TEST_CASE("transport: replies are matched by id: unknown ids and bad error bodies handled",
          "[cluster][transport]") {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  Net client({}, false);
  auto conn =
      dial(client.transport, "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()));
  ByteSocket raw(acceptor);  // plays the server

  auto a = send(conn, MessageType::kInvoke, "a");
  auto b = send(conn, MessageType::kJoin, "b");
  auto c = send(conn, MessageType::kJoin, "c");
  const Frame fa = raw.readFrame();
  const Frame fb = raw.readFrame();
  const Frame fc = raw.readFrame();
  CHECK(fa.body == "a");
  CHECK(fa.header.topologyVersion == 3);
  CHECK(fb.header.type == MessageType::kJoin);
  CHECK(fa.header.requestId != fb.header.requestId);

  FrameHeader h;
  h.flags = kFlagResponse;
  h.type = MessageType::kInvoke;
  h.requestId = 999'999;  // nobody asked: ignored
  raw.send(frameBytes(h, "stray"));
  h.flags = kFlagResponse | kFlagError;
  h.requestId = fb.header.requestId;
  raw.send(frameBytes(h, "not an ErrorBody"));
  // An ErrorBody whose string claims a terabyte: refused without allocating it.
  std::string liar = encode(ErrorBody{5, "x"});
  liar[7] = 0x01;  // the u64 length (bytes 3..10) becomes 2^32 + 1
  h.requestId = fc.header.requestId;
  raw.send(frameBytes(h, liar));
  h.flags = kFlagResponse;
  h.requestId = fa.header.requestId;
  raw.send(frameBytes(h, "A!"));

  CHECK(answer(a) == "A!");
  for (Reply* bad : {&b, &c}) {
    auto r = get(*bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::malformed_message);
    CHECK_THAT(r.error().detail(), Catch::Contains("error reply from"));
  }
  CHECK(conn->isOpen());
}

TEST_CASE("peer: queues until the server comes up, says Hello first on every connection",
          "[cluster][transport]") {
  const std::uint16_t port = freePort();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  Net client({}, false);
  PeerOptions options;
  options.backoffMin = 5ms;
  options.backoffMax = 50ms;
  options.helloBody = [] { return std::string("i am the client"); };
  auto peer = Peer::create(client.transport, address, options);

  auto early = send(peer, MessageType::kInvoke, "early", 100ms);  // nobody listens yet
  auto r = get(early);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::unreachable);
  CHECK_THAT(r.error().detail(),
             Catch::Contains("no connection to " + address) && Catch::Contains("refused"));

  std::vector<Reply> replies;
  for (int i = 0; i < 5; ++i)
    replies.push_back(send(peer, MessageType::kInvoke, std::to_string(i)));
  TransportOptions at;
  at.listenPort = port;
  {
    Net server(at);
    for (int i = 0; i < 5; ++i) CHECK(answer(replies[i]) == std::to_string(i));
    CHECK(peer->connected());

    // The server drops the connection while a request is in flight: that request fails and is
    // not re-sent; the peer reconnects, again with Hello first.
    auto leave = send(peer, MessageType::kLeave, "");
    CHECK(get(leave).error() == Errc::unreachable);
    CHECK(eventually([&] { return server.handler.count(MessageType::kHello) == 2; }));
    auto after = send(peer, MessageType::kInvoke, "after");
    CHECK(answer(after) == "after");
    CHECK(server.handler.count(MessageType::kLeave) == 1);
    std::lock_guard lock(server.handler.mu);
    CHECK(server.handler.firstTypes ==
          std::vector<MessageType>{MessageType::kHello, MessageType::kHello});
    CHECK(server.handler.helloBodies ==
          std::vector<std::string>{"i am the client", "i am the client"});
  }
  // Server down: requests queue again and go out once it is back on the same port.
  CHECK(eventually([&] { return !peer->connected(); }));
  auto whileDown = send(peer, MessageType::kInvoke, "while down");
  Net again(at);
  CHECK(answer(whileDown) == "while down");
  peer->close();
}

TEST_CASE("peer: a one-way frame waits for a link as a request, then goes one-way",
          "[cluster][transport]") {
  const std::uint16_t port = freePort();
  Net client({}, false);
  PeerOptions options;
  options.backoffMin = 5ms;
  options.backoffMax = 50ms;
  auto peer = Peer::create(client.transport, "127.0.0.1:" + std::to_string(port), options);
  peer->notify(MessageType::kRaft, 1, "before the link", 5000ms);  // nobody listens yet
  TransportOptions at;
  at.listenPort = port;
  Net server(at);
  REQUIRE(eventually([&] { return server.handler.count(MessageType::kRaft) == 1; }, kWait));
  REQUIRE(eventually([&] { return peer->connected(); }, kWait));
  peer->notify(MessageType::kRaft, 1, "on the link", 5000ms);
  REQUIRE(eventually([&] { return server.handler.count(MessageType::kRaft) == 2; }, kWait));
  {
    std::lock_guard lock(server.handler.mu);
    // The first was queued for the link and sent as an ordinary request (its error reply,
    // the test handler's answer to Raft, is ignored); the second one-way, and not answered.
    CHECK(server.handler.raftFlags == std::vector<std::uint16_t>{0, kFlagOneWay});
  }
  auto after = send(peer, MessageType::kInvoke, "after");
  CHECK(answer(after) == "after");
  CHECK(server.handler.closed == 0);
  peer->close();
}

TEST_CASE("peer: queue bounds, deadlines, refused Hello and close", "[cluster][transport]") {
  Net client({}, false);
  const std::string nobody = "127.0.0.1:" + std::to_string(freePort());
  PeerOptions options;
  options.maxQueued = 2;
  options.backoffMin = 5ms;
  options.backoffMax = 20ms;
  auto peer = Peer::create(client.transport, nobody, options);
  auto first = send(peer, MessageType::kInvoke, "1");
  auto second = send(peer, MessageType::kInvoke, "2");
  auto third = send(peer, MessageType::kInvoke, "3");
  auto r = get(third, 1000ms);
  CHECK(r.error() == Errc::overloaded);
  CHECK_THAT(r.error().detail(), Catch::Contains(nobody));
  peer->close();
  for (Reply* queued : {&first, &second}) {
    auto q = get(*queued);
    CHECK(q.error() == Errc::shutting_down);
    CHECK_THAT(q.error().detail(), Catch::Contains(nobody));
  }
  auto afterClose = send(peer, MessageType::kInvoke, "4");
  CHECK(get(afterClose).error() == Errc::shutting_down);

  // A Hello answered with an error: the peer closes, backs off, and never becomes ready.
  Net grumpy;
  grumpy.handler.refuseHello = true;
  options.helloBody = [] { return std::string("let me in"); };
  auto refused = Peer::create(client.transport, grumpy.address(), options);
  auto queued = send(refused, MessageType::kInvoke, "x", 300ms);
  r = get(queued);
  CHECK(r.error() == Errc::unreachable);
  CHECK_THAT(r.error().detail(), Catch::Contains("Hello refused") && Catch::Contains("go away"));
  CHECK(grumpy.handler.count(MessageType::kHello) >= 2);  // it kept trying
  CHECK(grumpy.handler.count(MessageType::kInvoke) == 0);
  CHECK_FALSE(refused->connected());
  refused->close();
}

namespace {

// A peer on `server` that does not dial: it adopts each connection that says Hello there.
std::shared_ptr<Peer> adoptingPeer(Net& server) {
  PeerOptions inbound;
  inbound.dial = false;
  auto peer = Peer::create(server.transport, "client", inbound);
  server.handler.onHello =
      [weak = std::weak_ptr<Peer>(peer)](const std::shared_ptr<Connection>& conn) {
        if (auto p = weak.lock()) p->adopt(conn);
      };
  return peer;
}

}  // namespace

TEST_CASE("peer: adopt() serves requests over an inbound connection", "[cluster][transport]") {
  Net server;
  Net client({}, false);
  auto serverSide = adoptingPeer(server);
  auto tooSoon = send(serverSide, MessageType::kInvoke, "nobody yet", 50ms);
  auto early = get(tooSoon);
  CHECK(early.error() == Errc::unreachable);
  CHECK_THAT(early.error().detail(), Catch::Contains("waiting for the peer to connect to us"));
  auto waiting = send(serverSide, MessageType::kInvoke, "to the client");

  PeerOptions dialer;
  dialer.helloBody = [] { return std::string("hi"); };
  auto clientSide = Peer::create(client.transport, server.address(), dialer);
  auto r = get(waiting);
  REQUIRE(r.ok());
  CHECK(r->body == "to the client");
  CHECK(client.handler.count(MessageType::kInvoke) == 1);
  CHECK(serverSide->connected());
  CHECK(eventually([&] { return clientSide->connected(); }));
  auto back = send(clientSide, MessageType::kInvoke, "to the server");
  CHECK(answer(back) == "to the server");
  clientSide->close();
  serverSide->close();
}

TEST_CASE("peer: a second inbound connection is a spare that takes over when the first closes",
          "[cluster][transport]") {
  // What a restarted member meets: a stale link dialed to its address (a former member's) is
  // adopted first, then the real one; the stale one's owner closes it, and only the other side
  // dials, so without the spare nothing would carry this side's frames any more.
  Net server;
  Net client({}, false);
  auto serverSide = adoptingPeer(server);
  const auto stale = dial(client.transport, server.address());
  auto staleHello = send(stale, MessageType::kHello, "stale");
  REQUIRE(answer(staleHello) == "welcome");
  REQUIRE(eventually([&] { return serverSide->connected(); }));
  const auto real = dial(client.transport, server.address());
  auto realHello = send(real, MessageType::kHello, "real");
  REQUIRE(answer(realHello) == "welcome");
  // Adopted on the network thread after the Hello's reply: a request queued behind it there runs
  // after the adoption, and still goes over the older connection.
  auto overOlder = send(serverSide, MessageType::kInvoke, "over the older");
  REQUIRE(answer(overOlder) == "over the older");
  CHECK(client.handler.count(MessageType::kInvoke) == 1);

  stale->close(Error(Errc::unavailable, "a stale link, closed by its owner"));
  CHECK(eventually([&] {
    auto overSpare = send(serverSide, MessageType::kInvoke, "over the spare", 200ms);
    auto r = get(overSpare);
    return r.ok() && r->body == "over the spare";
  }));
  CHECK(real->isOpen());
  serverSide->close();
  CHECK(eventually([&] { return !real->isOpen(); }));  // a closed peer closes its spare too
}

TEST_CASE("transport: a transport listening on one address dials from it", "[cluster][transport]") {
  TransportOptions at2;
  at2.listenHost = "127.0.0.2";  // all of 127/8 is this host's loopback on Linux
  at2.listenPort = 0;
  {
    asio::io_context probe;
    std::error_code ec;
    asio::ip::tcp::acceptor a(probe);
    a.open(asio::ip::tcp::v4(), ec);
    if (!ec) a.bind({asio::ip::make_address("127.0.0.2"), 0}, ec);
    if (ec) {
      WARN("skipped: cannot bind 127.0.0.2 here: " << ec.message());
      return;
    }
  }
  Net server;  // 127.0.0.1
  std::promise<std::string> seen;
  server.handler.onHello = [&seen](const std::shared_ptr<Connection>& c) {
    seen.set_value(c->remote());
  };
  Net member(at2);
  auto conn = dial(member.transport, server.address());
  auto hello = send(conn, MessageType::kHello, "");
  CHECK(answer(hello) == "welcome");
  auto from = seen.get_future();
  REQUIRE(from.wait_for(kWait) == std::future_status::ready);
  CHECK_THAT(from.get(), Catch::StartsWith("127.0.0.2:"));

  // A transport that only dials (a client) leaves from wherever the system routes it.
  Net client({}, /*listen=*/false);
  auto plain = dial(client.transport, server.address());
  CHECK(plain->isOpen());
}

TEST_CASE("transport: accepted connections that stay silent or go idle are closed, naming why",
          "[cluster][transport][limits]") {
  TransportOptions options;
  options.handshakeTimeout = 200ms;
  options.idleTimeout = 300ms;
  Net server(options);
  server.handler.markEveryPeer = false;  // only a Hello makes a connection a member's
  const std::uint16_t port = server.transport.listenPort();
  auto closedFor = [&](const std::string& why) {
    return eventually([&] { return server.handler.reasons().find(why) != std::string::npos; });
  };

  SECTION("a partial header is cut off at the handshake timeout") {
    ByteSocket raw(port);
    raw.send(std::string(5, 'x'));
    CHECK(raw.readEof() == asio::error::eof);  // not asio::error::timed_out (5 s)
    CHECK(closedFor("within 200 ms of connecting (handshake timeout)"));
  }
  SECTION("a client that goes quiet is closed at the idle timeout; a member is not") {
    ByteSocket member(port);
    FrameHeader hello;
    hello.type = MessageType::kHello;
    hello.requestId = 1;
    member.send(frameBytes(hello, "member"));
    CHECK(member.readFrame().body == "welcome");
    ByteSocket client(port);
    FrameHeader invoke;
    invoke.type = MessageType::kInvoke;
    invoke.requestId = 1;
    client.send(frameBytes(invoke, "hi"));
    CHECK(client.readFrame().body == "hi");
    CHECK(client.readEof() == asio::error::eof);
    CHECK(closedFor("(idle timeout)"));
    // The member spoke first, so it has been quiet longer than the client was: still served.
    invoke.requestId = 2;
    member.send(frameBytes(invoke, "still here"));
    CHECK(member.readFrame().body == "still here");
  }
}

TEST_CASE(
    "transport: connections past maxConnections are marked for their owner, whose "
    "refusal the dialer takes as its close reason: a peer that does not read is cut off",
    "[cluster][transport][limits]") {
  TransportOptions options;
  options.maxConnections = 3;
  options.maxQueuedBytes = std::size_t{1} << 20;
  Net server(options);
  server.handler.markEveryPeer = false;
  server.handler.refuseOverLimit = true;
  const std::uint16_t port = server.transport.listenPort();
  FrameHeader invoke;
  invoke.type = MessageType::kInvoke;
  invoke.requestId = 1;

  SECTION("past maxConnections") {
    std::vector<std::unique_ptr<ByteSocket>> open;
    for (int i = 0; i < 3; ++i) {
      open.push_back(std::make_unique<ByteSocket>(port));
      open.back()->send(frameBytes(invoke, "ok"));
      CHECK(open.back()->readFrame().body == "ok");
    }
    ByteSocket extra(port);
    extra.send(frameBytes(invoke, "over"));
    const auto [header, body] = extra.readErrorReply();
    CHECK(header.requestId == 0);
    CHECK(body.code == static_cast<std::uint16_t>(Errc::overloaded));
    CHECK_THAT(body.message, Catch::Contains("past the limit"));
    CHECK(extra.readEof() == asio::error::eof);

    // A Connection (what members and clients use) takes the refusal as its close reason.
    Net dialer({}, /*listen=*/false);
    auto refused = dial(dialer.transport, server.address());
    Reply r = send(refused, MessageType::kInvoke, "x");
    CHECK_THAT(answer(r), Catch::Contains("past the limit"));

    // Once one closes (the server sees its EOF), a new connection is served again.
    open.front()->close();
    bool served = false;
    for (int attempt = 0; attempt < 100 && !served; ++attempt) {
      ByteSocket next(port);
      next.send(frameBytes(invoke, "in"));
      served = !next.readFrame().header.isError();
    }
    CHECK(served);
  }
  SECTION("a client that sends but does not read is disconnected past maxQueuedBytes") {
    ByteSocket hog(port);
    const std::string big(64 * 1024, 'b');
    std::error_code ec;
    for (int i = 0; i < 400 && !ec; ++i) {  // 25 MiB of echoes, more than the socket buffers
      invoke.requestId = static_cast<std::uint64_t>(i + 1);
      ec = hog.trySend(frameBytes(invoke, big));
    }
    CHECK(eventually([&] {
      return server.handler.reasons().find("does not read what is sent to it") != std::string::npos;
    }));
    // The server goes on serving others.
    ByteSocket other(port);
    invoke.requestId = 1;
    other.send(frameBytes(invoke, "fine"));
    CHECK(other.readFrame().body == "fine");
  }
}

TEST_CASE(
    "transport: connections that announce large frames and trickle them hold at most "
    "maxBufferedBytes in all: past it a frame is refused, naming the limit, and others are served",
    "[cluster][transport][limits]") {
  constexpr std::size_t kLimit = std::size_t{4} << 20;
  constexpr int kTricklers = 16;
  TransportOptions options;
  options.maxBufferedBytes = kLimit;
  Net server(options);
  server.handler.markEveryPeer = false;  // no Hello: none of them is a member
  const std::uint16_t port = server.transport.listenPort();
  auto refusals = [&] {
    const std::string reasons = server.handler.reasons();
    int n = 0;
    for (auto at = reasons.find("(maxBufferedBytes)"); at != std::string::npos;
         at = reasons.find("(maxBufferedBytes)", at + 1)) {
      ++n;
    }
    return n;
  };

  // Each announces an 8 MiB Invoke and sends 1 MiB of it: a buffer of at least 2 MiB each (it
  // doubles from 16 KiB), so at most two fit under 4 MiB and the other fourteen are refused.
  FrameHeader invoke;
  invoke.type = MessageType::kInvoke;
  invoke.requestId = 9;
  invoke.bodyLength = 8u << 20;
  const std::string part(std::size_t{1} << 20, 't');
  std::vector<std::unique_ptr<ByteSocket>> tricklers;
  for (int i = 0; i < kTricklers; ++i) {
    tricklers.push_back(std::make_unique<ByteSocket>(port));
    tricklers.back()->send(headerBytes(invoke));
    for (std::size_t sent = 0; sent < part.size(); sent += 64 * 1024) {  // trickle in pieces
      CHECK_FALSE(tricklers.back()->trySend(part.substr(sent, 64 * 1024)));
    }
  }
  CHECK(eventually([&] { return refusals() >= kTricklers - 2; }));
  CHECK(server.transport.bufferedBytes() <= kLimit);
  CHECK(server.transport.bufferedBytesPeak() <= kLimit);
  CHECK(server.transport.bufferedBytesPeak() >= (std::size_t{2} << 20) - kReadChunkBytes);

  // One more, whose frame needs a 4 MiB buffer while at least one trickler holds 2 MiB: it is
  // told why, in an error reply to its frame.
  {
    ByteSocket greedy(port);
    invoke.requestId = 10;
    greedy.send(headerBytes(invoke));
    (void)greedy.trySend(std::string((std::size_t{2} << 20) + 1, 'g'));
    const auto [header, body] = greedy.readErrorReply();
    CHECK(header.requestId == 10);
    CHECK(body.code == static_cast<std::uint16_t>(Errc::overloaded));
    CHECK_THAT(body.message, Catch::Contains("past the limit of 4194304 (maxBufferedBytes)"));
  }

  // A normal client is served meanwhile, with a frame that fits the buffer it starts with.
  ByteSocket other(port);
  FrameHeader small;
  small.type = MessageType::kInvoke;
  small.requestId = 1;
  other.send(frameBytes(small, "still served"));
  CHECK(other.readFrame().body == "still served");

  // Closing the held ones gives their bytes back.
  tricklers.clear();
  CHECK(eventually([&] { return server.transport.bufferedBytes() == 0; }));
  CHECK(server.transport.bufferedBytesPeak() <= kLimit);
}

TEST_CASE("An Invoke encodes from views as from strings, and is read in place as decoded",
          "[cluster][transport]") {
  const InvokeRequest request{"api-key:42",
                              "ingrid.TokenBucketAcquire",
                              std::string("\x01\x00\x02", 3),
                              0x1234567890abcdefull,
                              42,
                              40,
                              5000,
                              1'790'000'000'123};
  const std::string bytes = encode(request);
  const InvokeRequestView view{request.key,       request.processor,     request.args,
                               request.client,    request.seq,           request.doneBelow,
                               request.timeoutMs, request.deadlineUnixMs};
  CHECK(encode(view) == bytes);
  CHECK(view.encodedSize() == bytes.size());  // what a pooled body is taken for
  CHECK(encode(InvokeReply{"an answer"}).size() == InvokeReply::kFixedBytes + 9);
  const InvokeRequestSpans spans = InvokeRequestSpans::of(bytes);
  CHECK(spans.key.in(bytes) == request.key);
  CHECK(spans.processor.in(bytes) == request.processor);
  CHECK(spans.args.in(bytes) == request.args);
  CHECK(spans.client == request.client);
  CHECK(spans.seq == request.seq);
  CHECK(spans.doneBelow == request.doneBelow);
  CHECK(spans.timeoutMs == request.timeoutMs);
  CHECK(spans.deadlineUnixMs == request.deadlineUnixMs);
  // Refused as the decoder refuses: truncated, a length past the end, trailing bytes, a bad flag.
  CHECK_THROWS_WITH(InvokeRequestSpans::of(bytes.substr(0, bytes.size() - 1)),
                    Catch::Contains("it ends inside deadlineUnixMs"));
  CHECK_THROWS_WITH(InvokeRequestSpans::of(bytes.substr(0, bytes.size() - 9)),
                    Catch::Contains("it ends inside timeoutMs"));
  const std::size_t argsEnd = bytes.size() - 36;  // four u64 and a u32 follow the arguments
  CHECK_THROWS_WITH(InvokeRequestSpans::of(bytes.substr(0, argsEnd - 1)),
                    Catch::Contains("the arguments claims 3 bytes; 2 remain"));
  CHECK_THROWS_WITH(InvokeRequestSpans::of(bytes.substr(0, 5)),
                    Catch::Contains("ends inside the length of the key"));
  CHECK_THROWS_WITH(InvokeRequestSpans::of(bytes + "x"), Catch::Contains("1 trailing bytes"));
  std::string badFlag = bytes;
  badFlag[0] = 2;
  CHECK_THROWS_WITH(InvokeRequestSpans::of(badFlag), Catch::Contains("byte-order flag"));
  CHECK_THROWS(InvokeRequestSpans::of(""));
}
