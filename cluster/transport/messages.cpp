#include "cluster/transport/messages.h"

#include <stdexcept>

namespace ingrid {

InvokeRequestSpans InvokeRequestSpans::of(std::string_view body) {
  // Cereal portable binary: a byte-order flag (1: little-endian, 0: big-endian), then each string
  // as a u64 length and its bytes.
  if (body.empty() || static_cast<unsigned char>(body[0]) > 1) {
    throw std::invalid_argument("no byte-order flag (0 or 1) at its start");
  }
  const bool little = body[0] == 1;
  std::size_t at = 1;
  // `what` and `prefix` name the field; they become a string only in an error (no allocation on
  // the way every request takes).
  auto number = [&](std::size_t bytes, const char* what, const char* prefix = "") {
    if (body.size() - at < bytes)
      throw std::invalid_argument(std::string("it ends inside ") + prefix + what);
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < bytes; ++i) {
      const std::uint64_t byte = static_cast<unsigned char>(body[at + i]);
      n |= little ? byte << (8 * i) : byte << (8 * (bytes - 1 - i));
    }
    at += bytes;
    return n;
  };
  auto next = [&](const char* what) {
    const std::uint64_t n = number(8, what, "the length of ");
    if (n > body.size() - at) {
      throw std::length_error(std::string(what) + " claims " + std::to_string(n) + " bytes; " +
                              std::to_string(body.size() - at) + " remain");
    }
    const Span span{static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(n)};
    at += static_cast<std::size_t>(n);
    return span;
  };
  InvokeRequestSpans spans;
  spans.key = next("the key");
  spans.processor = next("the processor name");
  spans.args = next("the arguments");
  spans.client = number(8, "the client id");
  spans.seq = number(8, "the request number");
  spans.doneBelow = number(8, "doneBelow");
  spans.timeoutMs = static_cast<std::uint32_t>(number(4, "timeoutMs"));
  spans.deadlineUnixMs = number(8, "deadlineUnixMs");
  if (at != body.size())
    throw std::runtime_error(std::to_string(body.size() - at) + " trailing bytes");
  return spans;
}

void InvokeReplyIn::load(codec_detail::PortableReader& ar) {
  result = ReplicateUpdateView::loadBytes(ar);
}

}  // namespace ingrid
