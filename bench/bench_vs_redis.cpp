// bench_vs_redis: ingrid against Redis + Lua in one run, on one machine, pinned alike.
//
// Every server (redis-server, ingrid-node, the bare echo server of the floor) runs pinned to
// --server-cpu; this process, the load generator, pins itself to --client-cpu before it starts a
// thread. Cases alternate: for each key pattern and in-flight count, the Redis row, then the
// matching ingrid rows. One row per case: ops/s, latency p50/p99/p99.9, the servers' CPU time per
// operation (from /proc/<pid>/stat), the load generator's own ("load CPU": this process, every
// thread), and ingrid's ratio to the matching Redis row. Rows also go to a CSV file for
// bench/chart.gp (which draws the token-bucket systems only).
//
// The cases:
//   floor          a bare Asio echo of a request-sized message (the loopback round trip)
//   redis          standalone Redis 7, persistence off, EVALSHA of a two-key token-bucket script
//                  of the gateway kind (tokens and timestamp keys; the caller sends its clock)
//   ingrid-1       one ingrid-node, no backups, through the thin client
//   redis-3+3      Redis Cluster, 3 masters with a replica each, the same script followed by
//                  WAIT 1 (pipelined): the answer waits for the replica, like ingrid-3's backup
//   ingrid-3       three ingrid-node processes with one synchronous backup
//   ingrid-batch   one hot key through the client-side Batcher (ingrid-1)
//   redis-gcra     the same standalone Redis, EVALSHA of a one-key GCRA script with
//                  CL.THROTTLE's arguments, clock (the server's TIME) and five-integer reply
//   ingrid-resp    `ingrid-node --resp` (no backups): CL.THROTTLE, sent by the same socket
//                  driver as redis-gcra (one connection per request in flight); ratio to
//                  redis-gcra, and to ingrid-1
//   ingrid-rls     `ingrid-node --rls` (no backups), built with INGRID_RLS_GATEWAY only:
//                  ShouldRateLimit of one descriptor from a gRPC callback-API client
//                  (rls_load.h, 64 calls per HTTP/2 connection); ratio to ingrid-1
// each on uniform keys (drawn at random from --keys prefilled buckets) and on one hot key. The
// gateways' replies are checked: a refusal or an error counts as failed, not as an operation.
//
//   build/bench/bench_vs_redis [--seconds S] [--warmup S] [--inflight 1,16,64,256]
//                              [--keys N] [--memory-buckets N] [--csv FILE] [--smoke]
//                              [--single-thread|--workers] [--no-shard-ports]
//                              [--server-cpu C] [--client-cpu C] [--cases SYSTEM,...]
// --cases runs only the systems named (floor, redis, redis-3+3, ingrid-1, ingrid-3, ingrid-batch,
// redis-gcra, ingrid-resp, ingrid-rls, memory; a ratio needs its reference system too); Redis
// Cluster is started only for redis-3+3.
// By default (--single-thread) every ingrid-node runs with --single-thread: its partitions on its
// network thread, one thread per server as Redis has, each pinned to the servers' CPU. --workers
// runs each with one worker thread beside its network thread instead; the thin client then sends
// its calls to the worker's shard port, or, with --no-shard-ports, to the member port (whose
// network thread hands each call to the worker and back).
//
// Last, memory per bucket: --memory-buckets new buckets (16-byte keys) on each system; ingrid's
// RSS delta (per copy: with 3 servers and 1 backup each bucket has two), Redis's used_memory delta.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/client.h>
#include <ingrid/processors/token_bucket.h>

#include "closed_loop.h"
#ifdef INGRID_BENCH_RLS
#include "rls_load.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

// The servers started and not stopped yet (spawn, stop): die() stops them, so that a run that
// fails leaves no server behind.
std::vector<pid_t>& running() {
  static std::vector<pid_t> pids;
  return pids;
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_vs_redis: %s\n", why.c_str());
  for (const pid_t pid : running()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::exit(1);
}

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("cannot pin to CPU " + std::to_string(cpu));
}

// ---- child processes ----------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  std::string log;  // its stdout and stderr
};

