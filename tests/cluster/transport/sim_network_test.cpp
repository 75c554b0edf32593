#include "cluster/transport/sim_network.h"

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/buffer.hpp>
#include <asio/error.hpp>

#include "cluster/transport/connection.h"
#include "cluster/transport/frame_faults.h"
#include "cluster/transport/transport.h"
#include "support/manual_sim.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::ManualSim;

namespace {

constexpr const char* kHostA = "10.0.0.1";
constexpr const char* kHostB = "10.0.0.2";

SimNetwork::Options latency(SteadyTime::duration min, SteadyTime::duration max) {
  SimNetwork::Options options;
  options.minLatency = min;
  options.maxLatency = max;
  return options;
}

std::int64_t msSince(SteadyTime start, SteadyTime at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at - start).count();
}

// Reads a SimStream until an error, keeping what arrived and when.
struct Sink {
  Sink(ManualSim& s, SimStream& st) : sim(s), stream(st) {}

  ManualSim& sim;
  SimStream& stream;
  std::string got;
  std::vector<std::pair<SteadyTime, std::string>> arrivals;
  std::optional<std::error_code> ended;
  std::array<char, 64> buf{};

  void read() {
    stream.asyncReadSome(asio::buffer(buf), [this](const std::error_code& ec, std::size_t n) {
      if (ec) {
        ended = ec;
        return;
      }
      got.append(buf.data(), n);
      arrivals.emplace_back(sim.now(), std::string(buf.data(), n));
      read();
    });
  }
};

// A connected pair of SimStreams: A dials B's listener.
struct Pair {
  std::optional<SimStream> client, server;
};

Pair connectPair(ManualSim& sim, ManualSim::Member& a, ManualSim::Member& b,
                 SimAcceptor& acceptor) {
  Pair pair;
  std::error_code ec;
  const std::uint16_t port = acceptor.listen(kHostB, 0, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(port == SimNetwork::kFirstListenPort);
  acceptor.asyncAccept([&](const std::error_code& acceptEc, SimStream s) {
    REQUIRE_FALSE(acceptEc);
    pair.server.emplace(std::move(s));
  });
  std::optional<std::error_code> connected;
  a.in([&] {
    pair.client.emplace(sim.network(), a, asio::any_io_executor(a.io().get_executor()));
    pair.client->asyncConnect(std::string(kHostB) + ":20000",
                              [&](const std::error_code& e) { connected = e; });
  });
  REQUIRE(sim.runUntil([&] { return connected && pair.server; }, 1s));
  REQUIRE_FALSE(*connected);
  CHECK(pair.client->remoteAddress() == "10.0.0.2:20000");
  CHECK(pair.server->remoteHost() == kHostA);
  (void)b;
  return pair;
}

}  // namespace

TEST_CASE("SimNetwork delivers bytes in order after the latency, then eof", "[transport][sim]") {
  ManualSim sim(latency(5ms, 10ms));
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  SimAcceptor acceptor(sim.network(), b, b.io().get_executor());
  Pair pair = connectPair(sim, a, b, acceptor);
  Sink sink{sim, *pair.server};
  sink.read();

  const SteadyTime sent = sim.now();
  std::error_code ec;
  for (const char* word : {"one", "two", "three", "four"}) {
    pair.client->send(asio::buffer(std::string(word)), ec);
    REQUIRE_FALSE(ec);
    sim.runFor(1ms);  // later writes leave later, with their own draws
  }
  CHECK(sink.got.empty());  // the first left 4 ms ago: less than the least latency
  sim.runFor(30ms);
  CHECK(sink.got == "onetwothreefour");
  REQUIRE_FALSE(sink.arrivals.empty());
  CHECK(msSince(sent, sink.arrivals.front().first) >= 5);
  CHECK(msSince(sent, sink.arrivals.back().first) <= 3 + 10);
  for (std::size_t i = 1; i < sink.arrivals.size(); ++i) {
    CHECK(sink.arrivals[i - 1].first <= sink.arrivals[i].first);
  }
  CHECK(sim.network().bytesDelivered() == 15);
  CHECK(sim.network().writesDelivered() == 4);

  // A close sends FIN after the bytes: the reader gets them, then eof.
  pair.client->send(asio::buffer(std::string("bye")), ec);
  pair.client->close();
  sim.runFor(20ms);
  CHECK(sink.got == "onetwothreefourbye");
  REQUIRE(sink.ended);
  CHECK(*sink.ended == asio::error::eof);
  // After a local close: operations fail at once.
  std::optional<std::error_code> late;
  std::array<char, 4> buf{};
  pair.client->asyncReadSome(asio::buffer(buf),
                             [&](const std::error_code& e, std::size_t) { late = e; });
  sim.poll();
  REQUIRE(late);
  CHECK(*late == asio::error::bad_descriptor);
  pair.client->send(asio::buffer(std::string("x")), ec);
  CHECK(ec == asio::error::bad_descriptor);
}

