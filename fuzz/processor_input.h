// The input of fuzz_processors, shared with the corpus generator:
//   u8  processor   index into ProcessorRegistry::withBuiltins().names() (sorted), modulo its size
//   i64 now         the time the processor runs at, little-endian
//   u16 n           length of the stored value, little-endian
//   n bytes         the value of the entry in the "present" run
//   the rest        the processor's encoded arguments
// Fields past the end of a short input read as 0 (InputReader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <ingrid/clock.h>

#include "fuzz_support.h"

namespace ingrid::fuzz {

struct ProcessorInput {
  std::uint8_t processor = 0;
  Nanos now = 0;
  std::string_view value;
  std::string_view args;

  static ProcessorInput parse(const std::uint8_t* data, std::size_t size) {
    InputReader in(data, size);
    ProcessorInput out;
    out.processor = static_cast<std::uint8_t>(in.le(1));
    out.now = static_cast<Nanos>(in.le(8));
    const auto n = static_cast<std::size_t>(in.le(2));
    out.value = in.take(n);
    out.args = in.rest();
    return out;
  }

  std::string bytes() const {
    std::string out;
    putLe(out, processor, 1);
    putLe(out, static_cast<std::uint64_t>(now), 8);
    putLe(out, value.size(), 2);
    out.append(value);
    out.append(args);
    return out;
  }
};

}  // namespace ingrid::fuzz
