// fuzz_messages: the message body decoders (cluster/transport/messages.h through
// include/ingrid/processors/codec.h). Input: one byte choosing a body type from kMessageBodies
// (message_table.h), then the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "message_table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const ingrid::fuzz::MessageBody& body =
      ingrid::fuzz::kMessageBodies[data[0] % ingrid::fuzz::kMessageBodyCount];
  body.decode(body.name, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
