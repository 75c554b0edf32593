#include "cluster/resp/resp_parser.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ingrid;
using Status = RespParser::Status;
using Args = std::vector<std::string>;

namespace {

// Every command the parser yields until it needs more (or fails: then "!" + its error last).
std::vector<Args> drain(RespParser& p) {
  std::vector<Args> out;
  Args args;
  for (;;) {
    const Status s = p.next(args);
    if (s == Status::kNeedMore) return out;
    if (s == Status::kError) {
      out.push_back({"!" + p.error()});
      return out;
    }
    out.push_back(args);
  }
}

}  // namespace

TEST_CASE("RESP parser: pipelined arrays and inline commands in one read", "[resp]") {
  RespParser p;
  p.feed(
      "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nPING\r\n$5\r\nhello\r\nPING x\r\n\r\n*0\r\n"
      "*3\r\n$3\r\nset\r\n$0\r\n\r\n$2\r\n\r\n\r\n");
  const auto got = drain(p);
  REQUIRE(got ==
          std::vector<Args>{{"PING"}, {"PING", "hello"}, {"PING", "x"}, {"set", "", "\r\n"}});
  REQUIRE(p.buffered() == 0);
}

TEST_CASE("RESP parser: a command split over reads, at every byte", "[resp]") {
  const std::string stream =
      "*5\r\n$11\r\nCL.THROTTLE\r\n$3\r\nkey\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\nPING\r\n";
  RespParser p;
  std::vector<Args> got;
  for (char c : stream) {
    p.feed(std::string(1, c));
    for (auto& a : drain(p)) got.push_back(a);
  }
  REQUIRE(got == std::vector<Args>{{"CL.THROTTLE", "key", "15", "30", "60"}, {"PING"}});
}

TEST_CASE("RESP parser: limits and malformed input are refused, naming the rule", "[resp]") {
  RespLimits limits;
  limits.maxArgs = 4;
  limits.maxBulk = 8;
  limits.maxInline = 16;
  const auto errorFor = [&](const std::string& bytes) {
    RespParser p(limits);
    p.feed(bytes);
    const auto got = drain(p);
    REQUIRE(!got.empty());
    // Final: the parser keeps refusing.
    Args args;
    CHECK(p.next(args) == Status::kError);
    return got.back().front();
  };
  CHECK(errorFor("*5\r\n") ==
        "!Protocol error: multibulk length 5 is over the limit of 4 arguments");
  CHECK(errorFor("*1\r\n$9\r\n") == "!Protocol error: bulk length 9 is over the limit of 8 bytes");
  CHECK(errorFor("*1\r\n$-1\r\n") == "!Protocol error: invalid bulk length '-1'");
  CHECK(errorFor("*x\r\n") == "!Protocol error: invalid multibulk length 'x'");
  CHECK(errorFor("*1\r\n:1\r\n") == "!Protocol error: expected '$', got ':'");
  CHECK(errorFor("*1\r\n$2\r\nabcd") ==
        "!Protocol error: bulk string of 2 bytes not followed by CRLF");
  CHECK(errorFor(std::string(18, 'a')) ==
        "!Protocol error: inline command is longer than the limit of 16 bytes");
  CHECK(errorFor("a b c d e\r\n") ==
        "!Protocol error: inline command has more than the limit of 4 arguments");
  CHECK(errorFor("*" + std::string(40, '1')) ==
        "!Protocol error: multibulk length line is longer than 32 bytes");
  // At the limits: accepted.
  RespParser p(limits);
  p.feed("*4\r\n$8\r\n12345678\r\n$0\r\n\r\n$1\r\na\r\n$1\r\nb\r\n" + std::string(16, 'x') +
         "\r\n");
  CHECK(drain(p) == std::vector<Args>{{"12345678", "", "a", "b"}, {std::string(16, 'x')}});
}