// Starts `argv` pinned to `cpu`, its output to a log file. Only async-signal-safe calls between
// fork and exec (this process has threads by then).
Child spawn(const std::vector<std::string>& argv, int cpu, const std::string& name) {
  Child c;
  c.log = "/tmp/bench_vs_redis." + std::to_string(::getpid()) + "." + name + ".log";
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = ::open(c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die("cannot create " + c.log);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  c.pid = ::fork();
  if (c.pid < 0) die("fork failed");
  if (c.pid == 0) {
    sched_setaffinity(0, sizeof set, &set);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  running().push_back(c.pid);
  return c;
}

void stop(Child& c) {
  if (c.pid <= 0) return;
  std::erase(running(), c.pid);
  ::kill(c.pid, SIGTERM);
  for (int i = 0; i < 200; ++i) {  // up to 10 s
    if (::waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
      c.pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(c.pid, SIGKILL);
  ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}

// Waits (bounded) for a log line containing `marker`; returns the rest of that line.
std::string awaitLine(const Child& c, const std::string& marker, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    std::ifstream in(c.log);
    std::string line;
    while (std::getline(in, line)) {
      const auto at = line.find(marker);
      if (at != std::string::npos) return line.substr(at + marker.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  die("no '" + marker + "' in " + c.log + " within " + std::to_string(limit.count()) + " s");
}

// CPU time (user + system) of a process so far, in microseconds.
double cpuMicros(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::uint16_t freePort() {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// `bytes` with CR and LF shown as \r and \n, and at most 200 bytes of it.
std::string printable(std::string_view bytes) {
  std::string out;
  for (const char c : bytes.substr(0, 200)) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return bytes.size() > 200 ? out + "..." : out;
}

// ---- closed-loop request/response driver over plain sockets ----------------------------------

// One connection per chain in flight; each sends `depth` requests `request(i)` in one write (a
// pipeline, as redis-benchmark -P sends) and waits for their `depth` replies before sending again;
// `complete` returns a reply's length once the buffer holds a whole one, else 0. Every reply's
// latency is its batch's round trip.
struct SocketLoad {
  std::function<std::string(std::size_t conn, std::uint64_t i)> request;
  std::function<std::size_t(const std::string& buffer)> complete;
  // If set: a connection sends again only while this returns true (a count-bound run).
  std::function<bool()> more;
  // If set: a whole reply it refuses counts as a failure, not as an operation.
  std::function<bool(std::string_view reply)> accept;
};

// Connection k goes to portOf(k).
ingrid::bench::LoopResult runSockets(const std::function<std::uint16_t(std::size_t)>& portOf,
                                     int inflight, double seconds, const SocketLoad& load,
                                     int depth = 1) {
  asio::io_context io;
  struct Conn {
    explicit Conn(asio::io_context& io) : socket(io) {}
    asio::ip::tcp::socket socket;
    std::string out;
    std::string in;
    std::array<char, 4096> chunk{};
    std::uint64_t next = 0;
    int pending = 0;  // replies of the batch in flight not read yet
    Clock::time_point start;
    std::vector<std::int64_t> latencies;
    std::uint64_t failures = 0;
  };
  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < inflight; ++i) {
    conns.push_back(std::make_unique<Conn>(io));
    conns.back()->socket.connect(
        {asio::ip::make_address("127.0.0.1"), portOf(static_cast<std::size_t>(i))});
    conns.back()->socket.set_option(asio::ip::tcp::no_delay(true));
    conns.back()->latencies.reserve(1 << 16);
  }
  const auto begin = Clock::now();
  const auto deadline =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  bool refusedShown = false;
  std::function<void(std::size_t)> send;
  std::function<void(std::size_t)> read = [&](std::size_t k) {
    Conn& c = *conns[k];
    c.socket.async_read_some(asio::buffer(c.chunk), [&, k](std::error_code ec, std::size_t n) {
      Conn& me = *conns[k];
      if (ec) {
        ++me.failures;
        return;
      }
      me.in.append(me.chunk.data(), n);
      const auto end = Clock::now();
      while (me.pending > 0) {
        const std::size_t whole = load.complete(me.in);
        if (whole == 0) break;
        if (load.accept && !load.accept(std::string_view(me.in).substr(0, whole))) {
          if (me.failures++ == 0 && !refusedShown) {  // the first, so a failed run says why
            refusedShown = true;
            std::fprintf(stderr, "bench_vs_redis: a reply refused: %s\n",
                         printable(std::string_view(me.in).substr(0, whole)).c_str());
          }
        } else {
          me.latencies.push_back((end - me.start).count());
        }
        me.in.erase(0, whole);
        --me.pending;
      }
      if (me.pending > 0) {
        read(k);
        return;
      }
      if (end < deadline && (!load.more || load.more())) send(k);
    });
  };
  send = [&](std::size_t k) {
    Conn& c = *conns[k];
    c.out.clear();
    for (int d = 0; d < depth; ++d) c.out += load.request(k, c.next++);
    c.pending = depth;
    c.start = Clock::now();
    asio::async_write(c.socket, asio::buffer(c.out), [&, k](std::error_code ec, std::size_t) {
      if (ec) {
        ++conns[k]->failures;
        return;
      }
      read(k);
    });
  };
  for (std::size_t k = 0; k < conns.size(); ++k) {
    if (!load.more || load.more()) send(k);
  }
  io.run();
  ingrid::bench::LoopResult out;
  out.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  for (auto& c : conns) {
    out.latenciesNs.insert(out.latenciesNs.end(), c->latencies.begin(), c->latencies.end());
    out.failures += c->failures;
  }
  return out;
}

ingrid::bench::LoopResult runSockets(std::uint16_t port, int inflight, double seconds,
                                     const SocketLoad& load, int depth = 1) {
  return runSockets([port](std::size_t) { return port; }, inflight, seconds, load, depth);
}

// The floor's server: a bare single-threaded Asio echo, run as a child of its own
// (`bench_vs_redis --echo-server PORT`) so that it is pinned like the other servers.
void echoServer(std::uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), port});
  struct Session : std::enable_shared_from_this<Session> {
    explicit Session(asio::ip::tcp::socket s) : socket(std::move(s)) {}
    asio::ip::tcp::socket socket;
    std::array<char, 4096> data{};
    void read() {
      socket.async_read_some(asio::buffer(data),
                             [self = shared_from_this()](std::error_code ec, std::size_t n) {
                               if (ec) return;
                               asio::async_write(self->socket, asio::buffer(self->data, n),
                                                 [self](std::error_code e, std::size_t) {
                                                   if (!e) self->read();
                                                 });
                             });
    }
  };
  std::function<void()> accept = [&] {
    acceptor.async_accept([&](std::error_code ec, asio::ip::tcp::socket s) {
      if (!ec) {
        s.set_option(asio::ip::tcp::no_delay(true));
        std::make_shared<Session>(std::move(s))->read();
      }
      accept();
    });
  };
  accept();
  std::printf("echo ready\n");
  std::fflush(stdout);
  io.run();
}

// ---- Redis ----------------------------------------------------------------------------------

// The gateway kind of token bucket (two keys, the caller's clock), written for this benchmark:
// refill by elapsed time, take if enough, store both keys with a TTL of twice the fill time.
constexpr const char* kTokenBucketLua = R"(
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])
local ttl = math.floor(capacity / rate * 2) + 1
local last = tonumber(redis.call('get', KEYS[1]))
if last == nil then last = capacity end
local ts = tonumber(redis.call('get', KEYS[2]))
if ts == nil then ts = 0 end
local filled = math.min(capacity, last + math.max(0, now - ts) * rate / 1000)
local allowed = 0
if filled >= requested then
  filled = filled - requested
  allowed = 1
end
redis.call('setex', KEYS[1], ttl, filled)
redis.call('setex', KEYS[2], ttl, now)
return allowed
)";

// redis-cell's CL.THROTTLE (GCRA) as a Lua script, for the same work as the RESP gateway's
// CL.THROTTLE: KEYS[1] holds the TAT, ARGV is max_burst, count, period (s) and quantity, the
// clock is the server's (TIME, as redis-cell and ingrid-node read their own), and the reply is
// the five integers (limited, limit, remaining, retry_after s, reset_after s; docs/gcra.md's
// formulas and rounding). Microseconds, so that every value stays exact in Lua's doubles (ingrid
// counts nanoseconds: the two agree when the emission interval is whole microseconds).
constexpr const char* kGcraLua = R"(
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3]) * 1000000
local quantity = tonumber(ARGV[4] or '1')
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local function secs(us)
  local whole = math.floor(us / 1000000)
  if us - whole * 1000000 >= 1000 then whole = whole + 1 end
  return whole
end
local e = math.ceil(period / count)
local limit = burst + 1
local tau = limit * e
local tat = tonumber(redis.call('get', KEYS[1]) or now)
local base = math.max(tat, now)
local inc = quantity * e
local newTat = base + inc
local limited, ttl, retry = 0, 0, -1
if newTat - tau <= now then
  ttl = newTat - now
  if quantity > 0 then
    redis.call('set', KEYS[1], string.format('%d', newTat), 'px',
               string.format('%d', math.ceil(ttl / 1000)))
  end
