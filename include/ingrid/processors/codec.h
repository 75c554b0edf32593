// encode/decode: the Cereal portable-binary form of processors and results.
//
// The bytes are Cereal's portable binary archive's: a first byte 1 (little-endian data follows),
// then every number little-endian, a string or list as an 8-byte count and its elements. They are
// written and read by the two archives below, which work on a std::string and a string_view
// directly: Cereal's own portable binary archives go through std::ostream and std::istream, whose
// construction (a locale, three facet lookups by dynamic_cast) cost more than a token-bucket
// refill, several times per request. Cereal reads what these write, and they read what Cereal
// writes (a first byte 0, big-endian data, is converted). decode() refuses trailing bytes and
// reports malformed input by throwing std::exception; callers at the boundary (the registry, the
// wire) turn that into an Error.
//
// Untrusted lengths (invariant 11): while decode() runs, every string or list length read
// from the input is checked against the bytes that remain before anything is allocated (each
// element takes at least one byte, a character or number its full size), so a short input that
// claims a 100 GiB key is refused with std::length_error, having allocated nothing. This holds
// for Cereal's std::string and std::vector (replaced below for the archive) and for every count
// read with loadBoundedSize or checkRemaining.
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <ingrid/input_bounds.h>
#include <ingrid/string_pool.h>

namespace ingrid {

namespace codec_detail {

// Reverses the bytes of each `width`-byte element of data[0, size).
inline void swapEach(unsigned char* data, std::size_t size, std::size_t width) noexcept {
  for (std::size_t i = 0; i + width <= size; i += width) std::reverse(data + i, data + i + width);
}

// Cereal's portable binary form, appended to a std::string.
class PortableWriter final
    : public cereal::OutputArchive<PortableWriter, cereal::AllowEmptyClassElision> {
 public:
  explicit PortableWriter(std::string& out)
      : cereal::OutputArchive<PortableWriter, cereal::AllowEmptyClassElision>(this), out_(out) {
    out_.push_back('\x01');  // the data that follows is little-endian
  }

  // Appends `size` bytes of elements `DataSize` bytes wide, each little-endian.
  template <std::size_t DataSize>
  void saveBinary(const void* data, std::size_t size) {
    const std::size_t at = out_.size();
    out_.append(static_cast<const char*>(data), size);
    if constexpr (DataSize > 1 && std::endian::native != std::endian::little) {
      swapEach(reinterpret_cast<unsigned char*>(out_.data() + at), size, DataSize);
    }
  }

 private:
  std::string& out_;
};

// Reads Cereal's portable binary form in place from bytes owned elsewhere; what remains unread
// bounds every count read meanwhile (InputBounds).
class PortableReader final
    : public cereal::InputArchive<PortableReader, cereal::AllowEmptyClassElision>,
      public InputBounds {
 public:
  explicit PortableReader(std::string_view in)
      : cereal::InputArchive<PortableReader, cereal::AllowEmptyClassElision>(this), in_(in) {
    std::uint8_t littleEndian = 0;
    loadBinary<1>(&littleEndian, 1);
    if (littleEndian > 1) {
      throw std::invalid_argument("the encoding's first byte is " + std::to_string(littleEndian) +
                                  ", not 1 (little-endian) or 0 (big-endian)");
    }
    convert_ = (littleEndian == 1) != (std::endian::native == std::endian::little);
  }

  // Reads `size` bytes of elements `DataSize` bytes wide into `data`, in host order.
  template <std::size_t DataSize>
  void loadBinary(void* data, std::size_t size) {
    const std::string_view bytes = take(size);
    if (size == 0) return;
    std::memcpy(data, bytes.data(), size);
    if constexpr (DataSize > 1) {
      if (convert_) swapEach(static_cast<unsigned char*>(data), size, DataSize);
    }
  }

  // The next `size` bytes, in place: a view into the input (valid while the input lives), for a
  // byte string read without a copy.
  std::string_view take(std::size_t size) {
    if (size > remaining()) {
      throw std::out_of_range("truncated: " + std::to_string(size) + " bytes wanted, " +
                              std::to_string(remaining()) + " left");
    }
    const std::string_view bytes = in_.substr(at_, size);
    at_ += size;
    return bytes;
  }

  std::size_t remaining() const override { return in_.size() - at_; }

 private:
  std::string_view in_;
  std::size_t at_ = 0;
  bool convert_ = false;
};

}  // namespace codec_detail

// Encodes into `bytes` (appending).
template <class T>
void encodeInto(std::string& bytes, const T& value) {
  codec_detail::PortableWriter archive(bytes);
  archive(value);
}

// The encoded bytes, in a string from this thread's StringPool (string_pool.h): no allocation
// once the pool holds a string large enough, which it does in the steady state of a thread that
// gives back what it encodes. Cereal writes field by field; they are gathered in a scratch string
// this thread keeps for each T (its capacity reused), so the result costs at most one allocation
// instead of one per doubling. A large encoding (past 64 KiB) is handed over whole instead of
// copied, and the scratch starts anew.
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
  return StringPool::copy(scratch);
}

