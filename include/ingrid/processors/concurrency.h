// The concurrency limiter: at most `limit` units held at once, each grant a lease with an id and a
// time-to-live that the caller releases or extends; a lease nobody releases expires by itself.
// docs/concurrency.md is the specification (lease ids, expiry, a clock stepping backwards, the
// reply, what differs from ShenYu's concurrency script).
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

struct ConcurrencyParams {
  // The largest limit: the state holds up to this many leases of 24 bytes (96 KiB).
  static constexpr std::int64_t kMaxLimit = 4096;

  // Units held at once. REQUIRES: 1 <= limit <= kMaxLimit.
  std::int64_t limit = 0;
  // Nanoseconds a new lease lives unless released or extended (kNever: forever). REQUIRES: > 0.
  Nanos ttl = 0;

  std::optional<std::string> invalidReason() const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(limit, ttl);
  }
  friend bool operator==(const ConcurrencyParams&, const ConcurrencyParams&) = default;
};

struct Lease {
  // Unique at its key (docs/concurrency.md "Lease ids").
  std::int64_t id = 0;
  // Live while now < expiresAt.
  Nanos expiresAt = 0;
  // REQUIRES: 1 <= units <= ConcurrencyParams::kMaxLimit.
  std::int64_t units = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(id, expiresAt, units);
  }
  friend bool operator==(const Lease&, const Lease&) = default;
};

// The state stored in a concurrency limiter's entry.
struct ConcurrencyState {
  // The smallest id the next lease may get; every lease's id is below it.
  std::int64_t nextId = limiter::kMinInt64;
  // In the order granted: id strictly increasing.
  std::vector<Lease> leases;

  template <class Archive>
  void save(Archive& ar) const {
    ar(nextId, leases);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(nextId);
    leases.resize(loadBoundedSize(ar, ConcurrencyParams::kMaxLimit, "ConcurrencyState.leases"));
    for (auto& l : leases) ar(l);
  }
  friend bool operator==(const ConcurrencyState&, const ConcurrencyState&) = default;
};

// The reply of an acquire, a release and an extension. A denial is a normal answer.
struct LeaseAnswer {
  // Acquire: granted. Release, extend: the lease was live (and is now released, extended).
  bool granted = false;
  // Acquire: the new lease's id (0 if denied). Release, extend: the id asked.
  std::int64_t lease = 0;
  // Acquire: the limit. Release, extend: 0 (they carry no parameters).
  std::int64_t limit = 0;
  // Units held by live leases after this request.
  std::int64_t held = 0;
  // Acquire denied: nanoseconds until enough leases expire if none is released (kNever if
  // quantity > limit or no id is left). Otherwise 0.
  Nanos retryAfter = 0;
  // Granted acquire, live extension: the lease's time to live now. Otherwise 0.
  Nanos expiresAfter = 0;

  // Acquire: units still free, max(0, limit - held).
  std::int64_t remaining() const noexcept { return held < limit ? limit - held : 0; }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, lease, limit, held, retryAfter, expiresAfter);
  }
  friend bool operator==(const LeaseAnswer&, const LeaseAnswer&) = default;
};

// The math of docs/concurrency.md, for limiter_support.h's runners (the acquire) and the release
// and extension below.
struct Concurrency {
  using Params = ConcurrencyParams;
  using State = ConcurrencyState;
  using Answer = LeaseAnswer;
  static constexpr std::string_view kWhat = "a concurrency limiter";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params&, Nanos) { return State{}; }
  static std::optional<std::string> invalidState(const State& s);
  // Drops the leases expired at `now`; returns the units the live ones hold.
  static std::int64_t dropExpired(State& s, Nanos now);
  // REQUIRES: valid params, quantity > 0, a state without invalidState().
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now);
  static bool granted(const Answer& a) noexcept { return a.granted; }
  // max(nextId, the latest lease expiry): until then the state differs from an absent one.
  static Nanos expiresAt(const State& s) noexcept;
  static Nanos expiresAt(const State& s, const Params&) noexcept { return expiresAt(s); }
};

struct ConcurrencyNames {
  static constexpr std::string_view kSingle = "ingrid.ConcurrencyAcquire";
  static constexpr std::string_view kBatch = "ingrid.ConcurrencyBatchAcquire";
};

// Acquires a lease of `quantity` units if that many are free.
using ConcurrencyAcquire = limiter::LimiterRequest<Concurrency, ConcurrencyNames>;

// Several acquires at one key, in order, read once and written once; each grant its own lease.
using ConcurrencyBatchAcquire = limiter::LimiterBatch<Concurrency, ConcurrencyNames>;

// Releases the lease `lease` if it is live.
struct ConcurrencyRelease {
  static constexpr std::string_view kName = "ingrid.ConcurrencyRelease";
  using Result = LeaseAnswer;

  std::int64_t lease = 0;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(lease);
  }
};

// Extends the live lease `lease` to live at least `ttl` from now (never shortens it).
struct ConcurrencyExtend {
  static constexpr std::string_view kName = "ingrid.ConcurrencyExtend";
  using Result = LeaseAnswer;

  std::int64_t lease = 0;
  // REQUIRES: > 0.
  Nanos ttl = 0;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(lease, ttl);
  }
};

}  // namespace ingrid
