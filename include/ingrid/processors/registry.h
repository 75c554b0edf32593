// ProcessorRegistry: stable processor name -> how to run it from bytes.
//
// Every node of a cluster must register the same processors. A registry is filled before a node
// starts and is immutable afterwards, so lookups take no lock.
// Thread safety: add() is not thread-safe; const members are safe from any thread.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/result.h>

namespace ingrid {

// A processor with its types erased: decodes the processor from `args`, runs it on `entry` and
// returns the encoded Result. Never throws; any failure is an Error naming the processor. On
// error, `entry`'s staged changes must be discarded by the caller.
using ErasedProcessorFn = Result<std::string> (*)(std::string_view args, MutableEntry& entry,
                                                  Nanos now);

namespace detail {

std::string describeProcessorFailure(std::string_view name, const char* what);

template <EntryProcessor P>
Result<std::string> runErased(std::string_view args, MutableEntry& entry, Nanos now) {
  const std::string_view name = P::kName;
  P processor{};
  try {
    decodeInto(args, processor);
  } catch (const std::exception& e) {
    return Error(Errc::invalid_argument,
                 "processor '" + std::string(name) + "': arguments do not decode: " + e.what());
  }
  try {
    return encode(processor.process(entry, now));
  } catch (const ProcessorError& e) {
    return Error(e.code(), describeProcessorFailure(name, e.what()));
  } catch (const std::exception& e) {
    return Error(Errc::processor_failed, describeProcessorFailure(name, e.what()));
  } catch (...) {
    return Error(Errc::processor_failed,
                 describeProcessorFailure(name, "threw something that is not a std::exception"));
  }
}

}  // namespace detail

class ProcessorRegistry {
 public:
  // An empty registry. Most users want withBuiltins().
  ProcessorRegistry() = default;
  // The built-in processors: token bucket acquire and batch acquire, increment, get counter,
  // get entry, and the limiters (GCRA, fixed window, sliding log and window, leaky meter and
  // shaper, concurrency leases, the composite bucket, warm-up) with their batch forms.
  static ProcessorRegistry withBuiltins();

  // Registers P. Returns false (and changes nothing) if a processor of that name is registered.
  template <EntryProcessor P>
  bool add() {
    return add(std::string(P::kName), &detail::runErased<P>);
  }
  bool add(std::string name, ErasedProcessorFn fn);

  // nullptr if no processor of that name is registered.
  ErasedProcessorFn find(std::string_view name) const noexcept;
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  // The registered names, sorted: what nodes compare when one joins.
  std::vector<std::string> names() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, ErasedProcessorFn, Hash, std::equal_to<>> byName_;
};

}  // namespace ingrid