else
  limited = 1
  ttl = base - now
  if inc <= tau then retry = secs(newTat - tau - now) end
end
local remaining = 0
if tau - ttl > 0 then remaining = math.floor((tau - ttl) / e) end
return {limited, limit, remaining, retry, secs(ttl)}
)";

std::string resp(const std::vector<std::string>& parts) {
  std::string out = "*" + std::to_string(parts.size()) + "\r\n";
  for (const auto& p : parts) out += "$" + std::to_string(p.size()) + "\r\n" + p + "\r\n";
  return out;
}

// A blocking command on a fresh connection; returns the first reply line.
std::string redisCommand(std::uint16_t port, const std::vector<std::string>& parts) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(s, asio::buffer(resp(parts)));
  asio::streambuf buf;
  asio::read_until(s, buf, "\r\n");
  std::istream is(&buf);
  std::string line;
  std::getline(is, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.rfind("$", 0) == 0) {  // a bulk string: read its body
    const std::size_t len = std::stoul(line.substr(1));
    while (buf.size() < len + 2) asio::read(s, buf, asio::transfer_at_least(1));
    std::string body(len, '\0');
    is.read(body.data(), static_cast<std::streamsize>(len));
    return body;
  }
  return line;
}

std::size_t redisReplyLength(const std::string& b) {
  const auto end = b.find("\r\n");
  return end == std::string::npos ? 0 : end + 2;  // integer or error: one line
}

// An array of one-line items (CL.THROTTLE's five integers) or one line (an error), or 0 while
// the buffer does not hold all of it.
std::size_t arrayReplyLength(const std::string& b) {
  const auto end = b.find("\r\n");
  if (end == std::string::npos) return 0;
  if (b[0] != '*') return end + 2;
  long items = std::strtol(b.c_str() + 1, nullptr, 10);
  std::size_t at = end + 2;
  for (; items > 0; --items) {
    const auto line = b.find("\r\n", at);
    if (line == std::string::npos) return 0;
    at = line + 2;
  }
  return at;
}

// CL.THROTTLE's reply for a request that was allowed: five integers, the first 0.
bool throttleAllowed(std::string_view reply) { return reply.starts_with("*5\r\n:0\r\n"); }

// Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key, or of its {hashtag}, mod 16384.
std::uint16_t redisSlot(const std::string& key) {
  std::string_view k = key;
  if (const auto open = k.find('{'); open != std::string_view::npos) {
    const auto close = k.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      k = k.substr(open + 1, close - open - 1);
  }
  std::uint16_t crc = 0;
  for (const char ch : k) {
    crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint8_t>(ch) << 8));
    for (int b = 0; b < 8; ++b) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return static_cast<std::uint16_t>(crc % 16384);
}

// Two one-line replies (the script's, then WAIT's), or 0 while they have not both arrived.
std::size_t twoReplyLength(const std::string& b) {
  const auto first = b.find("\r\n");
  if (first == std::string::npos) return 0;
  const auto second = b.find("\r\n", first + 2);
  return second == std::string::npos ? 0 : second + 2;
}

// Resident set of a process, in bytes (VmRSS).
double rssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return 0;
}

// Redis's own count of the memory it allocated (INFO memory: used_memory).
double redisUsedMemory(std::uint16_t port) {
  const std::string info = redisCommand(port, {"INFO", "memory"});
  const auto at = info.find("used_memory:");
  if (at == std::string::npos) die("INFO memory has no used_memory");
  return std::stod(info.substr(at + 12));
}

// ---- cases ------------------------------------------------------------------------------------

struct Row {
  std::string system, keys;
  int inflight = 0;
  int pipeline = 1;  // requests per write on each connection (runSockets' depth)
  double opsPerSec = 0, p50 = 0, p99 = 0, p999 = 0, cpuPerOp = 0;
  double clientCpuPerOp = 0;  // this process's (the load generator's) CPU time per operation
  std::uint64_t failures = 0;
  double ratio = 0;  // to the matching Redis row (`ratioTo`); 0: none
  std::string ratioTo = "redis";
  double clusterRatio = 0;     // ingrid-3 only: to the matching Redis Cluster 3+3 row
  double nativeRatio = 0;      // the gateways' rows only: to the matching ingrid-1 row
  double memoryPerBucket = 0;  // memory rows only: bytes per bucket per copy
};

Row summarize(const std::string& system, const std::string& keys, int inflight,
              ingrid::bench::LoopResult r, double cpuMicrosUsed) {
  Row row{system, keys, inflight};
  std::sort(r.latenciesNs.begin(), r.latenciesNs.end());
  auto pct = [&](double p) {
    if (r.latenciesNs.empty()) return 0.0;
    const auto i = static_cast<std::size_t>(p * static_cast<double>(r.latenciesNs.size() - 1));
    return static_cast<double>(r.latenciesNs[i]) / 1000.0;
  };
  const double ops = static_cast<double>(r.latenciesNs.size());
  row.opsPerSec = ops / r.seconds;
  row.p50 = pct(0.5);
  row.p99 = pct(0.99);
  row.p999 = pct(0.999);
  row.cpuPerOp = ops > 0 ? cpuMicrosUsed / ops : 0;
  row.failures = r.failures;
  return row;
}

void print(const Row& r) {
  std::printf(
      "%-13s %-8s %4d in flight%s %10.0f ops/s  p50 %7.1f us  p99 %8.1f us  p99.9 %8.1f us"
      "  server CPU %6.2f us/op  load CPU %6.2f us/op  failed %llu",
      r.system.c_str(), r.keys.c_str(), r.inflight,
      r.pipeline > 1 ? (" x" + std::to_string(r.pipeline) + " pipelined").c_str() : "", r.opsPerSec,
      r.p50, r.p99, r.p999, r.cpuPerOp, r.clientCpuPerOp,
      static_cast<unsigned long long>(r.failures));
  if (r.ratio > 0) std::printf("  %.2fx %s", r.ratio, r.ratioTo.c_str());
  if (r.clusterRatio > 0) std::printf(", %.2fx redis-3+3", r.clusterRatio);
  if (r.nativeRatio > 0) std::printf("%s%.2fx ingrid-1", r.ratio > 0 ? ", " : "  ", r.nativeRatio);
  std::printf("\n");
  std::fflush(stdout);
}

double cpuOf(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += cpuMicros(p);
  return sum;
}