TEST_CASE("SimNetwork holds bytes across a one-way cut and releases them on heal",
          "[transport][sim]") {
  ManualSim sim(latency(1ms, 2ms));
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  SimAcceptor acceptor(sim.network(), b, b.io().get_executor());
  Pair pair = connectPair(sim, a, b, acceptor);
  Sink atB{sim, *pair.server};
  Sink atA{sim, *pair.client};
  atB.read();
  atA.read();

  sim.network().cut(kHostA, kHostB);
  CHECK(sim.network().isCut(kHostA, kHostB));
  CHECK_FALSE(sim.network().isCut(kHostB, kHostA));
  std::error_code ec;
  pair.client->send(asio::buffer(std::string("held")), ec);
  pair.server->send(asio::buffer(std::string("flows")), ec);
  sim.runFor(10s);
  CHECK(atB.got.empty());  // held, not lost
  CHECK(atA.got == "flows");
  pair.client->send(asio::buffer(std::string("+more")), ec);
  sim.runFor(1s);
  CHECK(atB.got.empty());

  const SteadyTime healed = sim.now();
  sim.network().heal(kHostA, kHostB);
  sim.runFor(10ms);
  CHECK(atB.got == "held+more");
  REQUIRE_FALSE(atB.arrivals.empty());
  CHECK(msSince(healed, atB.arrivals.front().first) >= 1);
  CHECK_FALSE(atB.ended);
}

TEST_CASE("SimNetwork refuses a dial nobody listens for, and a closed listener",
          "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  SimStream dial(sim.network(), a, a.io().get_executor());
  std::optional<std::error_code> result;
  a.in([&] { dial.asyncConnect("10.0.0.2:1234", [&](const std::error_code& e) { result = e; }); });
  REQUIRE(result);
  CHECK(*result == asio::error::connection_refused);

  // Listening, then closed before the SYN lands: refused too.
  SimAcceptor acceptor(sim.network(), b, b.io().get_executor());
  std::error_code ec;
  REQUIRE(acceptor.listen(kHostB, 7000, ec) == 7000);
  SimAcceptor again(sim.network(), b, b.io().get_executor());
  again.listen(kHostB, 7000, ec);
  CHECK(ec == asio::error::address_in_use);
  SimStream second(sim.network(), a, a.io().get_executor());
  result.reset();
  a.in(
      [&] { second.asyncConnect("10.0.0.2:7000", [&](const std::error_code& e) { result = e; }); });
  acceptor.close();
  REQUIRE(sim.runUntil([&] { return result.has_value(); }, 1s));
  CHECK(*result == asio::error::connection_refused);
}

