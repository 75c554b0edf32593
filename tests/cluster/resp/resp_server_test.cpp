#include "cluster/resp/resp_server.h"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/processors/gcra.h>

#include "support/eventually.h"

using namespace ingrid;

// Every expected reply below follows CL.THROTTLE's rules (docs/operations.md, "RESP gateway";
// docs/gcra.md): with max_burst B, count C and period P seconds, the emission interval is
// E = P/C, the limit L = B + 1 and the tolerance tau = L * E. A request of quantity q at `now`
// is allowed when max(tat, now) + q*E - tau <= now; then tat += q*E. The reply is [limited, L,
// remaining = floor((tau - ttl) / E), retry_after (-1 when allowed, else the wait), reset_after
// = ttl], where ttl is the new (allowed) or unchanged (limited) tat minus now, and durations are
// whole seconds rounded up when at least a millisecond is left over (redis-cell's rounding).
// The periods are long (an hour) so that nothing refills during the test: `now` moves by a few
// milliseconds between requests, which rounding up absorbs.

namespace {

// The scripted sequence of the redis-cli test below, as commands on `key` (one per line) and the
// replies each client prints (elements separated by spaces), derived there rule by rule.
std::string throttleScript(const std::string& key) {
  return "CL.THROTTLE " + key + " 4 5 3600\n" + "CL.THROTTLE " + key + " 4 5 3600 1\n" +
         "CL.THROTTLE " + key + " 4 5 3600 0\n" + "CL.THROTTLE " + key + " 4 5 3600 3\n" +
         "CL.THROTTLE " + key + " 4 5 3600\n" + "CL.THROTTLE " + key + " 4 5 3600\n" +
         "CL.THROTTLE " + key + "-big 4 5 3600 6\n";
}
constexpr const char* kThrottleReplies =
    "0 5 4 -1 720\n0 5 3 -1 1440\n0 5 3 -1 1440\n0 5 0 -1 3600\n1 5 0 720 3600\n"
    "1 5 0 720 3600\n1 5 5 -1 0\n";

// A file under the temporary folder holding `text`, removed when this goes.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name, const std::string& text)
      : path((std::filesystem::temp_directory_path() /
              ("ingrid-resp-" + name + "-" + std::to_string(::getpid())))
                 .string()) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Output (stdout and stderr) of a shell command; REQUIREs it to exit 0.
std::string run(const std::string& command) {
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  INFO(command << " printed:\n" << out);
  REQUIRE(status == 0);
  return out;
}

// A node with one thread for its partitions and its network (ingrid-node --single-thread): a
// server started on it serves on that thread (RespOptions::onNodeThread, the default).
NodeOptions singleThreadNode() {
  NodeOptions o;
  o.listenAddress = "127.0.0.1:0";
  o.partitionsOnNetworkThread = true;
  return o;
}

// The thread that runs `ex`.
std::thread::id threadOf(const asio::io_context::executor_type& ex) {
  std::promise<std::thread::id> id;
  asio::post(ex, [&id] { id.set_value(std::this_thread::get_id()); });
  return id.get_future().get();
}

struct Gateway {
  Node node;
  RespServer server;
  std::uint16_t port = 0;

  explicit Gateway(NodeOptions nodeOptions = {}, RespOptions options = {})
      : node(std::move(nodeOptions)), server(node, options) {
    REQUIRE(node.start());
    auto p = server.start("127.0.0.1:0");
    INFO((p ? "" : p.error().message()));
    REQUIRE(p);
    port = *p;
  }
  // redis-cli's output for one command (not a terminal: one value per line, an error as its line
  // and an empty one).
  std::string cli(const std::string& args) {
    return run("redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + args);
  }
};

// A blocking client connection that gives up reading after 10 s.
struct RawClient {
  asio::io_context io;
  asio::ip::tcp::socket socket{io};