struct Config {
  double seconds = 5, warmup = 1;
  std::vector<int> inflight{1, 16, 64, 256};
  int pipeline = 1;  // > 1: the floor and CL.THROTTLE cases run again, that many per write
  int keys = 100000;
  std::string csv = "bench_vs_redis.csv";
  int serverCpu = 0, clientCpu = 1;
  std::size_t memoryBuckets = 1'000'000;  // 0: no memory case
  bool singleThread = true;               // ingrid-node --single-thread (else --workers 1)
  bool shardPorts = true;                 // with --workers: the worker's shard port serves clients
  std::vector<std::string> cases;         // the systems to run (--cases); empty: all
  bool wants(const std::string& system) const {
    return cases.empty() || std::find(cases.begin(), cases.end(), system) != cases.end();
  }
};

// Every system --cases may name.
const std::vector<std::string> kSystems{"floor",      "redis",        "redis-3+3",  "ingrid-1",
                                        "ingrid-3",   "ingrid-batch", "redis-gcra", "ingrid-resp",
                                        "ingrid-rls", "memory"};

std::vector<std::string> parseCases(const char* s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (std::find(kSystems.begin(), kSystems.end(), item) == kSystems.end()) {
      std::string known;
      for (const auto& k : kSystems) known += (known.empty() ? "" : ",") + k;
      die("--cases takes a comma-separated list of " + known + ", got '" + item + "'");
    }
    out.push_back(item);
  }
  return out;
}

std::vector<int> parseList(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v <= 0 || v > 4096) {
      die("--inflight takes a comma-separated list of counts in 1..4096, got '" + item + "'");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--echo-server") == 0) {
    echoServer(static_cast<std::uint16_t>(std::atoi(argv[2])));
    return 0;
  }
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--seconds") {
      cfg.seconds = std::atof(value());
    } else if (a == "--warmup") {
      cfg.warmup = std::atof(value());
    } else if (a == "--inflight") {
      cfg.inflight = parseList(value());
    } else if (a == "--pipeline") {
      cfg.pipeline = std::atoi(value());
      if (cfg.pipeline < 1 || cfg.pipeline > 1024) die("--pipeline takes a count in 1..1024");
    } else if (a == "--keys") {
      cfg.keys = std::atoi(value());
    } else if (a == "--csv") {
      cfg.csv = value();
    } else if (a == "--single-thread") {
      cfg.singleThread = true;
    } else if (a == "--workers") {
      cfg.singleThread = false;
    } else if (a == "--no-shard-ports") {
      cfg.shardPorts = false;
    } else if (a == "--memory-buckets") {
      cfg.memoryBuckets = static_cast<std::size_t>(std::atol(value()));
    } else if (a == "--server-cpu") {
      cfg.serverCpu = std::atoi(value());
    } else if (a == "--client-cpu") {
      cfg.clientCpu = std::atoi(value());
    } else if (a == "--cases") {
      cfg.cases = parseCases(value());
    } else if (a == "--smoke") {
      cfg.seconds = 0.5;
      cfg.warmup = 0.1;
      cfg.inflight = {1, 64};
      cfg.keys = 2000;
      cfg.memoryBuckets = 20000;
    } else {
      die("unknown option '" + a +
          "'; usage: bench_vs_redis [--seconds S] [--warmup S] [--inflight 1,16,64,256] "
          "[--pipeline D] [--keys N] [--memory-buckets N] [--csv FILE] [--smoke] "
          "[--single-thread|--workers] "
          "[--no-shard-ports] [--server-cpu C] [--client-cpu C] [--cases SYSTEM,...]");
    }
  }
#ifndef INGRID_BENCH_RLS
  if (!cfg.cases.empty() && cfg.wants("ingrid-rls")) {
    std::fprintf(stderr, "bench_vs_redis: ingrid-rls is not built (INGRID_RLS_GATEWAY is off)\n");
  }