TEST_CASE("SimNetwork resets the connections of a host and of a crashed member",
          "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  SimAcceptor acceptor(sim.network(), b, b.io().get_executor());
  Pair pair = connectPair(sim, a, b, acceptor);
  Sink atB{sim, *pair.server};
  Sink atA{sim, *pair.client};
  atB.read();
  atA.read();
  sim.network().reset(kHostA);
  sim.runFor(10ms);
  REQUIRE(atA.ended);
  CHECK(*atA.ended == asio::error::connection_reset);
  REQUIRE(atB.ended);
  CHECK(*atB.ended == asio::error::connection_reset);

  // A crash of B: its listener goes, A's new dial is refused.
  sim.network().closeAll(b);
  SimStream dial(sim.network(), a, a.io().get_executor());
  std::optional<std::error_code> result;
  a.in([&] { dial.asyncConnect("10.0.0.2:20000", [&](const std::error_code& e) { result = e; }); });
  REQUIRE(result);
  CHECK(*result == asio::error::connection_refused);
}

namespace {

// Echoes every request ("echo:" + body); records closes.
class EchoHandler : public ConnectionHandler {
 public:
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override {
    conn->reply(frame.header, frame.header.type, 0, "echo:" + frame.body);
  }
  void onClosed(const std::shared_ptr<Connection>&, const Error& reason) override {
    closes.push_back(reason.message());
  }
  std::vector<std::string> closes;
};

// Two members, each with a real Transport on the sim network: A dials B, sends requests across,
// cuts, and resets. Returns a trace of what happened, with simulated times.
std::string transportScenario(std::uint64_t seed) {
  ManualSim sim(latency(1ms, 3ms), seed);
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  const SteadyTime start = sim.now();
  std::string trace;
  auto note = [&](const std::string& what) {
    trace += std::to_string(msSince(start, sim.now())) + "ms " + what + "\n";
  };
  EchoHandler handlerA, handlerB;
  TransportOptions options;
  options.listenHost = kHostB;
  auto transportB = b.in([&] { return std::make_unique<Transport>(b.io(), options, handlerB); });
  options.listenHost = kHostA;
  auto transportA = a.in([&] { return std::make_unique<Transport>(a.io(), options, handlerA); });
  auto port = b.in([&] { return transportB->listen(); });
  REQUIRE(port.ok());
  CHECK(*port == SimNetwork::kFirstListenPort);
  CHECK(transportB->listenAddress() == "10.0.0.2:20000");

  std::shared_ptr<Connection> conn;
  a.in([&] {
    transportA->connect(transportB->listenAddress(), [&](Result<std::shared_ptr<Connection>> r) {
      REQUIRE(r.ok());
      conn = *r;
      note("connected to " + conn->remote());
    });
  });
  REQUIRE(sim.runUntil([&] { return conn != nullptr; }, 1s));

  std::optional<Result<Frame>> reply;
  auto ask = [&](const std::string& body, std::chrono::milliseconds timeout) {
    reply.reset();
    a.in([&] {
      conn->request(MessageType::kInvoke, 0, body, timeout, [&](Result<Frame> r) {
        note(r.ok() ? "reply " + r->body : "failed " + r.error().message());
        reply = std::move(r);
      });
    });
  };
  ask("ping", 1000ms);
  REQUIRE(sim.runUntil([&] { return reply.has_value(); }, 1s));
  REQUIRE(reply->ok());
  CHECK((*reply)->body == "echo:ping");

  // Across a cut the request waits for its reply until its deadline, in simulated time.
  sim.network().cut(kHostA, kHostB);
  const SteadyTime asked = sim.now();
  ask("lost", 300ms);
  REQUIRE(sim.runUntil([&] { return reply.has_value(); }, 10s));
  REQUIRE_FALSE(reply->ok());
  CHECK(reply->error() == Errc::timeout);
  CHECK(msSince(asked, sim.now()) == 300);
  // Healed: the held request reaches B, whose answer comes too late to matter; the next works.
  sim.network().heal(kHostA, kHostB);
  ask("again", 1000ms);
  REQUIRE(sim.runUntil([&] { return reply.has_value(); }, 1s));
  REQUIRE(reply->ok());
  CHECK((*reply)->body == "echo:again");

  // A dial across a cut gets no answer: the Transport's connect timeout ends it.
  sim.network().cutBoth(kHostA, kHostB);
  std::optional<Error> dialError;
  const SteadyTime dialed = sim.now();
  a.in([&] {
    transportA->connect(
        transportB->listenAddress(),
        [&](Result<std::shared_ptr<Connection>> r) {
          REQUIRE_FALSE(r.ok());
          dialError = r.error();
          note("dial failed " + r.error().message());
        },
        500ms);
  });
  REQUIRE(sim.runUntil([&] { return dialError.has_value(); }, 10s));
  CHECK(*dialError == Errc::unreachable);
  CHECK(dialError->detail().find("timed out after 500 ms") != std::string::npos);
  CHECK(msSince(dialed, sim.now()) == 500);
  sim.network().healBoth(kHostA, kHostB);

  // A reset of A's host: B's side of the connection closes.
  sim.network().reset(kHostA);
  REQUIRE(sim.runUntil([&] { return !handlerB.closes.empty() && !handlerA.closes.empty(); }, 1s));
  note("B closed: " + handlerB.closes.front());
  note("A closed: " + handlerA.closes.front());
  CHECK_FALSE(conn->isOpen());

  note("delivered " + std::to_string(sim.network().bytesDelivered()) + " bytes in " +
       std::to_string(sim.network().writesDelivered()) + " writes");
  a.in([&] { transportA->stop(); });
  b.in([&] { transportB->stop(); });
  sim.runFor(1s);
  conn.reset();
  transportA.reset();
  transportB.reset();
  return trace;
}

// Dials `address` from `transport` on member `m` and runs until the connection is open (1 s).
std::shared_ptr<Connection> dial(ManualSim& sim, ManualSim::Member& m, Transport& transport,
                                 const std::string& address) {
  std::shared_ptr<Connection> conn;
  m.in([&] {
    transport.connect(address, [&](Result<std::shared_ptr<Connection>> r) {
      REQUIRE(r.ok());
      conn = *r;
    });
  });
  REQUIRE(sim.runUntil([&] { return conn != nullptr; }, 1s));
  return conn;
}

// Dials `address`, which must refuse, and returns the error (1 s).
Error dialRefused(ManualSim& sim, ManualSim::Member& m, Transport& transport,
                  const std::string& address) {
  std::optional<Error> error;
  m.in([&] {
    transport.connect(address, [&](Result<std::shared_ptr<Connection>> r) {
      REQUIRE_FALSE(r.ok());
      error = r.error();
    });
  });
  REQUIRE(sim.runUntil([&] { return error.has_value(); }, 1s));
  return *error;
}

// Sends one kInvoke request on `conn` from member `m` and runs until its answer (1 s).
Result<Frame> ask(ManualSim& sim, ManualSim::Member& m, Connection& conn, std::string body,
                  std::chrono::milliseconds timeout) {
  std::optional<Result<Frame>> reply;
  m.in([&] {
    conn.request(MessageType::kInvoke, 0, std::move(body), timeout,
                 [&](Result<Frame> r) { reply = std::move(r); });
  });
  REQUIRE(sim.runUntil([&] { return reply.has_value(); }, 1s));
  return std::move(*reply);
}

}  // namespace

