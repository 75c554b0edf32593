// Errors of ingrid's invoke surface (embedded node and thin client alike).
//
// An Errc is surfaced as a std::error_code in the "ingrid" category; an Error pairs that code
// with a detail string naming the thing and the reason ("processor 'ingrid.TokenBucketAcquire'
// rejected its arguments: capacity must be > 0"). A rate-limit denial is NOT an error: it is a
// successful answer with granted == false.
//
// Thread safety: Error is a value type; distinct objects are safe, shared const objects are safe.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace ingrid {

enum class Errc {
  // The key is not acceptable (too long, for instance).
  invalid_key = 1,
  // No processor of that name is registered on the executing node.
  unknown_processor,
  // The processor rejected its arguments (a value out of range, bytes that do not decode).
  invalid_argument,
  // The processor threw or failed while running; the entry was left unchanged.
  processor_failed,
  // The request did not complete before its deadline.
  timeout,
  // The node or client is stopping or stopped; the request was not run.
  shutting_down,
  // The node or client was never started.
  not_running,
  // A bound was hit (queued requests, batch size); retry later or slow down.
  overloaded,
  // A message on the wire was malformed or too large.
  malformed_message,
  // invoke() was called from a thread on which blocking would deadlock (a partition worker).
  would_deadlock,
  // The node's configuration is not usable (zero partitions, for instance).
  invalid_configuration,
  // The receiver is not the key's primary at the sender's topology; redirects ran out.
  not_owner,
  // The partition or member cannot serve right now (migrating, connecting), or a request's
  // outcome is not settled yet (a copy of one still replicating); retry shortly (with the same
  // request id, which the client does: it runs at most once).
  unavailable,
  // No member could be reached (connection refused, reset, closed) within the deadline.
  unreachable,
  // Applied on the primary, but a backup did not confirm: the outcome may not survive failover.
  indeterminate,
  // The cluster refused this node's join (different processors or partition count, ...).
  join_refused,
  // The peer broke the protocol (bad magic, wrong version, unexpected message).
  protocol_error,
  // The executing member sees fewer members than NodeOptions::minMembers: a processor that
  // would write is refused, changing nothing (split-brain protection). Reads still run.
  no_quorum,
  // The peer did not prove it knows the cluster secret (NodeOptions::clusterSecret): what it
  // sent was refused and the connection closed.
  unauthenticated,
};

// The largest Errc value: outcomes are indexed 1..kErrcMax.
inline constexpr int kErrcMax = static_cast<int>(Errc::unauthenticated);
// The enumerator's name ("not_owner"): what metrics label an error with. "unknown" outside Errc.
std::string_view errcName(int value) noexcept;

const std::error_category& errorCategory() noexcept;

inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), errorCategory()};
}

// A std::error_code plus the detail a person needs to act on it.
class Error {
 public:
  Error() = default;
  Error(Errc code, std::string detail) : code_(make_error_code(code)), detail_(std::move(detail)) {}
  Error(std::error_code code, std::string detail) : code_(code), detail_(std::move(detail)) {}

  const std::error_code& code() const noexcept { return code_; }
  const std::string& detail() const noexcept { return detail_; }
  // "<category message>: <detail>", or just the category message when there is no detail.
  std::string message() const;

  friend bool operator==(const Error& e, Errc c) noexcept { return e.code_ == make_error_code(c); }

 private:
  std::error_code code_;
  std::string detail_;
};

}  // namespace ingrid

namespace std {
template <>
struct is_error_code_enum<ingrid::Errc> : true_type {};
}  // namespace std
