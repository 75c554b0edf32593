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

TEST_CASE("RESP parser: a command's total bytes are bounded", "[resp]") {
  RespLimits limits;
  limits.maxCommand = 64;
  // "*2\r\n$4\r\nECHO\r\n" is 14 bytes, "$40\r\n" 5 more: a 40-byte argument and its CRLF make
  // 61, within 64; 44 bytes make 65, refused when its header arrives (nothing more is read).
  RespParser fits(limits);
  fits.feed("*2\r\n$4\r\nECHO\r\n$40\r\n" + std::string(40, 'x') + "\r\n");
  CHECK(drain(fits) == std::vector<Args>{{"ECHO", std::string(40, 'x')}});
  RespParser over(limits);
  over.feed("*2\r\n$4\r\nECHO\r\n$44\r\n");
  CHECK(drain(over) ==
        std::vector<Args>{{"!Protocol error: command is longer than the limit of 64 bytes"}});
  // The count starts again with each command.
  RespParser many(limits);
  std::string twice;
  for (int i = 0; i < 2; ++i)
    twice += "*2\r\n$4\r\nECHO\r\n$40\r\n" + std::string(40, 'y') + "\r\n";
  many.feed(twice);
  CHECK(drain(many).size() == 2);
}

TEST_CASE("RESP parser: an inline line ended by LF alone is bounded like one ended by CRLF",
          "[resp]") {
  RespLimits limits;
  limits.maxInline = 8;
  RespParser fits(limits);
  fits.feed("PING 123\nPING 321\r\n");
  CHECK(drain(fits) == std::vector<Args>{{"PING", "123"}, {"PING", "321"}});
  // Nine bytes before a bare LF: over the limit (found by fuzz_resp).
  RespParser over(limits);
  over.feed("PING 1234\n");
  CHECK(drain(over) ==
        std::vector<Args>{{"!Protocol error: inline command is longer than the limit of 8 bytes"}});
}
