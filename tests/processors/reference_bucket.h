// ReferenceBucket: an independent model of docs/token-bucket.md for the token bucket's tests, its
// acquires and its reservations. The level is one exact integer in units of 1/refillPeriod token
// (no whole/remainder split, no clamping order), at the time `at` it was last brought up to (in
// the future while a reservation's debt is unpaid), and the entry's existence and expiry are
// tracked from the model's own time-to-full. Only what the write rule stores is kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include <ingrid/processors/token_bucket.h>

namespace ingrid::testing {

class ReferenceBucket {
  __extension__ typedef __int128 int128;
  static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

 public:
  explicit ReferenceBucket(const BucketParams& params) : p_(params) {}

  AcquireAnswer acquire(std::int64_t want, Nanos now) {
    const bool existed = bringUp(now);
    const int128 cost = int128{want} * p_.refillPeriod;
    AcquireAnswer answer;
    if (cost <= level_) {
      level_ -= cost;
      answer = {true, tokens(level_), 0};
    } else if (want > p_.capacity) {
      answer = {false, tokens(level_), kNever};
    } else {
      answer = {false, tokens(level_), saturate(behind(now) + ceilDiv(cost - level_, rate()))};
    }
    store(existed, answer.granted);
    return answer;
  }

  // Guava's reserve with a bound: the tokens are taken at the instant they exist, now + wait.
  ReserveAnswer reserve(std::int64_t want, Nanos maxWait, Nanos now) {
    const bool existed = bringUp(now);
    const int128 cost = int128{want} * p_.refillPeriod;
    ReserveAnswer answer;
    if (want > p_.capacity) {
      answer = {false, kNever, tokens(level_)};
    } else if (cost <= level_) {
      level_ -= cost;
      answer = {true, 0, tokens(level_)};
    } else {
      const int128 wait = behind(now) + ceilDiv(cost - level_, rate());
      if (now + wait > kMax) {
        answer = {false, kNever, tokens(level_)};  // no instant in int64 time
      } else if (wait > maxWait) {
        answer = {false, saturate(wait), tokens(level_)};
      } else {
        const int128 t = now + wait;
        level_ = std::min(full(), level_ + (t - at_) * rate()) - cost;
        at_ = static_cast<Nanos>(t);
        answer = {true, static_cast<Nanos>(wait), tokens(level_)};
      }
    }
    store(existed, answer.granted);
    return answer;
  }

  int128 level() const { return storedLevel_; }
  Nanos expiresAt() const { return expiresAt_; }

 private:
  // Brings the working level to `now` from what is stored (or a new bucket); returns whether an
  // entry existed.
  bool bringUp(Nanos now) {
    if (exists_ && expiresAt_ != kNever && now >= expiresAt_) exists_ = false;
    level_ = int128{p_.initialTokens.value_or(p_.capacity)} * p_.refillPeriod;
    at_ = now;
    if (exists_) {
      level_ = storedLevel_;
      at_ = storedAt_;
      if (now > at_) {
        level_ = std::min(full(), level_ + int128{now - at_} * rate());
        at_ = now;
      }
    }
    return exists_;
  }
  // The write rule: a denial on an existing bucket is not stored.
  void store(bool existed, bool granted) {
    if (existed && !granted) return;
    exists_ = true;
    storedLevel_ = level_;
    storedAt_ = at_;
    const int128 untilFull = ceilDiv(full() - level_, rate());
    expiresAt_ = untilFull > kMax ? kNever : saturate(at_ + untilFull);
  }
  int128 behind(Nanos now) const { return at_ > now ? int128{at_} - now : 0; }
  int128 rate() const { return p_.refillTokens; }
  int128 full() const { return int128{p_.capacity} * p_.refillPeriod; }
  std::int64_t tokens(int128 level) const {
    return static_cast<std::int64_t>(level / p_.refillPeriod);
  }
  static int128 ceilDiv(int128 a, int128 b) { return (a + b - 1) / b; }
  static Nanos saturate(int128 v) { return v >= kMax ? kNever : static_cast<Nanos>(v); }

  BucketParams p_;
  bool exists_ = false;
  int128 storedLevel_ = 0;
  Nanos storedAt_ = 0;
  Nanos expiresAt_ = kNever;
  int128 level_ = 0;  // the working copy of one request
  Nanos at_ = 0;
};

}  // namespace ingrid::testing
