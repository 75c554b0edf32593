#include <ingrid/processors/concurrency.h>

#include <algorithm>

namespace ingrid {

using limiter::int128;
using limiter::kMaxInt64;

namespace {

bool expired(const Lease& l, Nanos now) noexcept {
  return l.expiresAt != kNever && l.expiresAt <= now;
}

// A lease's time to live at `now`: kNever if it never expires.
Nanos timeToLive(Nanos expiresAt, Nanos now) noexcept {
  return expiresAt == kNever ? kNever : limiter::until(expiresAt, now);
}

// Stores the state, or removes the entry when it is the same as an absent one.
void store(MutableEntry& entry, const ConcurrencyState& s, Nanos now) {
  const Nanos at = Concurrency::expiresAt(s);
  if (at != kNever && at <= now) {
    entry.remove();
    return;
  }
  entry.setValue(encode(s));
  entry.setExpiresAt(at);
}

// The live lease with `id`, or nullptr.
Lease* find(ConcurrencyState& s, std::int64_t id) {
  auto it = std::lower_bound(s.leases.begin(), s.leases.end(), id,
                             [](const Lease& l, std::int64_t v) { return l.id < v; });
  return it != s.leases.end() && it->id == id ? &*it : nullptr;
}

}  // namespace

std::optional<std::string> ConcurrencyParams::invalidReason() const {
  if (limit < 1 || limit > kMaxLimit) {
    return "limit must be in [1, " + std::to_string(kMaxLimit) + "], got " + std::to_string(limit);
  }
  if (ttl <= 0) return "ttl must be > 0, got " + std::to_string(ttl);
  return std::nullopt;
}

std::optional<std::string> Concurrency::invalidState(const State& s) {
  for (std::size_t i = 0; i < s.leases.size(); ++i) {
    const Lease& l = s.leases[i];
    if (l.units < 1 || l.units > Params::kMaxLimit) {
      return "lease " + std::to_string(i) + " holds " + std::to_string(l.units) + " units";
    }
    if (i > 0 && l.id <= s.leases[i - 1].id) {
      return "lease " + std::to_string(i) + " is not later than the one before";
    }
    if (l.id >= s.nextId) {
      return "lease " + std::to_string(i) + " has an id not below nextId " +
             std::to_string(s.nextId);
    }
  }
  return std::nullopt;
}

std::int64_t Concurrency::dropExpired(State& s, Nanos now) {
  std::erase_if(s.leases, [now](const Lease& l) { return expired(l, now); });
  std::int64_t held = 0;  // at most kMaxLimit leases of at most kMaxLimit units
  for (const Lease& l : s.leases) held += l.units;
  return held;
}

Nanos Concurrency::expiresAt(const State& s) noexcept {
  Nanos at = s.nextId;
  for (const Lease& l : s.leases) at = std::max(at, l.expiresAt);
  return at;
}

LeaseAnswer Concurrency::take(State& s, const Params& p, std::int64_t quantity, Nanos now) {
  const std::int64_t held = dropExpired(s, now);
  const std::int64_t id = std::max(now, s.nextId);
  LeaseAnswer a;
  a.limit = p.limit;
  a.held = held;
  if (quantity > p.limit || id == kMaxInt64) {
    a.retryAfter = kNever;
  } else if (int128{held} + quantity <= p.limit) {
    const Nanos expiresAt = limiter::saturate(int128{now} + p.ttl);
    s.leases.push_back(Lease{id, expiresAt, quantity});
    s.nextId = id + 1;
    a.granted = true;
    a.lease = id;
    a.held = held + quantity;
    a.expiresAfter = timeToLive(expiresAt, now);
  } else {
    // The earliest time enough units have expired, if nothing is released or extended.
    std::vector<Lease> byExpiry = s.leases;
    std::sort(byExpiry.begin(), byExpiry.end(),
              [](const Lease& x, const Lease& y) { return x.expiresAt < y.expiresAt; });
    const std::int64_t need = held + quantity - p.limit;
    std::int64_t freed = 0;
    for (const Lease& l : byExpiry) {
      freed += l.units;
      if (freed >= need) {
        a.retryAfter = timeToLive(l.expiresAt, now);
        break;
      }
    }
  }
  return a;
}

namespace {

// The common part of a release and an extension: the answer for `lease` on the live leases at
// `now`, and `change(state, lease)` run on the lease if it is live (it stores what it changed).
template <class Change>
LeaseAnswer onLiveLease(MutableEntry& entry, std::int64_t lease, Nanos now, Change change) {
  LeaseAnswer a;
  a.lease = lease;
  std::optional<ConcurrencyState> stored = limiter::readState<Concurrency>(entry);
  if (!stored) return a;
  a.held = Concurrency::dropExpired(*stored, now);
  if (Lease* l = find(*stored, lease)) {
    a.granted = true;
    change(*stored, *l, a);
  }
  return a;
}

}  // namespace

LeaseAnswer ConcurrencyRelease::process(MutableEntry& entry, Nanos now) const {
  return onLiveLease(entry, lease, now, [&](ConcurrencyState& s, Lease& l, LeaseAnswer& a) {
    a.held -= l.units;
    s.leases.erase(s.leases.begin() + (&l - s.leases.data()));
    store(entry, s, now);
  });
}

LeaseAnswer ConcurrencyExtend::process(MutableEntry& entry, Nanos now) const {
  if (ttl <= 0) throwInvalidArgument("ttl must be > 0, got " + std::to_string(ttl));
  return onLiveLease(entry, lease, now, [&](ConcurrencyState& s, Lease& l, LeaseAnswer& a) {
    const Nanos extended = limiter::saturate(int128{now} + ttl);
    if (extended > l.expiresAt) {
      l.expiresAt = extended;
      store(entry, s, now);
    }
    a.expiresAfter = timeToLive(l.expiresAt, now);
  });
}

}  // namespace ingrid
