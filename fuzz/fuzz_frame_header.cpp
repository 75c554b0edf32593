// fuzz_frame_header: decodeHeader (cluster/transport/frame.h) over a stream of frames, as a
// connection reads them (Connection::parseFrames): a header, its body skipped, the next header,
// until the bytes run out or a header is refused. Properties: a refused header is refused with
// protocol_error or malformed_message and a detail; an accepted one holds only valid fields,
// encodes back to exactly its 32 bytes, and is refused as malformed_message by a limit one byte
// below its body length.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <ingrid/error.h>

#include "cluster/transport/frame.h"

#include "fuzz_support.h"

namespace ingrid::fuzz {
namespace {

[[noreturn]] void fail(const std::string& what) { fuzzFail("fuzz_frame_header", what); }

void checkAccepted(const HeaderBytes& bytes, const FrameHeader& h) {
  const auto type = static_cast<std::uint16_t>(h.type);
  if (h.magic != kFrameMagic || h.version != kProtocolVersion || type < 1 ||
      type > kMaxMessageType || (h.flags & ~kKnownFlags) != 0 || (h.isError() && !h.isResponse()) ||
      (h.isOneWay() && (h.isResponse() || h.type != MessageType::kRaft)) || h.reserved != 0 ||
      h.bodyLength > kDefaultMaxBodyBytes) {
    fail("an accepted header holds an invalid field");
  }
  if (std::string_view(messageTypeName(h.type)) == "unknown") fail("an accepted type has no name");
  if (encodeHeader(h) != bytes) fail("an accepted header does not encode back to its bytes");
  if (h.bodyLength > 0) {
    FrameHeader again;
    auto error = decodeHeader(bytes, h.bodyLength - 1, again);
    if (!error || !(*error == Errc::malformed_message)) {
      fail("a body one byte over the limit is not refused as malformed_message");
    }
  }
}

}  // namespace
}  // namespace ingrid::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  std::size_t pos = 0;
  while (size - pos >= kFrameHeaderBytes) {
    HeaderBytes bytes;
    std::memcpy(bytes.data(), data + pos, kFrameHeaderBytes);
    FrameHeader header;
    if (auto error = decodeHeader(bytes, kDefaultMaxBodyBytes, header)) {
      if (!(*error == Errc::protocol_error) && !(*error == Errc::malformed_message)) {
        fuzz::fuzzFail("fuzz_frame_header", "refused with an unexpected code: " + error->message());
      }
      if (error->detail().empty()) fuzz::fuzzFail("fuzz_frame_header", "refused without a reason");
      break;  // the connection stops reading here
    }
    fuzz::checkAccepted(bytes, header);
    pos += kFrameHeaderBytes;
    pos += std::min<std::size_t>(header.bodyLength, size - pos);
  }
  return 0;
}
