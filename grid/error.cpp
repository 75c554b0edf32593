#include <ingrid/error.h>

#include <iterator>

namespace ingrid {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "ingrid"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::invalid_key:
        return "invalid key";
      case Errc::unknown_processor:
        return "unknown entry processor (register it on every node)";
      case Errc::invalid_argument:
        return "invalid processor argument";
      case Errc::processor_failed:
        return "entry processor failed; the entry was left unchanged";
      case Errc::timeout:
        return "request deadline exceeded";
      case Errc::shutting_down:
        return "node is shutting down";
      case Errc::not_running:
        return "node is not running (call start() first)";
      case Errc::overloaded:
        return "overloaded: a queue bound was reached, retry later";
      case Errc::malformed_message:
        return "malformed message";
      case Errc::would_deadlock:
        return "blocking call from a partition worker thread would deadlock";
      case Errc::invalid_configuration:
        return "invalid configuration";
      case Errc::not_owner:
        return "not the owner of the key's partition (stale topology)";
      case Errc::unavailable:
        return "temporarily unavailable, retry shortly";
      case Errc::unreachable:
        return "unreachable";
      case Errc::indeterminate:
        return "indeterminate: applied on the primary, backup unconfirmed";
      case Errc::join_refused:
        return "join refused by the cluster";
      case Errc::protocol_error:
        return "protocol error";
      case Errc::no_quorum:
        return "no quorum: too few members to accept writes";
      case Errc::unauthenticated:
        return "unauthenticated: no proof of the cluster secret";
    }
    return "unknown ingrid error " + std::to_string(value);
  }
};

}  // namespace

std::string_view errcName(int value) noexcept {
  static constexpr std::string_view kNames[] = {
      "unknown",          "invalid_key",       "unknown_processor", "invalid_argument",
      "processor_failed", "timeout",           "shutting_down",     "not_running",
      "overloaded",       "malformed_message", "would_deadlock",    "invalid_configuration",
      "not_owner",        "unavailable",       "unreachable",       "indeterminate",
      "join_refused",     "protocol_error",    "no_quorum",         "unauthenticated"};
  static_assert(std::size(kNames) == kErrcMax + 1);
  return value >= 1 && value <= kErrcMax ? kNames[value] : kNames[0];
}

const std::error_category& errorCategory() noexcept {
  static const Category category;
  return category;
}

std::string Error::message() const {
  std::string text = code_.message();
  if (!detail_.empty()) {
    text += ": ";
    text += detail_;
  }
  return text;
}

}  // namespace ingrid