  explicit RawClient(std::uint16_t port) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
    timeval tv{10, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(const std::string& bytes) { asio::write(socket, asio::buffer(bytes)); }
  // Reads until `n` bytes came, or EOF, an error or the timeout.
  std::string read(std::size_t n) {
    std::string got(n, '\0');
    std::error_code ec;
    const std::size_t m = asio::read(socket, asio::buffer(got), ec);
    got.resize(m);
    return got;
  }
  // Whether the server closed the connection (EOF within the timeout).
  bool closedByServer() {
    char c;
    std::error_code ec;
    socket.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof;
  }
};

std::string command(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

std::string throttleReply(int limited, int limit, int remaining, int retry, int reset) {
  return "*5\r\n:" + std::to_string(limited) + "\r\n:" + std::to_string(limit) +
         "\r\n:" + std::to_string(remaining) + "\r\n:" + std::to_string(retry) +
         "\r\n:" + std::to_string(reset) + "\r\n";
}

}  // namespace

TEST_CASE("RESP gateway: redis-cli runs a scripted CL.THROTTLE sequence", "[resp][cluster]") {
  Gateway g;
  CHECK(g.cli("PING") == "PONG\n");
  CHECK(g.cli("PING hi") == "hi\n");
  CHECK(g.cli("ECHO hi") == "hi\n");
  CHECK(g.cli("COMMAND DOCS") == "\n");
  CHECK(g.cli("CLIENT SETNAME me") == "OK\n");
  CHECK(g.cli("HELLO 4") == "NOPROTO unsupported protocol version\n\n");
  CHECK(g.cli("HELLO 2").find("server\ningrid\nversion\n") == 0);

  // max_burst 4, count 5, period 3600: E = 720 s, L = 5, tau = 3600 s.
  // Fresh key, q = 1: tat = now + 720 s; remaining floor((3600 - 720) / 720) = 4; reset 720.
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600") == "0\n5\n4\n-1\n720\n");
  // q = 1: ttl = 1440 s less a few ms, rounded up to 1440; remaining floor(2160+/720) = 3.
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600 1") == "0\n5\n3\n-1\n1440\n");
  // q = 0 peeks: allowed, nothing taken, the same remaining and reset.
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600 0") == "0\n5\n3\n-1\n1440\n");
  // q = 3 takes the rest of the burst: tat = t0 + 3600 s, remaining 0.
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600 3") == "0\n5\n0\n-1\n3600\n");
  // Over the limit: allowed at tat + E - tau = t0 + 720 s, so retry after 720 s (rounded up);
  // nothing written, reset 3600 s. Again: the same answer (a refusal takes nothing).
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600") == "1\n5\n0\n720\n3600\n");
  CHECK(g.cli("CL.THROTTLE burst 4 5 3600") == "1\n5\n0\n720\n3600\n");
  // A quantity above the limit never fits: limited, retry -1; a fresh key's ttl is 0, so
  // remaining floor(3600 / 720) = 5 and reset 0 (redis-cell's own first test case).
  CHECK(g.cli("CL.THROTTLE big 4 5 3600 6") == "1\n5\n5\n-1\n0\n");

  // Arguments: redis-cell's arity and integer parsing; each bad one named with its rule.
  CHECK(g.cli("CL.THROTTLE k 1 2").find("ERR wrong number of arguments for 'cl.throttle'") == 0);
  CHECK(g.cli("CL.THROTTLE k x 5 60") ==
        "ERR CL.THROTTLE max_burst must be an integer, got 'x'\n\n");
  CHECK(g.cli("CL.THROTTLE k 1 5 1.5") ==
        "ERR CL.THROTTLE period must be an integer, got '1.5'\n\n");
  CHECK(g.cli("CL.THROTTLE k -1 5 60") ==
        "ERR CL.THROTTLE max_burst must be in [0, 9223372036854775806], got -1\n\n");
  CHECK(g.cli("CL.THROTTLE k 1 0 60") ==
        "ERR CL.THROTTLE count_per_period must be in [1, 9223372036854775807], got 0\n\n");
  CHECK(g.cli("CL.THROTTLE k 1 5 0") ==
        "ERR CL.THROTTLE period must be in [1, 9223372036], got 0\n\n");
  CHECK(g.cli("CL.THROTTLE k 1 5 60 -1") ==
        "ERR CL.THROTTLE quantity must be in [0, 9223372036854775807], got -1\n\n");
  // A leading '+' is an integer, as Rust's parse reads it in redis-cell.
  CHECK(g.cli("CL.THROTTLE plus +1 +5 +3600") == "0\n2\n1\n-1\n720\n");
}

TEST_CASE("RESP gateway: a limit refills over its period", "[resp][cluster]") {
  Gateway g;
  // max_burst 0, count 1, period 1: E = tau = 1 s, L = 1.
  CHECK(g.cli("CL.THROTTLE r 0 1 1") == "0\n1\n0\n-1\n1\n");
  // Limited until tat = t0 + 1 s: retry and reset a second (rounded up).
  CHECK(g.cli("CL.THROTTLE r 0 1 1") == "1\n1\n0\n1\n1\n");
  // Wait for the refill by peeking (q = 0) until remaining is 1: tat has passed.
  REQUIRE(testing::eventually([&] { return g.cli("CL.THROTTLE r 0 1 1 0") == "0\n1\n1\n-1\n0\n"; },
                              std::chrono::seconds(10)));
  CHECK(g.cli("CL.THROTTLE r 0 1 1") == "0\n1\n0\n-1\n1\n");
}

TEST_CASE("RESP gateway: pipelined commands in one write are all answered in order",
          "[resp][cluster]") {
  const bool nodeThread = GENERATE(false, true);
  INFO("on the node's thread: " << nodeThread);
  Gateway g(nodeThread ? singleThreadNode() : NodeOptions{});
  CHECK(g.server.servesOnNodeThread() == nodeThread);
  RawClient c(g.port);
  // max_burst 9, count 10, period 3600: E = 360 s, L = 10, tau = 3600 s. Twenty requests: the
  // i-th of the first ten is allowed with remaining 9 - i and reset (i + 1) * 360 s; the next
  // ten are limited: retry tat + E - tau - now = 360 s, reset 3600 s.
  std::string bytes = "PING\r\n";
  std::string expected = "+PONG\r\n";
  for (int i = 0; i < 20; ++i) {
    bytes += command({"CL.THROTTLE", "pipe", "9", "10", "3600"});
    expected += i < 10 ? throttleReply(0, 10, 9 - i, -1, (i + 1) * 360)
                       : throttleReply(1, 10, 0, 360, 3600);
  }
  bytes += command({"PING", "done"}) + command({"QUIT"});
  expected += "$4\r\ndone\r\n+OK\r\n";
  const std::uint64_t writesBefore = g.server.counts().writes;
  c.send(bytes);
  CHECK(c.read(expected.size()) == expected);
  CHECK(c.closedByServer());
  if (nodeThread) {
    // Every throttle ran in place (one member, on its thread): the 23 replies leave together, in
    // one write, or two if the 23 commands arrived in two reads.
    CHECK(g.server.counts().writes - writesBefore <= 2);
  }

  // The same through redis-cli --pipe (its report counts the replies and the errors).
  std::string pipeInput;
  for (int i = 0; i < 100; ++i)
    pipeInput += command({"CL.THROTTLE", "cli-pipe", "9", "10", "3600"});
  // In a file of its own under the temporary folder (never the working directory), removed after.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ingrid-resp-pipe-" + std::to_string(::getpid()) + ".bin"))
                               .string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(pipeInput.data(), 1, pipeInput.size(), f);
  std::fclose(f);
  const std::string report = g.cli("--pipe < " + path);
  std::remove(path.c_str());
  CHECK(report.find("errors: 0, replies: 100") != std::string::npos);
  // 10 allowed, then 90 refused: a peek shows the burst spent.
  CHECK(g.cli("CL.THROTTLE cli-pipe 9 10 3600 0") == "0\n10\n0\n-1\n3600\n");
}

TEST_CASE("RESP gateway: on a single-thread node, connections are served on the node's thread",
          "[resp][cluster][threads]") {
  NodeOptions o = singleThreadNode();
  RespOptions r;
  SECTION("by default") {}
  SECTION("onNodeThread false: a thread of the server's own") { r.onNodeThread = false; }
  SECTION("a node with worker threads: a thread of the server's own") {
    o.partitionsOnNetworkThread = false;
    o.workerThreads = 1;
  }
  Gateway g(o, r);
  const bool expectNodeThread = o.partitionsOnNetworkThread && r.onNodeThread;
  CHECK(g.server.servesOnNodeThread() == expectNodeThread);
  CHECK(g.server.TEST_commandThread() == std::thread::id());
  RawClient c(g.port);
  // max_burst 4, count 5, period 3600 on a fresh key: L = 5, remaining 4, reset E = 720 s.
  c.send(command({"CL.THROTTLE", "where", "4", "5", "3600"}));
  CHECK(c.read(throttleReply(0, 5, 4, -1, 720).size()) == throttleReply(0, 5, 4, -1, 720));
  const std::thread::id ranOn = g.server.TEST_commandThread();
  CHECK(ranOn != std::thread::id());
  CHECK(ranOn != std::this_thread::get_id());
  if (const auto ex = g.node.partitionExecutor()) {
    CHECK((ranOn == threadOf(*ex)) == expectNodeThread);
  } else {
    CHECK_FALSE(expectNodeThread);
  }
}

TEST_CASE("RESP gateway: pipelines of many connections on the node's thread stay in order",
          "[resp][cluster][threads]") {
  const bool nodeThread = GENERATE(false, true);
  INFO("on the node's thread: " << nodeThread);
  Gateway g(nodeThread ? singleThreadNode() : NodeOptions{});
  REQUIRE(g.server.servesOnNodeThread() == nodeThread);
  // Each connection pipelines throttles on fresh keys whose max_burst B tells them apart:
  // count 10, period 3600 (E = 360 s), so each is allowed with L = B + 1, remaining B, reset
  // 360 s; between them PINGs with a payload, ECHOs, and a refused argument, each answered at
  // once, without waiting for the node: a reply out of order shows.
  constexpr int kConnections = 8;
  constexpr int kCommands = 40;
  std::vector<std::unique_ptr<RawClient>> clients;
  std::vector<std::string> expected(kConnections);
  for (int k = 0; k < kConnections; ++k) {
    clients.push_back(std::make_unique<RawClient>(g.port));
    std::string bytes;
    for (int i = 0; i < kCommands; ++i) {
      const int burst = 1 + (i + k) % 7;
      const std::string key = "order-" + std::to_string(k) + "-" + std::to_string(i);
      bytes += command({"CL.THROTTLE", key, std::to_string(burst), "10", "3600"});
      expected[k] += throttleReply(0, burst + 1, burst, -1, 360);
      const std::string tag = std::to_string(k) + ":" + std::to_string(i);
      switch (i % 3) {
        case 0:
          bytes += command({"PING", tag});
          break;
        case 1:
          bytes += command({"ECHO", tag});
          break;
        default:
          bytes += command({"CL.THROTTLE", key, "x", "10", "3600"});
          expected[k] += "-ERR CL.THROTTLE max_burst must be an integer, got 'x'\r\n";
          continue;
      }
      expected[k] += "$" + std::to_string(tag.size()) + "\r\n" + tag + "\r\n";
    }
    // Cut inside a command: the rest arrives once the first part has been answered.
    const std::size_t cut = bytes.size() / 2 + 3;
    clients[k]->send(bytes.substr(0, cut));
    clients[k]->send(bytes.substr(cut));
  }
  for (int k = 0; k < kConnections; ++k) {
    INFO("connection " << k);
    CHECK(clients[k]->read(expected[k].size()) == expected[k]);
  }
}

TEST_CASE("RESP gateway: on the node's thread, stop() while it serves callers, many times",
          "[resp][cluster][threads]") {
  Node node(singleThreadNode());
  REQUIRE(node.start());
  for (int round = 0; round < 10; ++round) {
    INFO("round " << round);
    RespServer server(node);
    auto port = server.start("127.0.0.1:0");
    INFO((port ? "" : port.error().message()));
    REQUIRE(port);
    REQUIRE(server.servesOnNodeThread());
    // Callers in a closed loop (one throttle in flight each) until the server closes them, and
    // one connection with a long pipeline, so that stop() finds throttles in flight.
    std::atomic<int> answered{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t) {
      callers.emplace_back([&, t] {
        RawClient c(*port);
        const std::string request =
            command({"CL.THROTTLE", "stop-" + std::to_string(t), "0", "1", "3600"});
        for (;;) {
          std::error_code ec;
          asio::write(c.socket, asio::buffer(request), ec);
          if (ec) return;
          // A reply is six lines ("*5" and five integers); less: the server closed.
          std::string reply;
          for (int lines = 0; lines < 6;) {
            const std::string byte = c.read(1);
            if (byte.empty()) return;
            reply += byte;
            if (byte == "\n") ++lines;
          }
          if (reply.rfind("*5\r\n", 0) != 0) return;
          answered.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    RawClient piped(*port);
    std::string pipeline;
    for (int i = 0; i < 500; ++i) pipeline += command({"CL.THROTTLE", "piped", "5", "1", "3600"});
    piped.send(pipeline);
    REQUIRE(testing::eventually(
        [&] { return answered.load() >= 30 && server.counts().connections == 4; }));
    server.stop();
    for (auto& caller : callers) caller.join();
    CHECK(server.counts().connections == 0);
  }
  // The node kept serving throughout, and stops cleanly after its servers.
  const auto after =
      node.invoke("after", GcraThrottle{GcraParams::perPeriod(5, 3'600'000'000'000), 1});
  REQUIRE(after.ok());
  CHECK(after->remaining == 4);
  node.stop();
}

TEST_CASE("RESP gateway: a pipelined redis-py client", "[resp][cluster]") {
  Gateway g;
  // max_burst 2, count 3, period 3600: E = 1200 s, L = 3. Five requests in one pipeline: three
  // allowed (remaining 2, 1, 0; reset 1200, 2400, 3600), two limited (retry 1200, reset 3600).
  const std::string script =
      "import redis\n"
      "r = redis.Redis(host='127.0.0.1', port=" +
      std::to_string(g.port) +
      ")\n"
      "p = r.pipeline(transaction=False)\n"
      "for _ in range(5): p.execute_command('CL.THROTTLE', 'py', 2, 3, 3600)\n"
      "for reply in p.execute(): print(*reply)\n"
      "print(r.ping())\n";
  CHECK(run("/usr/bin/python3 -c \"" + script + "\"") ==
        "0 3 2 -1 1200\n0 3 1 -1 2400\n0 3 0 -1 3600\n1 3 0 1200 3600\n1 3 0 1200 3600\nTrue\n");
}

TEST_CASE("RESP gateway: a protocol error closes that connection only", "[resp][cluster]") {
  Gateway g;
  RawClient bad(g.port);
  RawClient good(g.port);
  bad.send("*1\r\n$-5\r\n");
  const std::string error = "-ERR Protocol error: invalid bulk length '-5'\r\n";
  CHECK(bad.read(error.size()) == error);
  CHECK(bad.closedByServer());
  good.send(command({"PING"}));
  CHECK(good.read(7) == "+PONG\r\n");
  // Too many arguments: refused naming the limit.
  RawClient many(g.port);
  many.send("*5000\r\n");
  const std::string tooMany =
      "-ERR Protocol error: multibulk length 5000 is over the limit of 1024 arguments\r\n";
  CHECK(many.read(tooMany.size()) == tooMany);
  CHECK(many.closedByServer());
}

TEST_CASE("RESP gateway: starts and stops many times with clients connected", "[resp][cluster]") {
  Node node;
  REQUIRE(node.start());
  for (int i = 0; i < 20; ++i) {
    RespServer server(node);
    auto port = server.start("127.0.0.1:0");
    INFO((port ? "" : port.error().message()));
    REQUIRE(port);
    RawClient c(*port);
    c.send(command({"CL.THROTTLE", "stop-" + std::to_string(i), "1", "1", "3600"}) +
           command({"CL.THROTTLE", "x", "1", "1", "3600"}));
    server.stop();
  }
  RespServer server(node);
  CHECK(!server.start("no-port"));
}

TEST_CASE("RESP gateway: hiredis and redis-py run the scripted sequence pipelined",
          "[resp][cluster]") {
  Gateway g;
#ifdef INGRID_HIREDIS_CLIENT
  {
    TempFile in("hiredis", throttleScript("hiredis"));
    CHECK(run(std::string(INGRID_HIREDIS_CLIENT) + " " + std::to_string(g.port) + " < " +
              in.path) == kThrottleReplies);
  }
#else
  WARN("hiredis not found at configure time: its client is not built");
#endif
  // redis-py: every command in one pipeline (one write), replies read after.
  TempFile in("py", throttleScript("py"));
  const std::string script =
      "import redis, sys\n"
      "r = redis.Redis(host='127.0.0.1', port=" +
      std::to_string(g.port) +
      ")\n"
      "p = r.pipeline(transaction=False)\n"
      "for line in open(sys.argv[1]): p.execute_command(*line.split())\n"
      "for reply in p.execute(): print(*reply)\n";
  CHECK(run("/usr/bin/python3 -c \"" + script + "\" " + in.path) == kThrottleReplies);
}

TEST_CASE("RESP gateway: AUTH with the client secret", "[resp][cluster]") {
  NodeOptions o;
  o.clusterSecret = "cluster-secret";
  o.clientSecret = "s3cret";
  Gateway g(o);
  RawClient c(g.port);
  // Before AUTH: only AUTH, HELLO and QUIT; everything else -NOAUTH, as Redis answers.
  c.send(command({"PING"}) + command({"CL.THROTTLE", "a", "1", "1", "60"}) +
         command({"AUTH", "wrong"}) + command({"AUTH", "bob", "s3cret"}) +
         command({"AUTH", "s3cret"}) + command({"PING"}));
  const std::string noauth = "-NOAUTH Authentication required.\r\n";
  const std::string wrongpass =
      "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
  const std::string expected = noauth + noauth + wrongpass + wrongpass + "+OK\r\n+PONG\r\n";
  CHECK(c.read(expected.size()) == expected);
  // redis-cli -a sends AUTH first; HELLO 2 AUTH default <secret> authenticates too.
  CHECK(g.cli("--no-auth-warning -a s3cret CL.THROTTLE k 0 1 60") == "0\n1\n0\n-1\n60\n");
  CHECK(g.cli("PING") == "NOAUTH Authentication required.\n\n");
  CHECK(g.cli("HELLO 2 AUTH default s3cret").find("server\ningrid\n") == 0);
#ifdef INGRID_HIREDIS_CLIENT
  TempFile in("hiredis-auth", throttleScript("hiredis-auth"));
  CHECK(run(std::string(INGRID_HIREDIS_CLIENT) + " " + std::to_string(g.port) + " s3cret < " +
            in.path) == std::string("OK\n") + kThrottleReplies);
#endif
  CHECK(g.server.counts().authFailures >= 4);

  // Without a secret, AUTH is refused as Redis refuses it.
  Gateway open;
  CHECK(open.cli("AUTH x").find("ERR AUTH <password> called without any password configured") == 0);
}

TEST_CASE("RESP gateway: RESP3 after HELLO 3, with redis-cli -3 and on the wire",
          "[resp][cluster]") {
  Gateway g;
  // redis-cli -3 sends HELLO 3 first; it prints a map one "key value" pair per line (an array,
  // under RESP2, one element per line).
  CHECK(g.cli("-3 INGRID.ACQUIRE tb3 2 token-bucket capacity 5 period-ms 3600000") ==
        "granted 1\nremaining 3\nwait_ns 0\n");
  // CL.THROTTLE's five integers are an array under either protocol (redis-cell's reply).
  CHECK(g.cli("-3 CL.THROTTLE burst3 4 5 3600") == "0\n5\n4\n-1\n720\n");

  RawClient c(g.port);
  // Reads until `end` came (at most 512 bytes, one at a time: the reply's length is unknown).
  const auto readUntil = [&c](const std::string& end) {
    std::string got;
    for (int i = 0; i < 512 && got.find(end) == std::string::npos; ++i) {
      const std::string byte = c.read(1);
      if (byte.empty()) break;
      got += byte;
    }
    return got;
  };
  // HELLO 3: the field/value reply is a map of 7 pairs, proto 3.
  c.send("HELLO 3\r\n");
  const std::string hello3 = readUntil("$7\r\nmodules\r\n*0\r\n");
  CHECK(hello3.rfind("%7\r\n$6\r\nserver\r\n$6\r\ningrid\r\n$7\r\nversion\r\n", 0) == 0);
  CHECK(hello3.find("$5\r\nproto\r\n:3\r\n$2\r\nid\r\n") != std::string::npos);
  // A null is RESP3's `_`; INGRID.ACQUIRE's fields are a map.
  c.send("CLIENT GETNAME\r\n");
  CHECK(c.read(3) == "_\r\n");
  c.send("INGRID.ACQUIRE tb3w 1 token-bucket capacity 5 period-ms 3600000\r\n");
  const std::string map =
      "%3\r\n$7\r\ngranted\r\n:1\r\n$9\r\nremaining\r\n:4\r\n$7\r\nwait_ns\r\n:0\r\n";
  CHECK(c.read(map.size()) == map);
  // An unsupported version answers NOPROTO and keeps RESP3; HELLO 2 returns to RESP2.
  c.send("HELLO 9\r\nCLIENT GETNAME\r\n");
  const std::string noproto = "-NOPROTO unsupported protocol version\r\n_\r\n";
  CHECK(c.read(noproto.size()) == noproto);
  c.send("HELLO 2\r\n");
  CHECK(c.read(5) == "*14\r\n");
  CHECK(readUntil("$5\r\nproto\r\n:2\r\n").find("$5\r\nproto\r\n:2\r\n") != std::string::npos);
  readUntil("$7\r\nmodules\r\n*0\r\n");
  c.send("CLIENT GETNAME\r\n");
  CHECK(c.read(5) == "$-1\r\n");
}

TEST_CASE("RESP gateway: INGRID.ACQUIRE on every limiter", "[resp][cluster]") {
  Gateway g;
  // Each limiter's first answer on a fresh key: 2 of a limit of 5 taken, 3 left (a period of
  // an hour: nothing refills meanwhile).
  CHECK(g.cli("INGRID.ACQUIRE tb 2 token-bucket capacity 5 period-ms 3600000") ==
        "granted\n1\nremaining\n3\nwait_ns\n0\n");
  // GCRA with capacity 5: max_burst 4, emission interval 720 s; 2 units leave 3, reset 1440 s.
  CHECK(g.cli("INGRID.ACQUIRE gc 2 GCRA CAPACITY 5 PERIOD-MS 3600000") ==
        "granted\n1\nlimit\n5\nremaining\n3\nretry_after_ns\n0\nreset_after_ns\n"
        "1440000000000\n");
  for (const char* limiter : {"fixed-window", "sliding-log", "sliding-window", "leaky-meter"}) {
    INFO(limiter);
    const std::string out = g.cli(std::string("INGRID.ACQUIRE k-") + limiter + " 2 " + limiter +
                                  " capacity 5 period-ms 3600000");
    CHECK(out.find("granted\n1\nlimit\n5\nremaining\n3\nretry_after_ns\n0\n") == 0);
  }
  CHECK(g.cli("INGRID.ACQUIRE ls 2 leaky-shaper capacity 5 period-ms 3600000")
            .find("granted\n1\ndelay_ns\n") == 0);
  // A lease's id is not predictable: the fields around it are.
  const std::string lease = g.cli("INGRID.ACQUIRE cc 2 concurrency capacity 5 period-ms 60000");
  CHECK(lease.find("granted\n1\nlease\n") == 0);
  CHECK(lease.find("\nlimit\n5\nheld\n2\nretry_after_ns\n0\nexpires_after_ns\n60000000000\n") !=
        std::string::npos);
  CHECK(g.cli("INGRID.ACQUIRE cb 2 composite band 5/3600000 band 100/60000") ==
        "granted\n1\nremaining\n3\nwait_ns\n0\nversion\n0\n");
  CHECK(g.cli("INGRID.ACQUIRE wu 1 token-bucket warmup-ms 1000 refill 10 period-ms 1000")
            .find("granted\n1\ndelay_ns\n") == 0);
  CHECK(g.cli("INGRID.ACQUIRE rs 1 token-bucket capacity 1 max-wait-ms 0") ==
        "granted\n1\ndelay_ns\n0\nremaining\n0\n");
  // Over the limit: denied with the wait for one token of an hour's bucket of 5 (720 s), less
  // what refilled since the first request.
  const std::string denied = g.cli("INGRID.ACQUIRE tb 4 token-bucket capacity 5 period-ms 3600000");
  REQUIRE(denied.find("granted\n0\nremaining\n3\nwait_ns\n") == 0);
  const long long wait = std::stoll(denied.substr(denied.rfind("wait_ns\n") + 8));
  CHECK(wait > 700'000'000'000);
  CHECK(wait <= 720'000'000'000);

  // Refusals name the argument and the rule.
  CHECK(g.cli("INGRID.ACQUIRE k 1") ==
        "ERR wrong number of arguments for 'ingrid.acquire' command; usage: INGRID.ACQUIRE <key> "
        "<n> <limiter> [<option> <value>]...\n\n");
  CHECK(g.cli("INGRID.ACQUIRE k 0 token-bucket") ==
        "ERR INGRID.ACQUIRE n must be an integer in [1, 9223372036854775807], got '0'\n\n");
  CHECK(g.cli("INGRID.ACQUIRE k 1 nope")
            .find("ERR INGRID.ACQUIRE limiter must be one of "
                  "token-bucket, gcra,") == 0);
  CHECK(g.cli("INGRID.ACQUIRE k 1 gcra initial 3") ==
        "ERR INGRID.ACQUIRE option 'initial' does not apply to the limiter gcra\n\n");
  CHECK(g.cli("INGRID.ACQUIRE k 1 token-bucket speed 3")
            .find("ERR INGRID.ACQUIRE unknown option "
                  "'speed'") == 0);
  CHECK(g.cli("INGRID.ACQUIRE k 1 sliding-log capacity 5000")
            .find("ERR INGRID.ACQUIRE options of sliding-log: ") == 0);
  CHECK(g.cli("INGRID.ACQUIRE k 1 composite band 5") ==
        "ERR INGRID.ACQUIRE band must be CAPACITY/PERIOD_MS, each a whole number >= 1, got "
        "'5'\n\n");
}

TEST_CASE("RESP gateway: command bytes - connection cap and idle timeout are bounded",
          "[resp][cluster]") {
  RespOptions o;
  o.limits.maxCommand = 4096;
  o.maxConnections = 2;
  o.idleTimeout = std::chrono::milliseconds(300);
  Gateway g({}, o);
  {
    // A command of more than 4096 bytes: refused once its bulk header announces it.
    RawClient big(g.port);
    big.send("*2\r\n$4\r\nECHO\r\n$5000\r\n");
    const std::string error =
        "-ERR Protocol error: command is longer than the limit of 4096 bytes\r\n";
    CHECK(big.read(error.size()) == error);
    CHECK(big.closedByServer());
  }
  // Wait until the server has let the first connection go, then fill the cap.
  REQUIRE(testing::eventually([&] { return g.server.counts().connections == 0; },
                              std::chrono::seconds(10)));
  RawClient a(g.port);
  RawClient b(g.port);
  a.send(command({"PING"}));
  CHECK(a.read(7) == "+PONG\r\n");
  b.send(command({"PING"}));
  CHECK(b.read(7) == "+PONG\r\n");
  RawClient third(g.port);
  const std::string full = "-ERR max number of clients reached\r\n";
  CHECK(third.read(full.size()) == full);
  CHECK(third.closedByServer());
  // Idle: a and b are closed by the server once they have sent nothing for 300 ms.
  CHECK(a.closedByServer());
  CHECK(b.closedByServer());
  const RespCounts c = g.server.counts();
  CHECK(c.refused == 1);
  CHECK(c.idleClosed == 2);
  CHECK(c.protocolErrors == 1);
  const std::string metrics = g.server.metricsText();
  CHECK(metrics.find("ingrid_resp_connections_refused_total 1\n") != std::string::npos);
  CHECK(metrics.find("ingrid_resp_idle_closed_total 2\n") != std::string::npos);
}
