#include <ingrid/processors/codec.h>

#include <catch2/catch.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/optional.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace ingrid;

namespace {

// An input as the portable binary archive writes it: one byte saying little-endian, then `body`.
std::string input(const std::string& body) { return std::string(1, '\x01') + body; }

// The little-endian bytes of a Cereal size tag (portable binary: 8 bytes).
std::string sizeTag(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out;
}

struct Pair {
  std::string name;
  std::uint32_t value = 0;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(name, value);
  }
};

constexpr std::uint64_t k100GiB = 100ull << 30;

// A list read with loadBoundedSize, as the messages read theirs.
struct Bounded {
  std::vector<std::uint8_t> items;
  template <class Archive>
  void load(Archive& ar) {
    items.resize(loadBoundedSize(ar, 1u << 20, "Bounded.items"));
    for (auto& i : items) ar(i);
  }
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(items.size())));
    for (auto i : items) ar(i);
  }
};

}  // namespace

TEST_CASE("decode refuses a length larger than the bytes that remain, before allocating",
          "[processors][codec]") {
  // Under ASan a 100 GiB allocation would abort the test: refusing first is what passes.
  SECTION("a string") {
    const std::string bytes = input(sizeTag(k100GiB) + "12345678");  // 17 bytes in all
    REQUIRE(bytes.size() == 17);
    try {
      (void)decode<std::string>(bytes);
      FAIL("decoded");
    } catch (const std::length_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("a string claims 107374182400 elements") &&
                               Catch::Contains("only 8 bytes remain"));
    }
  }
  SECTION("a list of numbers: each takes its full size") {
    const std::string bytes = input(sizeTag(2) + std::string(15, '\0'));  // 2 x 8 bytes needs 16
    CHECK_THROWS_WITH(decode<std::vector<std::uint64_t>>(bytes),
                      Catch::Contains("a list of numbers claims 2"));
    const std::string fits = input(sizeTag(2) + std::string(16, '\x01'));
    CHECK(decode<std::vector<std::uint64_t>>(fits).size() == 2);
  }
  SECTION("a list of structures, and a string inside one") {
    CHECK_THROWS_WITH(decode<std::vector<Pair>>(input(sizeTag(k100GiB) + "x")),
                      Catch::Contains("a list claims"));
    const std::string inner = input(sizeTag(1) + sizeTag(k100GiB) + "tail");
    CHECK_THROWS_WITH(decode<std::vector<Pair>>(inner), Catch::Contains("a string claims"));
  }
  SECTION("loadBoundedSize checks the remaining bytes too") {
    CHECK_THROWS_WITH(decode<Bounded>(input(sizeTag(1000) + "abc")),
                      Catch::Contains("Bounded.items claims 1000"));
    CHECK_THROWS_WITH(decode<Bounded>(input(sizeTag(2u << 20))),
                      Catch::Contains("more than the limit"));
  }
}

TEST_CASE("decode still reads what encode wrote, large or empty", "[processors][codec]") {
  const std::string big(1 << 20, 'k');
  CHECK(decode<std::string>(encode(big)) == big);
  CHECK(decode<std::string>(encode(std::string())).empty());
  const std::vector<Pair> pairs{{"a", 1}, {std::string(300, 'b'), 2}, {"", 3}};
  const auto back = decode<std::vector<Pair>>(encode(pairs));
  REQUIRE(back.size() == 3);
  CHECK(back[1].name == pairs[1].name);
  CHECK(back[2].value == 3);
  const std::vector<std::int64_t> numbers{-1, 0, 1ll << 40};
  CHECK(decode<std::vector<std::int64_t>>(encode(numbers)) == numbers);
  // Outside decode() nothing is registered, so checkRemaining lets everything through.
  CHECK_NOTHROW(checkRemaining(k100GiB, 1, "no input"));
}

TEST_CASE("A bool on the wire is 0 or 1: any other byte is refused", "[processors][codec]") {
  CHECK(decode<bool>(input(std::string(1, '\x01'))) == true);
  CHECK(decode<bool>(input(std::string(1, '\x00'))) == false);
  CHECK_THROWS_WITH(decode<bool>(input(std::string(1, '\x02'))),
                    Catch::Contains("a bool holds 2, not 0 or 1"));
  // Through std::optional, whose engaged flag is such a bool (BucketParams::initialTokens).
  CHECK_THROWS_WITH(decode<std::optional<std::int64_t>>(input(std::string(1, '\x05') + sizeTag(7))),
                    Catch::Contains("a bool holds 5"));
  CHECK(decode<std::optional<std::int64_t>>(encode(std::optional<std::int64_t>(7))) == 7);
}

namespace {

// Every kind of field the messages and processors use.
struct Mixed {
  bool flag = false;
  std::uint8_t small = 0;
  std::int32_t negative = 0;
  std::uint64_t big = 0;
  double ratio = 0;
  std::string text;
  std::vector<std::uint32_t> numbers;
  std::vector<Pair> pairs;
  std::optional<std::int64_t> maybe;
  std::optional<std::int64_t> none;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(flag, small, negative, big, ratio, text, numbers, pairs, maybe, none);
  }
  bool operator==(const Mixed& o) const {
    return flag == o.flag && small == o.small && negative == o.negative && big == o.big &&
           ratio == o.ratio && text == o.text && numbers == o.numbers &&
           std::equal(pairs.begin(), pairs.end(), o.pairs.begin(), o.pairs.end(),
                      [](const Pair& a, const Pair& b) {
                        return a.name == b.name && a.value == b.value;
                      }) &&
           maybe == o.maybe && none == o.none;
  }
};

Mixed sampleMixed() {
  Mixed m;
  m.flag = true;
  m.small = 200;
  m.negative = -123456;
  m.big = std::numeric_limits<std::uint64_t>::max() - 7;
  m.ratio = 0.375;
  m.text = std::string(40, 'x') + "\0y";
  m.numbers = {1, 2, 0xFFFFFFFFu};
  m.pairs = {{"a", 1}, {"", 0}};
  m.maybe = -9;
  return m;
}

}  // namespace

TEST_CASE("The archives write the bytes of Cereal's portable binary archive, and read them",
          "[processors][codec]") {
  const Mixed m = sampleMixed();
  std::ostringstream cerealBytes;
  {
    cereal::PortableBinaryOutputArchive out(cerealBytes);
    out(m);
  }
  const std::string ours = encode(m);
  CHECK(ours == cerealBytes.str());
  CHECK(decode<Mixed>(cerealBytes.str()) == m);
  Mixed back;
  {
    std::istringstream in(ours);
    cereal::PortableBinaryInputArchive archive(in);
    archive(back);
  }
  CHECK(back == m);
}

TEST_CASE("decode reads big-endian portable binary, and refuses a bad first byte or a short input",
          "[processors][codec]") {
  const Mixed m = sampleMixed();
  std::ostringstream bigEndian;
  {
    cereal::PortableBinaryOutputArchive out(
        bigEndian, cereal::PortableBinaryOutputArchive::Options::BigEndian());
    out(m);
  }
  REQUIRE(bigEndian.str().front() == '\0');
  CHECK(decode<Mixed>(bigEndian.str()) == m);
  CHECK_THROWS_WITH(decode<std::uint32_t>(std::string("\x02") + "abcd"),
                    Catch::Contains("first byte is 2"));
  CHECK_THROWS_WITH(decode<std::uint32_t>(input("abc")), Catch::Contains("4 bytes wanted, 3 left"));
  CHECK_THROWS_WITH(decode<std::uint32_t>(std::string()),
                    Catch::Contains("1 bytes wanted, 0 left"));
}
