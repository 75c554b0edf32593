#include <ingrid/processors/counter.h>

#include <string>

#include <ingrid/processors/codec.h>

namespace ingrid {
namespace {

std::int64_t readCounter(const MutableEntry& entry) {
  if (!entry.exists()) return 0;
  try {
    return decode<std::int64_t>(entry.value());
  } catch (const std::exception& e) {
    throw ProcessorError(Errc::processor_failed,
                         std::string("entry does not hold a counter: ") + e.what());
  }
}

}  // namespace

Increment::Result Increment::process(MutableEntry& entry, Nanos) const {
  const std::int64_t current = readCounter(entry);
  std::int64_t next = 0;
  if (__builtin_add_overflow(current, delta, &next)) {
    throw ProcessorError(Errc::processor_failed, "counter " + std::to_string(current) + " + " +
                                                     std::to_string(delta) + " would overflow");
  }
  entry.setValue(encode(next));
  return next;
}

GetCounter::Result GetCounter::process(MutableEntry& entry, Nanos) const {
  return readCounter(entry);
}

}  // namespace ingrid
