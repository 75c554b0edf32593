#include "grid/inline_bytes.h"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <utility>

using ingrid::InlineBytes;

TEST_CASE("Bytes are held inline up to InlineBytes::kInline, past that on the heap", "[grid]") {
  for (const std::size_t size : {std::size_t{0}, std::size_t{25}, InlineBytes::kInline,
                                 InlineBytes::kInline + 1, std::size_t{1000}}) {
    std::string bytes(size, 'x');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>('a' + i % 26);
    InlineBytes a(bytes);
    CHECK(a.view() == bytes);
    const bool inlined = a.view().data() >= reinterpret_cast<const char*>(&a) &&
                         a.view().data() < reinterpret_cast<const char*>(&a) + sizeof a;
    CHECK(inlined == (size <= InlineBytes::kInline));
    InlineBytes b(std::move(a));
    CHECK(b.view() == bytes);
    CHECK(a.view().empty());  // NOLINT(bugprone-use-after-move): a moved-from one is empty
    InlineBytes c(std::string_view("something else, longer than the inline bytes hold"));
    c = std::move(b);  // frees c's own heap bytes (ASan would report a leak otherwise)
    CHECK(c.view() == bytes);
  }
  STATIC_REQUIRE(sizeof(InlineBytes) == 40);
}
