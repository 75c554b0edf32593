// encode/decode: the Cereal portable-binary form of processors and results.
//
// Portable binary is little-endian whatever the host, so every node and client reads the same
// bytes the same way. decode() refuses trailing bytes and reports malformed input by throwing
// std::exception; callers at the boundary (the registry, the wire) turn that into an Error.
//
// Untrusted lengths (DESIGN invariant 11): while decode() runs, every string or list length read
// from the input is checked against the bytes that remain before anything is allocated (each
// element takes at least one byte, a character or number its full size), so a short input that
// claims a 100 GiB key is refused with std::length_error, having allocated nothing. This holds
// for Cereal's std::string and std::vector (replaced below for the portable binary archive) and
// for every count read with loadBoundedSize or checkRemaining.
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <istream>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <ingrid/input_bounds.h>

namespace ingrid {

namespace codec_detail {

// A write-only stream buffer appending to a std::string: encoding writes straight into the
// string it returns (an ostringstream would keep its own buffer and locale state).
class StringStreambuf final : public std::streambuf {
 public:
  explicit StringStreambuf(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<std::size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof()))
      out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

}  // namespace codec_detail

// Encodes into `bytes` (appending).
template <class T>
void encodeInto(std::string& bytes, const T& value) {
  codec_detail::StringStreambuf buffer(bytes);
  std::ostream out(&buffer);
  {
    cereal::PortableBinaryOutputArchive archive(out);
    archive(value);
  }
}

// The encoded bytes, in a string of their exact size. Cereal writes field by field; they are
// gathered in a scratch string this thread keeps for each T (its capacity reused), so the result
// costs one allocation (none within the small-string buffer) instead of one per doubling. A large
// encoding (past 64 KiB) is handed over whole instead of copied, and the scratch starts anew.
template <class T>
std::string encode(const T& value) {
  thread_local std::string scratch;
  thread_local bool inUse = false;
  if (inUse) {  // a serialize() that encodes something itself: no scratch for the inner one
    std::string bytes;
    encodeInto(bytes, value);
    return bytes;
  }
  inUse = true;
  struct Release {
    ~Release() { inUse = false; }
  } release;
  scratch.clear();
  encodeInto(scratch, value);
  if (scratch.size() > (64u << 10)) return std::exchange(scratch, std::string());
  return std::string(scratch);
}

namespace codec_detail {

// A read-only stream buffer over bytes owned elsewhere: decoding reads them in place.
class ViewStreambuf final : public std::streambuf, public InputBounds {
 public:
  explicit ViewStreambuf(std::string_view bytes) {
    // std::streambuf's get area is char*, but nothing here writes through it.
    char* begin = const_cast<char*>(bytes.data());
    setg(begin, begin, begin + bytes.size());
  }
  std::size_t remaining() const override { return static_cast<std::size_t>(egptr() - gptr()); }
};

}  // namespace codec_detail

// Throws on malformed input or trailing bytes. Reads `bytes` in place (no copy).
template <class T>
void decodeInto(std::string_view bytes, T& value) {
  codec_detail::ViewStreambuf buffer(bytes);
  const InputBoundsScope scope(buffer);
  std::istream in(&buffer);
  {
    cereal::PortableBinaryInputArchive archive(in);
    archive(value);
  }
  if (buffer.remaining() != 0) {
    throw std::runtime_error(std::to_string(buffer.remaining()) + " trailing bytes");
  }
}

template <class T>
T decode(std::string_view bytes) {
  T value{};
  decodeInto(bytes, value);
  return value;
}

// Reads a container size written by Cereal and checks it against `max` before anything is
// allocated: a count from the wire is never trusted (DESIGN invariant 11).
template <class Archive>
std::size_t loadBoundedSize(Archive& archive, std::size_t max, const char* what) {
  cereal::size_type size = 0;
  archive(cereal::make_size_tag(size));
  if (size > max) {
    throw std::length_error(std::string(what) + " has " + std::to_string(size) +
                            " elements, more than the limit of " + std::to_string(max));
  }
  checkRemaining(size, 1, what);
  return static_cast<std::size_t>(size);
}

}  // namespace ingrid

// Cereal's loads of std::string and std::vector for the portable binary archive, with the length
// checked against the remaining input before the resize (Cereal's own resize first: a 17-byte
// body could ask for 100 GiB). More specialized than Cereal's templates, so these are chosen.
namespace cereal {

// A bool is one byte on the wire, 0 or 1; any other byte is refused (Cereal copies it into the
// bool as is, which is undefined behaviour; found by fuzz/fuzz_processors through
// BucketParams::initialTokens, a std::optional whose engaged flag is such a bool).
inline void CEREAL_LOAD_FUNCTION_NAME(PortableBinaryInputArchive& ar, bool& value) {
  std::uint8_t byte = 0;
  ar(byte);
  if (byte > 1) {
    throw std::invalid_argument("a bool holds " + std::to_string(byte) + ", not 0 or 1");
  }
  value = byte == 1;
}

template <class CharT, class Traits, class Alloc>
void CEREAL_LOAD_FUNCTION_NAME(PortableBinaryInputArchive& ar,
                               std::basic_string<CharT, Traits, Alloc>& str) {
  size_type size = 0;
  ar(make_size_tag(size));
  ingrid::checkRemaining(size, sizeof(CharT), "a string");
  str.resize(static_cast<std::size_t>(size));
  ar(binary_data(str.data(), static_cast<std::size_t>(size) * sizeof(CharT)));
}

template <class T, class A>
requires(!std::is_same_v<T, bool>)  // std::vector<bool> is Cereal's (not used on the wire)
    void CEREAL_LOAD_FUNCTION_NAME(PortableBinaryInputArchive& ar, std::vector<T, A>& vector) {
  size_type size = 0;
  ar(make_size_tag(size));
  if constexpr (std::is_arithmetic_v<T>) {
    ingrid::checkRemaining(size, sizeof(T), "a list of numbers");
    vector.resize(static_cast<std::size_t>(size));
    ar(binary_data(vector.data(), static_cast<std::size_t>(size) * sizeof(T)));
  } else {
    // Every element takes at least one byte (no element type here is empty). Elements are
    // appended as they decode, with room reserved for at most one per remaining byte, so a list
    // of large structures cannot ask for sizeof(T) times the input before its bytes are there.
    static_assert(!std::is_empty_v<T>, "an empty element type takes no bytes: bound it otherwise");
    ingrid::checkRemaining(size, 1, "a list");
    vector.clear();
    vector.reserve(static_cast<std::size_t>(
        std::min<size_type>(size, static_cast<size_type>(ingrid::remainingInput()))));
    for (size_type i = 0; i < size; ++i) {
      T element{};
      ar(element);
      vector.push_back(std::move(element));
    }
  }
}

}  // namespace cereal