TEST_CASE("Transports and Connections exchange requests over the sim network, deterministically",
          "[transport][sim]") {
  const std::string first = transportScenario(7);
  INFO(first);
  CHECK(first.find("reply echo:ping") != std::string::npos);
  CHECK(first.find("reply echo:again") != std::string::npos);
  CHECK(first.find("B closed: ") != std::string::npos);
  CHECK(transportScenario(7) == first);
}

TEST_CASE("Transport refuses TLS in a simulation", "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  EchoHandler handler;
  TransportOptions options;
  options.listenHost = kHostA;
  options.tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls);
  auto transport = a.in([&] { return std::make_unique<Transport>(a.io(), options, handler); });
  auto port = a.in([&] { return transport->listen(); });
  REQUIRE_FALSE(port.ok());
  CHECK(port.error() == Errc::invalid_configuration);
  CHECK(port.error().detail().find("TLS") != std::string::npos);
}

TEST_CASE("FrameFaults judge a simulated connection by the hosts of its ends", "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  EchoHandler handlerA, handlerB;
  auto faults = std::make_shared<FrameFaults>();
  FrameFaults::Rule rule;
  rule.from = kHostA;
  rule.to = kHostB;
  rule.cut = true;
  const int ruleId = faults->add(rule);
  TransportOptions options;
  options.listenHost = kHostB;
  auto transportB = b.in([&] { return std::make_unique<Transport>(b.io(), options, handlerB); });
  REQUIRE(b.in([&] { return transportB->listen(); }).ok());
  options.listenHost = kHostA;
  options.connection.faults = faults;
  auto transportA = a.in([&] { return std::make_unique<Transport>(a.io(), options, handlerA); });
  const auto conn = dial(sim, a, *transportA, transportB->listenAddress());

  Result<Frame> reply = ask(sim, a, *conn, "x", 200ms);
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.error() == Errc::timeout);
  CHECK(faults->counts().dropped == 1);
  faults->remove(ruleId);
  reply = ask(sim, a, *conn, "x", 200ms);
  REQUIRE(reply.ok());
  CHECK(reply->body == "echo:x");

  a.in([&] { transportA->stop(); });
  b.in([&] { transportB->stop(); });
  sim.runFor(1s);
}