#endif
  if (cfg.seconds <= 0 || cfg.seconds > 600 || cfg.warmup < 0 || cfg.keys <= 0) {
    die("--seconds must be in (0, 600], --warmup >= 0 and --keys > 0");
  }
  const unsigned cpus = std::thread::hardware_concurrency();
  if (cpus < 2) std::fprintf(stderr, "bench_vs_redis: 1 CPU: server and client share it\n");
  const int clientCpu = cpus < 2 ? 0 : cfg.clientCpu;
  pinTo(clientCpu);

  // The floor: an echo server of its own, pinned like the others.
  std::vector<Child> children;
  const std::uint16_t echoPort = freePort();
  children.push_back(
      spawn({"/proc/self/exe", "--echo-server", std::to_string(echoPort)}, cfg.serverCpu, "echo"));
  awaitLine(children.back(), "echo ready", std::chrono::seconds(10));
  const pid_t echoPid = children.back().pid;

  const std::uint16_t redisPort = freePort();
  children.push_back(spawn({"/usr/bin/redis-server", "--port", std::to_string(redisPort), "--bind",
                            "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"},
                           cfg.serverCpu, "redis"));
  awaitLine(children.back(), "Ready to accept connections", std::chrono::seconds(10));
  const pid_t redisPid = children.back().pid;
  const std::string sha = redisCommand(redisPort, {"SCRIPT", "LOAD", kTokenBucketLua});
  if (sha.size() != 40) die("SCRIPT LOAD answered '" + sha + "'");
  const std::string gcraSha = redisCommand(redisPort, {"SCRIPT", "LOAD", kGcraLua});
  if (gcraSha.size() != 40) die("SCRIPT LOAD of the GCRA script answered '" + gcraSha + "'");

  // Redis Cluster 3+3: six redis-server processes in cluster mode (persistence off), made into
  // three masters with one replica each by redis-cli. slotPort[s]: the master serving slot s.
  const std::string clusterDir = "/tmp/bench_vs_redis." + std::to_string(::getpid()) + ".cluster";
  std::filesystem::create_directories(clusterDir);
  std::vector<std::uint16_t> clusterPorts;
  std::vector<pid_t> clusterPids;
  const bool withCluster = cfg.wants("redis-3+3");
  for (int i = 0; i < (withCluster ? 6 : 0); ++i) {
    const std::uint16_t port = freePort();
    const std::uint16_t bus = freePort();
    children.push_back(
        spawn({"/usr/bin/redis-server", "--port", std::to_string(port), "--cluster-port",
               std::to_string(bus), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--cluster-enabled", "yes", "--cluster-config-file",
               clusterDir + "/nodes-" + std::to_string(port) + ".conf", "--dir", clusterDir,
               "--daemonize", "no"},
              cfg.serverCpu, "redis-cluster-" + std::to_string(i)));
    awaitLine(children.back(), "Ready to accept connections", std::chrono::seconds(10));
    clusterPorts.push_back(port);
    clusterPids.push_back(children.back().pid);
  }
  if (withCluster) {
    std::vector<std::string> create{"/usr/bin/redis-cli", "--cluster", "create"};
    for (auto port : clusterPorts) create.push_back("127.0.0.1:" + std::to_string(port));
    create.insert(create.end(), {"--cluster-replicas", "1", "--cluster-yes"});
    Child made = spawn(create, cfg.serverCpu, "redis-cluster-create");
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (::waitpid(made.pid, &status, WNOHANG) != made.pid) {
      if (Clock::now() > deadline) die("redis-cli --cluster create did not finish in 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::erase(running(), made.pid);  // reaped
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      die("redis-cli --cluster create failed; see " + made.log);
    }
    std::remove(made.log.c_str());
  }
  std::vector<std::uint16_t> slotPort(16384, 0);
  if (withCluster) {
    // Every node agrees the cluster is ok, and every master has its replica online.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (bool ready = false; !ready;) {
      if (Clock::now() > deadline) die("the Redis cluster did not become ready in 60 s");
      ready = true;
      for (auto port : clusterPorts) {
        ready = ready && redisCommand(port, {"CLUSTER", "INFO"}).find("cluster_state:ok") !=
                             std::string::npos;
      }
      const std::string nodes = ready ? redisCommand(clusterPorts[0], {"CLUSTER", "NODES"}) : "";
      std::istringstream lines(nodes);
      std::vector<std::uint16_t> masters;
      for (std::string line; std::getline(lines, line);) {
        std::istringstream f(line);
        std::vector<std::string> w;
        for (std::string x; f >> x;) w.push_back(x);
        if (w.size() < 9 || w[2].find("master") == std::string::npos) continue;
        const auto colon = w[1].find(':');
        const auto port = static_cast<std::uint16_t>(
            std::stoi(w[1].substr(colon + 1, w[1].find('@') - colon - 1)));
        masters.push_back(port);
        for (std::size_t i = 8; i < w.size(); ++i) {
          const auto dash = w[i].find('-');
          const int lo = std::stoi(w[i].substr(0, dash));
          const int hi = dash == std::string::npos ? lo : std::stoi(w[i].substr(dash + 1));
          for (int slot = lo; slot <= hi && slot < 16384; ++slot) {
            slotPort[static_cast<std::size_t>(slot)] = port;
          }
        }
      }
      ready = ready && masters.size() == 3 &&
              std::none_of(slotPort.begin(), slotPort.end(), [](auto p) { return p == 0; });
      for (auto m : masters) {
        const std::string info = redisCommand(m, {"INFO", "replication"});
        ready = ready && info.find("connected_slaves:1") != std::string::npos &&
                info.find("state=online") != std::string::npos;
      }
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto port : clusterPorts) {
      if (redisCommand(port, {"SCRIPT", "LOAD", kTokenBucketLua}) != sha) {
        die("SCRIPT LOAD on the cluster node at port " + std::to_string(port) + " failed");
      }
    }
  }

  auto startNode = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args{INGRID_NODE_PATH, "--listen", "127.0.0.1:0", "--workers", "1"};
    if (cfg.singleThread) args.emplace_back("--single-thread");
    if (!cfg.shardPorts) args.emplace_back("--no-shard-ports");
    args.insert(args.end(), extra.begin(), extra.end());
    children.push_back(spawn(args, cfg.serverCpu, name));
    std::string rest = awaitLine(children.back(), "listening on ", std::chrono::seconds(20));
    rest = rest.substr(0, rest.find(' '));
    return std::make_pair(children.back().pid, rest);
  };
  const auto [solo, soloAddress] = startNode("ingrid-1", {"--backups", "0"});
  std::vector<pid_t> trio;
  std::vector<std::string> trioAddresses;
  {
    auto [p, a] = startNode("ingrid-3a", {"--backups", "1"});
    trio.push_back(p);
    trioAddresses.push_back(a);
    for (const char* n : {"ingrid-3b", "ingrid-3c"}) {
      auto [q, b] = startNode(n, {"--backups", "1", "--seed", a});
      trio.push_back(q);
      trioAddresses.push_back(b);
    }
  }

  auto connect = [&](std::vector<std::string> seeds) {
    ingrid::ClientOptions o;
    o.seeds = std::move(seeds);
    auto c = std::make_unique<ingrid::Client>(o);
    const auto r = c->start();
    if (!r) die("client: " + r.error().message());
    return c;
  };
  auto soloClient = connect({soloAddress});
  auto trioClient = connect(trioAddresses);
  // Wait until the three members are one cluster (their topology lists three members).
  {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (true) {
      std::ifstream in(children.back().log);
      std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // Two topologies with three members (the join's T1 and T2): the migration is done.
      const auto first = all.find(": 3 members");
      if (first != std::string::npos && all.find(": 3 members", first + 1) != std::string::npos) {
        break;
      }
      if (Clock::now() > deadline) die("the three ingrid nodes did not form one cluster in 30 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // The gateways, each on an ingrid-node of its own without backups (as ingrid-1): the RESP
  // gateway's CL.THROTTLE, and Envoy's RLS when this build has it. The port each listens on is
  // the rest of its "RESP on "/"RLS on " line, printed before "listening on".
  auto gatewayPort = [&](const std::string& marker) {
    const std::string rest = awaitLine(children.back(), marker, std::chrono::seconds(5));
    return static_cast<std::uint16_t>(std::stoi(rest.substr(rest.rfind(':') + 1)));
  };
  const pid_t respPid = startNode("ingrid-resp", {"--backups", "0", "--resp", "127.0.0.1:0"}).first;
  const std::uint16_t respPort = gatewayPort("RESP on ");
#ifdef INGRID_BENCH_RLS
  const std::string rlsDir = "/tmp/bench_vs_redis." + std::to_string(::getpid()) + ".rls";
  std::filesystem::create_directories(rlsDir);
  const std::string rlsConfig = rlsDir + "/ratelimit.yaml";
  std::ofstream(rlsConfig) << ingrid::bench::rlsBenchConfig();
  const pid_t rlsPid =
      startNode("ingrid-rls", {"--backups", "0", "--rls", "127.0.0.1:0", "--rls-config", rlsConfig})
          .first;
  ingrid::bench::RlsLoad rlsLoad("127.0.0.1:" + std::to_string(gatewayPort("RLS on ")));
#endif

  // Buckets that refill fast enough never to deny under this load: every call does the full
  // read-modify-write on both sides.
  const ingrid::BucketParams bucket =
      ingrid::BucketParams::perPeriod(1'000'000'000, 1'000'000'000);  // 1e9 per second
  std::vector<std::string> ingridKeys, redisTokens, redisStamps;
  for (int k = 0; k < cfg.keys; ++k) {
    ingridKeys.push_back("bucket-" + std::to_string(k));
    redisTokens.push_back("rl:{" + std::to_string(k) + "}:tokens");
    redisStamps.push_back("rl:{" + std::to_string(k) + "}:ts");
  }
  const auto wall0 = std::chrono::system_clock::now();
  auto redisLoad = [&](bool uniform) {
    SocketLoad l;
    l.request = [&, uniform](std::size_t conn, std::uint64_t i) {
      const std::size_t k =
          uniform ? ingrid::bench::uniformIndex(static_cast<int>(conn), i, redisTokens.size()) : 0;
      const auto nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now() - wall0)
                             .count();
      return resp({"EVALSHA", sha, "2", redisTokens[k], redisStamps[k], "1000000000", "1000000000",
                   std::to_string(nowMs), "1"});
    };
    l.complete = redisReplyLength;
    return l;
  };
  // Redis Cluster: connection c talks to master c mod 3 (uniform; about a third of the
  // connections each) or to the hot key's master (hot), and draws keys that master serves. Each
  // call is the script then `WAIT 1 2000`, pipelined: the answer waits until the master's replica
  // has the write. (2 s bounds a broken replica; with healthy replicas it is `WAIT 1 0`.)
  std::vector<std::uint16_t> masters;
  std::map<std::uint16_t, std::vector<std::size_t>> keysOf;  // master port -> key indexes
  for (std::size_t k = 0; k < redisTokens.size(); ++k) {
    keysOf[slotPort[redisSlot(redisTokens[k])]].push_back(k);
  }
  for (const auto& [port, keys] : keysOf) masters.push_back(port);
  auto clusterPortOf = [&](bool uniform) {
    return [&, uniform](std::size_t conn) {
      return uniform ? masters[conn % masters.size()] : slotPort[redisSlot(redisTokens[0])];
    };
  };
  auto clusterLoad = [&](bool uniform) {
    SocketLoad l;
    l.request = [&, uniform](std::size_t conn, std::uint64_t i) {
      std::size_t k = 0;
      if (uniform) {
        const auto& mine = keysOf[masters[conn % masters.size()]];
        k = mine[ingrid::bench::uniformIndex(static_cast<int>(conn), i, mine.size())];
      }
      const auto nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now() - wall0)
                             .count();
      return resp({"EVALSHA", sha, "2", redisTokens[k], redisStamps[k], "1000000000", "1000000000",
                   std::to_string(nowMs), "1"}) +
             resp({"WAIT", "1", "2000"});
    };
    l.complete = twoReplyLength;
    return l;
  };
  // CL.THROTTLE's work on both sides, sent by the same code: GCRA with max_burst 10^9, 1 unit per
  // 1 s period, quantity 1. A TAT moves 1 s per call and stays far below now + tau, so every call
  // is allowed and rewrites an entry that exists (the prefill made it): Redis runs the script by
  // EVALSHA (TIME, GET, SET PX), the gateway runs ingrid's GCRA processor on the key's primary.
  std::vector<std::string> gatewayKeys;  // the RESP keys, and the RLS descriptors' values
  for (int k = 0; k < cfg.keys; ++k) gatewayKeys.push_back("g-" + std::to_string(k));
  auto throttleRequest = [&](bool redis, const std::string& key) {
    return redis ? resp({"EVALSHA", gcraSha, "1", key, "1000000000", "1", "1", "1"})
                 : resp({"CL.THROTTLE", key, "1000000000", "1", "1", "1"});
  };
  auto throttleLoad = [&](bool redis, bool uniform) {
    SocketLoad l;
    l.request = [&, redis, uniform](std::size_t conn, std::uint64_t i) {
      const std::size_t k =
          uniform ? ingrid::bench::uniformIndex(static_cast<int>(conn), i, gatewayKeys.size()) : 0;
      return throttleRequest(redis, gatewayKeys[k]);
    };
    l.complete = arrayReplyLength;
    l.accept = throttleAllowed;
    return l;
  };
#ifdef INGRID_BENCH_RLS
  // The RLS descriptor's value of call i of chain `chain`.
  auto gatewayKey = [&](bool uniform) {
    return [&, uniform](int chain, std::uint64_t i) -> const std::string& {
      return gatewayKeys[uniform ? ingrid::bench::uniformIndex(chain, i, gatewayKeys.size()) : 0];
    };
  };
#endif
  auto ingridOp = [&](ingrid::Client& client, bool uniform) {
    return [&client, &ingridKeys, bucket, uniform](int chain, std::uint64_t i,
                                                   std::function<void(bool)> done) {
      const std::size_t k = uniform ? ingrid::bench::uniformIndex(chain, i, ingridKeys.size()) : 0;
      client.invokeAsync(ingridKeys[k], ingrid::TokenBucketAcquire{bucket, 1},
                         [done = std::move(done)](ingrid::Result<ingrid::AcquireAnswer> r) {
                           done(r.ok() && r->granted);
                         });
    };
  };
  const std::string echoMessage(64, 'x');  // about an acquire request's size
  SocketLoad echo;
  echo.request = [&](std::size_t, std::uint64_t) { return echoMessage; };
  echo.complete = [&](const std::string& b) {
    return b.size() >= echoMessage.size() ? echoMessage.size() : 0;
  };

  // Prefill: every key once, on every system (not measured).
  std::printf("prefilling %d keys on each system...\n", cfg.keys);
  std::fflush(stdout);
  {
    auto seq = [&](int chain, std::uint64_t i) {
      return static_cast<std::size_t>(i) * 64 + static_cast<std::size_t>(chain);
    };
    SocketLoad fill = redisLoad(true);
    fill.request = [&](std::size_t conn, std::uint64_t i) {
      const std::size_t k = seq(static_cast<int>(conn), i) % redisTokens.size();
      return resp({"EVALSHA", sha, "2", redisTokens[k], redisStamps[k], "1000000000", "1000000000",
                   "0", "1"});
    };
    const double fillSeconds = std::max(1.0, cfg.keys / 20000.0);
    if (cfg.wants("redis")) runSockets(redisPort, 64, fillSeconds, fill);
    if (withCluster) runSockets(clusterPortOf(true), 63, fillSeconds, clusterLoad(true));
    std::vector<ingrid::Client*> clients;
    if (cfg.wants("ingrid-1") || cfg.wants("ingrid-batch")) clients.push_back(soloClient.get());
    if (cfg.wants("ingrid-3")) clients.push_back(trioClient.get());
    for (ingrid::Client* c : clients) {
      ingrid::bench::runClosedLoop(
          [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
            c->invokeAsync(ingridKeys[seq(chain, i) % ingridKeys.size()],
                           ingrid::TokenBucketAcquire{bucket, 1},
                           [done = std::move(done)](ingrid::Result<ingrid::AcquireAnswer> r) {
                             done(r.ok());
                           });
          },
          64, fillSeconds);
    }
    // The gateways' keys: each once, count-bound.
    for (const bool redis : {true, false}) {
      if (!cfg.wants(redis ? "redis-gcra" : "ingrid-resp")) continue;
      std::size_t next = 0;  // runSockets runs its connections on this thread
      SocketLoad once = throttleLoad(redis, true);
      once.more = [&] { return next < gatewayKeys.size(); };
      once.request = [&, redis](std::size_t, std::uint64_t) {
        return throttleRequest(redis, gatewayKeys[next++]);
      };
      const auto r = runSockets(redis ? redisPort : respPort, 64, 600, once);
      if (r.failures != 0) {
        die(std::to_string(r.failures) + " of the prefill's CL.THROTTLE calls failed on " +
            (redis ? "redis" : "ingrid-resp"));
      }
    }
#ifdef INGRID_BENCH_RLS
    if (cfg.wants("ingrid-rls")) {
      if (const auto failed = rlsLoad.fill(gatewayKeys); failed != 0) {
        die(std::to_string(failed) + " of the prefill's RLS calls failed");
      }
    }
#endif
  }

  std::vector<Row> rows;
  // Runs one case (after a warm-up) unless --cases leaves its system out; then the row is empty
  // (0 ops/s, not printed, no ratio to it).
  auto measure = [&](const std::string& system, const std::string& keys, int inflight,
                     const std::vector<pid_t>& servers,
                     const std::function<ingrid::bench::LoopResult(double)>& run) {
    if (!cfg.wants(system)) return Row{system, keys, inflight};
    if (cfg.warmup > 0) run(cfg.warmup);
    const double cpu0 = cpuOf(servers);
    const double self0 = cpuMicros(::getpid());
    ingrid::bench::LoopResult r = run(cfg.seconds);
    const double self = cpuMicros(::getpid()) - self0;
    const auto ops = static_cast<double>(r.latenciesNs.size());
    Row row = summarize(system, keys, inflight, std::move(r), cpuOf(servers) - cpu0);
    row.clientCpuPerOp = ops > 0 ? self / ops : 0;
    rows.push_back(row);
    return row;
  };
  // Prints a row that ran, with its ratios; `redis`: the matching Redis row (ratioTo names it),
  // `cluster`: Redis Cluster's (ingrid-3), `native`: ingrid-1's (the gateways).
  auto report = [&](Row r, const Row* redis, const Row* cluster, const Row* native) {
    if (r.opsPerSec <= 0 && r.failures == 0) return;
    if (redis != nullptr && redis->opsPerSec > 0) {
      r.ratio = r.opsPerSec / redis->opsPerSec;
      r.ratioTo = redis->system;
    }
    if (cluster != nullptr && cluster->opsPerSec > 0) {
      r.clusterRatio = r.opsPerSec / cluster->opsPerSec;
    }
    if (native != nullptr && native->opsPerSec > 0) r.nativeRatio = r.opsPerSec / native->opsPerSec;
    rows.back() = r;
    print(r);
  };

  std::printf(
      "\n%s, %u CPUs, servers on CPU %d, load generator on CPU %d, %.1f s per case, ingrid-node "
      "%s\n",
      "bench_vs_redis", cpus, cfg.serverCpu, clientCpu, cfg.seconds,
      cfg.singleThread
          ? "--single-thread"
          : (cfg.shardPorts ? "--workers 1 (shard port)" : "--workers 1 --no-shard-ports"));
  for (int inflight : {1, 64}) {
    report(measure("floor", "-", inflight, {echoPid},
                   [&](double s) { return runSockets(echoPort, inflight, s, echo); }),
           nullptr, nullptr, nullptr);
  }
  if (cfg.pipeline > 1) {
    Row floor = measure("floor", "-", 64, {echoPid},
                        [&](double s) { return runSockets(echoPort, 64, s, echo, cfg.pipeline); });
    floor.pipeline = cfg.pipeline;
    report(floor, nullptr, nullptr, nullptr);
  }
  for (const bool uniform : {true, false}) {
    const std::string keys = uniform ? "uniform" : "hot";
    for (int inflight : cfg.inflight) {
      const Row redis = measure("redis", keys, inflight, {redisPid}, [&](double s) {
        return runSockets(redisPort, inflight, s, redisLoad(uniform));
      });
      report(redis, nullptr, nullptr, nullptr);
      const Row cluster = measure("redis-3+3", keys, inflight, clusterPids, [&](double s) {
        return runSockets(clusterPortOf(uniform), inflight, s, clusterLoad(uniform));
      });
      report(cluster, nullptr, nullptr, nullptr);
      const Row native = measure("ingrid-1", keys, inflight, {solo}, [&](double s) {
        return ingrid::bench::runClosedLoop(ingridOp(*soloClient, uniform), inflight, s);
      });
      report(native, &redis, nullptr, nullptr);
      report(measure("ingrid-3", keys, inflight, trio,
                     [&](double s) {
                       return ingrid::bench::runClosedLoop(ingridOp(*trioClient, uniform), inflight,
                                                           s);
                     }),
             &redis, &cluster, nullptr);
      if (!uniform) {
        ingrid::Batcher<ingrid::Client, ingrid::TokenBucketAcquire> batcher(*soloClient, {});
        report(
            measure("ingrid-batch", keys, inflight, {solo},
                    [&](double s) {
                      return ingrid::bench::runClosedLoop(
                          [&](int, std::uint64_t, std::function<void(bool)> done) {
                            batcher.invokeAsync(
                                ingridKeys[0], ingrid::TokenBucketAcquire{bucket, 1},
                                [done = std::move(done)](ingrid::Result<ingrid::AcquireAnswer> r) {
                                  done(r.ok() && r->granted);
                                });
                          },
                          inflight, s);
                    }),
            &redis, nullptr, nullptr);
      }
      // CL.THROTTLE: Redis + the GCRA script against the RESP gateway, one client code.
      const Row gcra = measure("redis-gcra", keys, inflight, {redisPid}, [&](double s) {
        return runSockets(redisPort, inflight, s, throttleLoad(true, uniform));
      });
      report(gcra, nullptr, nullptr, nullptr);
      report(measure("ingrid-resp", keys, inflight, {respPid},
                     [&](double s) {
                       return runSockets(respPort, inflight, s, throttleLoad(false, uniform));
                     }),
             &gcra, nullptr, &native);
      if (cfg.pipeline > 1) {  // the same two, each connection sending cfg.pipeline per write
        Row gcraPiped = measure("redis-gcra", keys, inflight, {redisPid}, [&](double s) {
          return runSockets(redisPort, inflight, s, throttleLoad(true, uniform), cfg.pipeline);
        });
        gcraPiped.pipeline = cfg.pipeline;
        report(gcraPiped, nullptr, nullptr, nullptr);
        Row respPiped = measure("ingrid-resp", keys, inflight, {respPid}, [&](double s) {
          return runSockets(respPort, inflight, s, throttleLoad(false, uniform), cfg.pipeline);
        });
        respPiped.pipeline = cfg.pipeline;
        report(respPiped, &gcraPiped, nullptr, nullptr);
      }
#ifdef INGRID_BENCH_RLS
      report(measure("ingrid-rls", keys, inflight, {rlsPid},
                     [&](double s) { return rlsLoad.run(inflight, s, gatewayKey(uniform)); }),
             nullptr, nullptr, &native);
#endif
    }
  }

  // Memory per bucket: `memoryBuckets` new buckets with 16-byte keys, each acquired once. ingrid:
  // the RSS delta of its processes; with 3 servers and 1 backup there are two copies of each
  // bucket, counted separately. Redis: the used_memory delta (two keys per bucket).
  if (cfg.memoryBuckets > 0 && cfg.wants("memory")) {
    const std::size_t n = cfg.memoryBuckets;
    auto memKey = [](std::size_t k) {
      std::string digits = std::to_string(k);  // 16 bytes: "m-" and 14 digits
      return "m-" + std::string(14 - std::min<std::size_t>(14, digits.size()), '0') + digits;
    };
    // Buckets that stay alive through the whole case: 1 token per 10,000 s, so a bucket that
    // gave one token is full again (and expires) only after 10,000 s, and the Lua script's TTL is
    // 2 * capacity / rate = 200,000 s. (With the throughput cases' fast refill both systems would
    // expire the first buckets before the last were made.)
    const ingrid::BucketParams memBucket =
        ingrid::BucketParams::perPeriod(10, 100'000 * ingrid::kNanosPerSecond);
    std::atomic<std::size_t> failed{0};
    auto fillIngrid = [&](ingrid::Client& client) {
      std::atomic<std::size_t> next{0};
      std::atomic<int> running{256};
      std::promise<void> done;
      std::function<void()> step = [&] {
        const std::size_t k = next.fetch_add(1);
        if (k >= n) {
          if (running.fetch_sub(1) == 1) done.set_value();
          return;
        }
        client.invokeAsync(memKey(k), ingrid::TokenBucketAcquire{memBucket, 1},
                           [&](ingrid::Result<ingrid::AcquireAnswer> r) {
                             if (!r) failed.fetch_add(1);
                             step();
                           });
      };
      for (int c = 0; c < 256; ++c) step();
      done.get_future().wait();
    };
    auto perBucket = [&](const std::string& system, double bytes, double copies) {
      const double b = bytes / (static_cast<double>(n) * copies);
      std::printf("%-13s memory: %zu buckets with 16-byte keys, %.1f B per bucket per copy\n",
                  system.c_str(), n, b);
      Row row{system, "memory", 0};
      row.memoryPerBucket = b;
      rows.push_back(row);
      return b;
    };
    const double redisBefore = redisUsedMemory(redisPort);
    {
      std::atomic<std::size_t> next{0};
      SocketLoad fill;
      fill.more = [&] { return next.load() < n; };
      fill.request = [&](std::size_t, std::uint64_t) {
        const std::string k = memKey(next.fetch_add(1));
        return resp({"EVALSHA", sha, "2", "rl:{" + k + "}:tokens", "rl:{" + k + "}:ts", "0.0001",
                     "10", "0", "1"});
      };
      fill.complete = redisReplyLength;
      runSockets(redisPort, 64, 600, fill);
    }
    const std::string keysAfter = redisCommand(redisPort, {"DBSIZE"});  // ":<count>"
    if (keysAfter.size() < 2 || std::stoull(keysAfter.substr(1)) < 2 * n) {
      die("redis holds " + keysAfter + " keys after the memory fill, expected at least " +
          std::to_string(2 * n));
    }
    const double redisBytes = perBucket("redis", redisUsedMemory(redisPort) - redisBefore, 1);
    const double soloBefore = rssBytes(solo);
    fillIngrid(*soloClient);
    const double soloBytes = perBucket("ingrid-1", rssBytes(solo) - soloBefore, 1);
    double trioBefore = 0;
    for (pid_t p : trio) trioBefore += rssBytes(p);
    fillIngrid(*trioClient);
    double trioAfter = 0;
    for (pid_t p : trio) trioAfter += rssBytes(p);
    const double trioBytes = perBucket("ingrid-3", trioAfter - trioBefore, 2);
    if (failed.load() != 0) {
      die(std::to_string(failed.load()) + " ingrid acquires failed during the memory fill");
    }
    std::printf("memory per bucket per copy: ingrid-1 %.2fx redis, ingrid-3 %.2fx redis\n",
                redisBytes > 0 ? soloBytes / redisBytes : 0,
                redisBytes > 0 ? trioBytes / redisBytes : 0);
  }

  std::ofstream csv(cfg.csv);
  csv << "system,keys,inflight,ops_per_s,p50_us,p99_us,p999_us,server_cpu_us_per_op,failed,"
         "ratio_to_redis,bytes_per_bucket_per_copy,ratio_to_redis_cluster,ratio_to_ingrid_1,"
         "load_cpu_us_per_op,pipeline\n";
  for (const Row& r : rows) {
    csv << r.system << ',' << r.keys << ',' << r.inflight << ',' << r.opsPerSec << ',' << r.p50
        << ',' << r.p99 << ',' << r.p999 << ',' << r.cpuPerOp << ',' << r.failures << ',' << r.ratio
        << ',' << r.memoryPerBucket << ',' << r.clusterRatio << ',' << r.nativeRatio << ','
        << r.clientCpuPerOp << ',' << r.pipeline << '\n';
  }
  std::printf("rows written to %s\n", cfg.csv.c_str());

  soloClient->stop();
  trioClient->stop();
  for (auto it = children.rbegin(); it != children.rend(); ++it) stop(*it);
  for (const Child& c : children) std::remove(c.log.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(clusterDir, ignored);
#ifdef INGRID_BENCH_RLS
  std::filesystem::remove_all(rlsDir, ignored);
#endif
  return 0;
}
