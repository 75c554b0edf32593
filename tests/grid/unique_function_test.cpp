#include <ingrid/unique_function.h>

#include <catch2/catch.hpp>

#include <array>
#include <memory>
#include <string>
#include <utility>

using namespace ingrid;

namespace {

// Counts the live copies of a callable (moved-from ones included, as the language has them).
struct Counted {
  static inline int live = 0;
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  Counted() { ++live; }
  Counted(Counted&& o) noexcept : calls(std::move(o.calls)) { ++live; }
  Counted(const Counted&) = delete;
  ~Counted() { --live; }
  int operator()(int x) { return x + ++*calls; }
};

// Too large to be stored inline.
struct Large {
  std::array<char, UniqueFunction<int(int)>::kInlineBytes + 1> bytes{};
  std::unique_ptr<int> owned = std::make_unique<int>(40);
  int operator()(int x) const { return x + *owned + bytes[0]; }
};

}  // namespace

TEST_CASE("UniqueFunction stores small callables inline and large ones on the heap, move-only",
          "[grid][unique_function]") {
  SECTION("a small callable: called, moved, destroyed once") {
    Counted::live = 0;
    {
      UniqueFunction<int(int)> f{Counted{}};
      CHECK(Counted::live == 1);
      CHECK(f(10) == 11);
      UniqueFunction<int(int)> g = std::move(f);
      CHECK_FALSE(f);  // NOLINT: a moved-from UniqueFunction is empty, by contract
      REQUIRE(g);
      CHECK(g(10) == 12);  // the same state moved along
      CHECK(Counted::live == 1);
      g = UniqueFunction<int(int)>{};
      CHECK(Counted::live == 0);
      CHECK_FALSE(g);
    }
    CHECK(Counted::live == 0);
  }
  SECTION("a large callable that owns memory") {
    UniqueFunction<int(int)> f{Large{}};
    CHECK(f(2) == 42);
    UniqueFunction<int(int)> g;
    g = std::move(f);
    CHECK_FALSE(f);  // NOLINT
    CHECK(g(1) == 41);
  }
  SECTION("a move-only argument and result") {
    UniqueFunction<std::unique_ptr<std::string>(std::unique_ptr<std::string>)> f =
        [suffix = std::string("!")](std::unique_ptr<std::string> s) {
          *s += suffix;
          return s;
        };
    CHECK(*f(std::make_unique<std::string>("done")) == "done!");
  }
  SECTION("assigning over a held callable destroys it first") {
    Counted::live = 0;
    UniqueFunction<int(int)> f{Counted{}};
    f = UniqueFunction<int(int)>{Counted{}};
    CHECK(Counted::live == 1);
    CHECK(f(0) == 1);
  }
}