TEST_CASE("A crashed member's connections reset at its peers, its handlers never run",
          "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  EchoHandler handlerA, handlerB;
  TransportOptions options;
  options.listenHost = kHostB;
  auto transportB = b.in([&] { return std::make_unique<Transport>(b.io(), options, handlerB); });
  REQUIRE(b.in([&] { return transportB->listen(); }).ok());
  options.listenHost = kHostA;
  auto transportA = a.in([&] { return std::make_unique<Transport>(a.io(), options, handlerA); });
  const auto conn = dial(sim, a, *transportA, transportB->listenAddress());
  REQUIRE(ask(sim, a, *conn, "x", 1000ms).ok());

  sim.network().closeAll(b);  // B crashes
  REQUIRE(sim.runUntil([&] { return !handlerA.closes.empty(); }, 1s));
  CHECK(handlerA.closes.front().find("reset") != std::string::npos);
  CHECK(handlerB.closes.empty());
  // Its port is gone: a new dial is refused.
  CHECK(dialRefused(sim, a, *transportA, transportB->listenAddress()).detail().find("refused") !=
        std::string::npos);
  a.in([&] { transportA->stop(); });
}

TEST_CASE("A pending simulated read keeps its io_context from running out of work",
          "[transport][sim]") {
  ManualSim sim;
  auto& a = sim.add(kHostA);
  auto& b = sim.add(kHostB);
  SimAcceptor acceptor(sim.network(), b, b.io().get_executor());
  Pair pair = connectPair(sim, a, b, acceptor);
  acceptor.close();
  sim.poll();
  b.io().poll();
  CHECK(b.io().stopped());  // nothing waits on it: poll() stops it, as Asio does

  b.io().restart();
  Sink sink(sim, *pair.server);
  sink.read();
  b.io().poll();
  CHECK_FALSE(b.io().stopped());  // as a socket's pending read would
  pair.server->close();           // the read completes, posted, and its work goes
  b.io().poll();
  REQUIRE(sink.ended);
  CHECK(*sink.ended == asio::error::operation_aborted);
  b.io().poll();
  CHECK(b.io().stopped());
}