// Throws on malformed input or trailing bytes. Reads `bytes` in place (no copy).
template <class T>
void decodeInto(std::string_view bytes, T& value) {
  codec_detail::PortableReader archive(bytes);
  const InputBoundsScope scope(archive);
  archive(value);
  if (archive.remaining() != 0) {
    throw std::runtime_error(std::to_string(archive.remaining()) + " trailing bytes");
  }
}

template <class T>
T decode(std::string_view bytes) {
  T value{};
  decodeInto(bytes, value);
  return value;
}

// Reads a container size written by Cereal and checks it against `max` before anything is
// allocated: a count from the wire is never trusted (invariant 11).
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

// The archives' saves and loads, as Cereal's portable binary archive has them for its own: numbers
// and raw bytes by width, names dropped, a size as its 8-byte count.
namespace cereal {

template <class T>
requires std::is_arithmetic_v<T>
inline void CEREAL_SAVE_FUNCTION_NAME(ingrid::codec_detail::PortableWriter& ar, const T& t) {
  static_assert(!std::is_floating_point_v<T> || std::numeric_limits<T>::is_iec559,
                "portable binary holds only IEEE 754 floating point");
  ar.template saveBinary<sizeof(T)>(std::addressof(t), sizeof(t));
}

template <class T>
requires std::is_arithmetic_v<T>
inline void CEREAL_LOAD_FUNCTION_NAME(ingrid::codec_detail::PortableReader& ar, T& t) {
  static_assert(!std::is_floating_point_v<T> || std::numeric_limits<T>::is_iec559,
                "portable binary holds only IEEE 754 floating point");
  ar.template loadBinary<sizeof(T)>(std::addressof(t), sizeof(t));
}

template <class Archive, class T>
inline CEREAL_ARCHIVE_RESTRICT(ingrid::codec_detail::PortableReader,
                               ingrid::codec_detail::PortableWriter)
    CEREAL_SERIALIZE_FUNCTION_NAME(Archive& ar, NameValuePair<T>& t) {
  ar(t.value);
}

template <class Archive, class T>
inline CEREAL_ARCHIVE_RESTRICT(ingrid::codec_detail::PortableReader,
                               ingrid::codec_detail::PortableWriter)
    CEREAL_SERIALIZE_FUNCTION_NAME(Archive& ar, SizeTag<T>& t) {
  ar(t.size);
}

template <class T>
inline void CEREAL_SAVE_FUNCTION_NAME(ingrid::codec_detail::PortableWriter& ar,
                                      const BinaryData<T>& bd) {
  using Element = std::remove_const_t<std::remove_pointer_t<T>>;
  ar.template saveBinary<sizeof(Element)>(bd.data, static_cast<std::size_t>(bd.size));
}

template <class T>
inline void CEREAL_LOAD_FUNCTION_NAME(ingrid::codec_detail::PortableReader& ar, BinaryData<T>& bd) {
  using Element = std::remove_const_t<std::remove_pointer_t<T>>;
  ar.template loadBinary<sizeof(Element)>(bd.data, static_cast<std::size_t>(bd.size));
}

// A bool is one byte on the wire, 0 or 1; any other byte is refused (Cereal copies it into the
// bool as is, which is undefined behaviour; found by fuzz/fuzz_processors through
// BucketParams::initialTokens, a std::optional whose engaged flag is such a bool).
inline void CEREAL_LOAD_FUNCTION_NAME(ingrid::codec_detail::PortableReader& ar, bool& value) {
  std::uint8_t byte = 0;
  ar(byte);
  if (byte > 1) {
    throw std::invalid_argument("a bool holds " + std::to_string(byte) + ", not 0 or 1");
  }
  value = byte == 1;
}

// The loads of std::string and std::vector, with the length checked against the remaining input
// before the resize (Cereal's own resize first: a 17-byte body could ask for 100 GiB). More
// specialized than Cereal's templates, so these are chosen.
template <class CharT, class Traits, class Alloc>
void CEREAL_LOAD_FUNCTION_NAME(ingrid::codec_detail::PortableReader& ar,
                               std::basic_string<CharT, Traits, Alloc>& str) {
  size_type size = 0;
  ar(make_size_tag(size));
  ingrid::checkRemaining(size, sizeof(CharT), "a string");
  str.resize(static_cast<std::size_t>(size));
  ar(binary_data(str.data(), static_cast<std::size_t>(size) * sizeof(CharT)));
}

template <class T, class A>
requires(!std::is_same_v<T, bool>)  // std::vector<bool> is Cereal's (not used on the wire)
    void CEREAL_LOAD_FUNCTION_NAME(ingrid::codec_detail::PortableReader& ar,
                                   std::vector<T, A>& vector) {
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

CEREAL_REGISTER_ARCHIVE(ingrid::codec_detail::PortableWriter)
CEREAL_REGISTER_ARCHIVE(ingrid::codec_detail::PortableReader)
CEREAL_SETUP_ARCHIVE_TRAITS(ingrid::codec_detail::PortableReader,
                            ingrid::codec_detail::PortableWriter)
