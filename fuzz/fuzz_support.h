// What the harnesses share: how a harness reports a broken property, and a reader of the little
// header some harnesses put in front of the bytes they hand to a decoder.
//
// A harness calls its decoder on the input and catches what the decoder documents for malformed
// input (std::exception from decode(), an Error from the others). Anything else is a finding:
// a sanitizer report or a crash ends the run by itself, and a broken property (a value that
// decodes but does not encode back to itself, say) calls fuzzFail(), which aborts so that
// libFuzzer records the input.
// Thread safety: single-threaded, like libFuzzer's calls into a harness.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ingrid::fuzz {

// Prints what broke and aborts: libFuzzer writes the input as a crash artifact.
[[noreturn]] inline void fuzzFail(std::string_view harness, const std::string& what) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(harness.size()), harness.data(),
               what.c_str());
  std::abort();
}

// Reads fixed-width little-endian fields from the front of an input; past its end every field
// reads as 0, so every input maps to some case and none is wasted.
class InputReader {
 public:
  InputReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint64_t le(std::size_t bytes) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) {
      if (pos_ < size_) v |= std::uint64_t{data_[pos_++]} << (8 * i);
    }
    return v;
  }
  // The next `n` bytes, or fewer if the input ends first.
  std::string_view take(std::size_t n) {
    n = std::min(n, size_ - pos_);
    std::string_view out(reinterpret_cast<const char*>(data_) + pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view rest() { return take(size_ - pos_); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// The inverse of InputReader::le, for the corpus generator.
inline void putLe(std::string& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace ingrid::fuzz
