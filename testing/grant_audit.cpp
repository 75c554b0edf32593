// GrantAudit: the record of calls, and the check against the final state (grant_audit.h).
#include <ingrid/testing/grant_audit.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <ingrid/processors/codec.h>
#include <ingrid/testing/cluster.h>

namespace ingrid::testing {

bool outcomeUnknown(const Error& e) noexcept {
  return e == Errc::timeout || e == Errc::indeterminate || e == Errc::unreachable ||
         e == Errc::protocol_error || e == Errc::malformed_message;
}

namespace {
GrantAudit::Duration steadyElapsed() { return std::chrono::steady_clock::now().time_since_epoch(); }
}  // namespace

GrantAudit::GrantAudit(std::function<Duration()> now) : state_(std::make_shared<State>()) {
  if (now) {
    state_->now = std::move(now);
  } else {
    state_->now = steadyElapsed;
  }
}
GrantAudit::GrantAudit(const Cluster& cluster) : state_(std::make_shared<State>()) {
  if (cluster.network() == Network::kSimulated) {
    state_->now = [&cluster] { return cluster.elapsed(); };
  } else {
    state_->now = steadyElapsed;
  }
}
GrantAudit::~GrantAudit() = default;

GrantAudit::Duration GrantAudit::now(const State& state) { return state.now(); }

GrantAudit::Ticket GrantAudit::begin(std::string key, std::int64_t capacity, std::int64_t tokens,
                                     Duration deadline) {
  Call c;
  c.key = std::move(key);
  c.capacity = capacity;
  c.tokens = tokens;
  c.start = now(*state_);
  c.deadline = deadline;
  std::lock_guard lock(state_->mu);
  state_->calls.push_back(std::move(c));
  return state_->calls.size() - 1;
}

void GrantAudit::end(Ticket ticket, const Result<AcquireAnswer>& answer) {
  endOn(*state_, ticket, answer);
}

void GrantAudit::endOn(State& state, Ticket ticket, const Result<AcquireAnswer>& answer) {
  const Duration at = now(state);
  std::lock_guard lock(state.mu);
  if (ticket >= state.calls.size() || state.calls[ticket].answered) {
    ++state.doubleEnds;
    return;
  }
  Call& c = state.calls[ticket];
  c.answered = true;
  c.end = at;
  ++state.answered;
  if (!answer) {
    c.error = true;
    c.unknown = outcomeUnknown(answer.error());
  } else if (answer->granted) {
    c.granted = true;
    state.granted += c.tokens;
  } else {
    c.denied = true;
  }
}

std::size_t GrantAudit::calls() const {
  std::lock_guard lock(state_->mu);
  return state_->calls.size();
}
std::size_t GrantAudit::pending() const {
  std::lock_guard lock(state_->mu);
  return state_->calls.size() - state_->answered;
}
std::int64_t GrantAudit::granted() const {
  std::lock_guard lock(state_->mu);
  return state_->granted;
}

AuditReport GrantAudit::check(const std::function<Result<EntrySnapshot>(const std::string&)>& read,
                              Duration slack) const {
  std::vector<Call> calls;
  std::uint64_t doubleEnds = 0;
  {
    std::lock_guard lock(state_->mu);
    calls = state_->calls;
    doubleEnds = state_->doubleEnds;
  }
  AuditReport r;
  std::map<std::string, KeyVerdict> keys;
  for (const Call& c : calls) {
    KeyVerdict& v = keys[c.key];
    v.key = c.key;
    v.capacity = c.capacity;
    ++r.calls;
    if (!c.answered) {
      ++r.unanswered;
      v.unknown += c.tokens;  // it may still run
      continue;
    }
    const Duration took = c.end - c.start;
    r.longestCall = std::max(r.longestCall, took);
    if (took > c.deadline + slack) ++r.overDeadline;
    if (c.granted) {
      ++r.granted;
      v.acked += c.tokens;
    } else if (c.denied) {
      ++r.denied;
      ++v.denied;
    } else {
      ++r.errors;
      if (c.unknown) {
        ++r.unknown;
        v.unknown += c.tokens;
      }
    }
  }
  r.answeredTwice = doubleEnds;
  for (auto& [key, v] : keys) {
    Result<EntrySnapshot> state = read(key);
    if (!state) {
      ++r.unreadable;
      r.readError = key + ": " + state.error().message();
    } else {
      v.readable = true;
      v.consumed = state->exists ? v.capacity - decode<BucketState>(state->value).tokens : 0;
    }
    r.doubled += static_cast<std::uint64_t>(v.doubled());
    r.lost += static_cast<std::uint64_t>(v.lost());
    r.phantom += static_cast<std::uint64_t>(v.phantom());
    r.keys.push_back(v);
  }
  return r;
}

AuditReport GrantAudit::check(Cluster& cluster, Duration slack) const {
  using namespace std::chrono_literals;
  return check(
      [&cluster](const std::string& key) -> Result<EntrySnapshot> {
        Result<EntrySnapshot> last = Error(Errc::unavailable, "no node is up");
        const Cluster::Duration deadline = cluster.elapsed() + 30s;
        for (std::size_t round = 0;; ++round) {
          for (std::size_t i = 0; i < cluster.size(); ++i) {
            if (!cluster.up(i) || cluster.paused(i)) continue;
            last = cluster.invoke(i, key, GetEntry{});
            if (last) return last;
          }
          if (cluster.elapsed() >= deadline) return last;
          cluster.advance(100ms);  // a retry interval (simulated, or a real wait)
        }
      },
      slack);
}

std::string AuditReport::summary() const {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "%s: calls=%llu granted=%llu denied=%llu errors=%llu unknown=%llu "
      "unanswered=%llu answered_twice=%llu over_deadline=%llu keys=%zu doubled=%llu lost=%llu "
      "phantom=%llu unreadable=%llu longest_call_ms=%lld",
      ok() ? "ok" : "FAILED", static_cast<unsigned long long>(calls),
      static_cast<unsigned long long>(granted), static_cast<unsigned long long>(denied),
      static_cast<unsigned long long>(errors), static_cast<unsigned long long>(unknown),
      static_cast<unsigned long long>(unanswered), static_cast<unsigned long long>(answeredTwice),
      static_cast<unsigned long long>(overDeadline), keys.size(),
      static_cast<unsigned long long>(doubled), static_cast<unsigned long long>(lost),
      static_cast<unsigned long long>(phantom), static_cast<unsigned long long>(unreadable),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(longestCall).count()));
  return buf;
}

