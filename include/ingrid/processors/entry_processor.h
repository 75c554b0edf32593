// The entry-processor contract.
//
// An entry processor is a small value type that carries its own arguments and is sent, serialized,
// to the primary of a key, which runs it atomically on that key's entry (the processor contract
// below). A type P is an entry processor when it has:
//   static constexpr std::string_view kName   a stable, cluster-wide name ("ingrid.Increment");
//   using Result = ...;                        the answer type, default-constructible;
//   Result process(MutableEntry&, Nanos now) const;
//   template <class Archive> void serialize(Archive&)   for P and for Result (Cereal).
//
// process() is a pure function of (entry, arguments, now): no I/O, no blocking, no clock reads
// and no pointer kept into the entry after it returns (it may run on another node next time, and
// backups never re-run it). To fail, it throws ProcessorError (or any std::exception): the entry's
// staged changes are then discarded and the caller gets an Error naming the processor and the
// reason (invariant 4). A rate-limit denial is not a failure; it is a Result.
#pragma once

#include <concepts>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <ingrid/clock.h>
#include <ingrid/entry.h>
#include <ingrid/error.h>

namespace ingrid {

template <class P>
concept EntryProcessor = std::is_default_constructible_v<P> &&
    std::is_default_constructible_v<typename P::Result> &&
    requires(const P& p, MutableEntry& entry, Nanos now) {
  { P::kName } -> std::convertible_to<std::string_view>;
  { p.process(entry, now) } -> std::same_as<typename P::Result>;
};

// Thrown by process() to fail with a specific code (Errc::invalid_argument for bad arguments,
// Errc::processor_failed otherwise). The message is the reason shown to the caller.
class ProcessorError : public std::runtime_error {
 public:
  ProcessorError(Errc code, const std::string& reason) : std::runtime_error(reason), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

[[noreturn]] inline void throwInvalidArgument(const std::string& reason) {
  throw ProcessorError(Errc::invalid_argument, reason);
}

}  // namespace ingrid