std::string AuditReport::failures(std::size_t maxKeys) const {
  std::string out;
  if (unanswered > 0) out += std::to_string(unanswered) + " calls were never answered\n";
  if (answeredTwice > 0) {
    out += std::to_string(answeredTwice) + " answers came for calls already answered\n";
  }
  if (overDeadline > 0) {
    out += std::to_string(overDeadline) + " calls were answered past their deadline\n";
  }
  if (unreadable > 0) {
    out += std::to_string(unreadable) + " keys could not be read (last: " + readError + ")\n";
  }
  for (const KeyVerdict& v : keys) {
    if (maxKeys == 0) break;
    if (v.doubled() == 0 && v.lost() == 0 && v.phantom() == 0) continue;
    out += v.key + ": acknowledged " + std::to_string(v.acked) + " of capacity " +
           std::to_string(v.capacity) + ", the final state counts " + std::to_string(v.consumed) +
           " (unknown outcomes " + std::to_string(v.unknown) + ")";
    if (v.doubled() > 0) out += "; " + std::to_string(v.doubled()) + " granted twice";
    if (v.lost() > 0) out += "; " + std::to_string(v.lost()) + " acknowledged grants lost";
    if (v.phantom() > 0) out += "; " + std::to_string(v.phantom()) + " consumed unexplained";
    out += "\n";
    --maxKeys;
  }
  return out;
}

std::int64_t AuditReport::ackedOn(const std::string& key) const {
  for (const KeyVerdict& v : keys) {
    if (v.key == key) return v.acked;
  }
  return 0;
}

}  // namespace ingrid::testing
