// fuzz_processors: every registered processor's argument decoding and run, through the erased
// function the registry hands a node (ProcessorRegistry::find). Input: processor_input.h.
//
// The processor runs on the arguments three times: on an absent entry, on a present entry holding
// the fuzzed value (a stored state that is not the processor's own), and again on whatever the
// first run stored. Properties: a failure is invalid_argument or processor_failed and names the
// processor; for the built-in processors, an answer decodes as the processor's Result and keeps
// the documented invariants (docs/token-bucket.md: tokens within [0, capacity], a denial waits,
// a grant does not; a counter stores what it answers; reads change nothing; and for each limiter
// of docs/gcra.md, fixed-window.md, sliding-window.md, leaky-bucket.md, concurrency.md and
// warm-up.md its answer's ranges, and that it writes only on a grant (a release or extension: only
// for a live lease), with the expiry its state implies).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/error.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/counter.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/registry.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

#include "fuzz_support.h"
#include "processor_input.h"

namespace ingrid::fuzz {
namespace {

[[noreturn]] void fail(const std::string& what) { fuzzFail("fuzz_processors", what); }

// One run: what the entry looked like before, the answer, and what the processor staged.
struct Run {
  std::optional<std::string> before;  // the value, if the entry existed
  std::string answer;                 // the encoded Result
  MutableEntry::Change change = MutableEntry::Change::kNone;
  std::optional<Entry> stored;  // set when change == kPut
};

template <class T>
T decodeOrFail(std::string_view bytes, const char* what) {
  try {
    return decode<T>(bytes);
  } catch (const std::exception& e) {
    fail(std::string(what) + " does not decode: " + e.what());
  }
}

void checkAnswer(const AcquireAnswer& a, const BucketParams& bucket) {
  if (a.remaining < 0 || a.remaining > bucket.capacity) fail("remaining tokens out of range");
  if (a.granted ? a.waitNanos != 0 : a.waitNanos <= 0) fail("a grant waits or a denial does not");
}

// The stored bucket holds `tokens` and keeps BucketState's invariants.
void checkStoredBucket(const Run& run, const BucketParams& bucket, std::int64_t tokens) {
  if (run.change == MutableEntry::Change::kRemove) fail("a token bucket removed its entry");
  if (!run.stored) return;
  const auto state = decodeOrFail<BucketState>(run.stored->value, "the stored bucket");
  if (state.tokens != tokens) fail("the stored bucket does not hold the tokens answered");
  if (state.remainder < 0 || state.remainder >= bucket.refillPeriod) {
    fail("the stored bucket's remainder is out of range");
  }
}

void checkRun(const TokenBucketAcquire& p, const Run& run) {
  const auto a = decodeOrFail<AcquireAnswer>(run.answer, "the answer");
  checkAnswer(a, p.bucket);
  checkStoredBucket(run, p.bucket, a.remaining);
}

void checkRun(const TokenBucketBatchAcquire& p, const Run& run) {
  const auto answers = decodeOrFail<std::vector<AcquireAnswer>>(run.answer, "the answers");
  if (answers.empty() || answers.size() != p.tokens.size()) fail("not one answer per want");
  for (const auto& a : answers) checkAnswer(a, p.bucket);
  checkStoredBucket(run, p.bucket, answers.back().remaining);
}

// docs/token-bucket.md "Reservations": a grant waits at most maxWait (a refusal longer), and
// the stored bucket keeps its invariants; written on a grant or a new bucket only.
void checkReserve(const BucketParams& bucket, Nanos maxWait, const std::vector<ReserveAnswer>& all,
                  const Run& run) {
  bool granted = false;
  for (const auto& a : all) {
    if (a.remaining < 0 || a.remaining > bucket.capacity) fail("reserve: remaining out of range");
    if (a.granted ? a.delay < 0 || a.delay > maxWait : a.delay <= maxWait && a.delay != kNever) {
      fail("reserve: a grant waits past maxWait, or a refusal within it");
    }
    granted = granted || a.granted;
  }
  if (run.change == MutableEntry::Change::kRemove) fail("a reservation removed its bucket");
  if (run.before && !granted && run.stored) fail("a refused reservation wrote");
  if (run.stored) checkStoredBucket(run, bucket, all.back().remaining);
}
void checkRun(const TokenBucketReserve& p, const Run& run) {
  checkReserve(p.bucket, p.maxWait, {decodeOrFail<ReserveAnswer>(run.answer, "the answer")}, run);
}
void checkRun(const TokenBucketBatchReserve& p, const Run& run) {
  const auto all = decodeOrFail<std::vector<ReserveAnswer>>(run.answer, "the answers");
  if (all.empty() || all.size() != p.tokens.size()) fail("reserve: not one answer per want");
  checkReserve(p.bucket, p.maxWait, all, run);
}

// docs/composite-bucket.md: each answer in range and at least the request's version; a stored
// state has 1 to 8 valid bands and expires when every band would be full.
void checkComposite(const CompositeParams& p, const std::vector<CompositeAnswer>& all,
                    const Run& run) {
  for (const auto& a : all) {
    if (a.remaining < 0) fail("composite: negative remaining");
    if (a.granted ? a.waitNanos != 0 : a.waitNanos <= 0) fail("composite: a grant waits");
    if (a.version < p.version) fail("composite: answered by an older configuration");
  }
  if (run.change == MutableEntry::Change::kRemove) fail("a composite bucket removed its entry");
  if (!run.stored) return;
  const auto state = decodeOrFail<CompositeState>(run.stored->value, "the stored composite");
  if (state.bands.empty() || state.version < p.version) fail("composite: stored state is off");
  for (const Band& b : state.bands) {
    if (b.config.invalidReason() || b.level.tokens < 0 || b.level.tokens > b.config.capacity ||
        b.level.remainder < 0 || b.level.remainder >= b.config.refillPeriod) {
      fail("composite: a stored band is out of range");
    }
  }
  if (run.stored->expiresAt != composite_bucket::expiresAt(state)) {
    fail("composite: the entry does not expire when its bands would be full");
  }
}
void checkRun(const CompositeBucketAcquire& p, const Run& run) {
  checkComposite(p.params, {decodeOrFail<CompositeAnswer>(run.answer, "the answer")}, run);
}
void checkRun(const CompositeBucketBatchAcquire& p, const Run& run) {
  const auto all = decodeOrFail<std::vector<CompositeAnswer>>(run.answer, "the answers");
  if (all.size() != p.tokens.size()) fail("composite: not one answer per want");
  checkComposite(p.params, all, run);
}

// docs/gcra.md: the limit is maxBurst + 1, remaining within [0, limit], a refusal waits and an
// allowance does not, durations are not negative.
void checkLimiterAnswer(const GcraAnswer& a, const GcraParams& p, std::int64_t quantity) {
  if (a.limit != p.maxBurst + 1) fail("GCRA: limit is not maxBurst + 1");
  if (a.remaining < 0 || a.remaining > a.limit) fail("GCRA: remaining out of range");
  if (a.limited ? a.retryAfter <= 0 : a.retryAfter != 0) fail("GCRA: a refusal does not wait");
  if (a.resetAfter < 0) fail("GCRA: negative resetAfter");
  if (!a.limited && quantity > a.limit) fail("GCRA: allowed more than the limit at once");
}

// The window and meter limiters' LimitAnswer: the same ranges.
void checkLimiterAnswer(const LimitAnswer& a, std::int64_t limit, std::int64_t quantity) {
  if (a.limit != limit) fail("a limiter answers another limit than its parameters'");
  if (a.remaining < 0 || a.remaining > a.limit) fail("a limiter's remaining is out of range");
  if (a.granted ? a.retryAfter != 0 : a.retryAfter <= 0) fail("a limiter's denial does not wait");
  if (a.resetAfter < 0) fail("a limiter's resetAfter is negative");
  if (a.granted && quantity > a.limit) fail("a limiter granted more than its limit at once");
}
void checkLimiterAnswer(const LimitAnswer& a, const WindowParams& p, std::int64_t quantity) {
  checkLimiterAnswer(a, p.limit, quantity);
}
void checkLimiterAnswer(const LimitAnswer& a, const SlidingLogParams& p, std::int64_t quantity) {
  checkLimiterAnswer(a, p.limit, quantity);
}
void checkLimiterAnswer(const LimitAnswer& a, const LeakyMeterParams& p, std::int64_t quantity) {
  checkLimiterAnswer(a, p.capacity, quantity);
}

// docs/concurrency.md: a grant names a lease that lives, within the limit; a denial waits and
// names none.
void checkLimiterAnswer(const LeaseAnswer& a, const ConcurrencyParams& p, std::int64_t quantity) {
  if (a.limit != p.limit) fail("concurrency: another limit than its parameters'");
  if (a.held < 0) fail("concurrency: negative units held");
  if (a.granted) {
    if (a.held > a.limit || quantity > a.limit) fail("concurrency: granted past the limit");
    if (a.retryAfter != 0 || a.expiresAfter <= 0) fail("concurrency: a grant waits or is dead");
  } else if (a.retryAfter <= 0 || a.lease != 0 || a.expiresAfter != 0) {
    fail("concurrency: a denial does not wait, or names a lease");
  }
}

// docs/leaky-bucket.md: the shaper's ranges; an admitted request's wait and its own work fit in
// the queue (capacity * E), a refused one has no delay.
void checkLimiterAnswer(const ShaperAnswer& a, const LeakyShaperParams& p, std::int64_t quantity) {
  checkLimiterAnswer(LimitAnswer{a.granted, a.limit, a.remaining, a.retryAfter, a.resetAfter},
                     p.capacity, quantity);
  const limiter::int128 e = p.asGcra().emissionInterval();
  if (a.granted ? a.delay < 0 || a.delay + quantity * e > p.capacity * e : a.delay != 0) {
    fail("the shaper's delay is out of range");
  }
}

// docs/warm-up.md: a grant waits at most maxWait and costs at least a nanosecond; a refusal
// waits longer than maxWait (or never); the stored permits stay within [0, maxPermits].
void checkLimiterAnswer(const WarmupAnswer& a, const WarmupParams& p, std::int64_t) {
  if (a.stored < 0 || a.stored > p.maxPermits()) fail("warm-up: stored permits out of range");
  if (a.cost <= 0) fail("warm-up: a request costs nothing");
  if (a.granted ? a.delay < 0 || a.delay > p.maxWait || a.cost == kNever
                : a.delay <= p.maxWait && a.delay != kNever) {
    fail("warm-up: a grant waits past maxWait, or a refusal does not");
  }
}

// A limiter of limiter_support.h: one answer per quantity, each in range; the entry is written
// exactly when a quantity > 0 was granted, with a state that decodes, is valid, and expires
// when its algorithm says.
template <class A>
void checkLimiterRun(const typename A::Params& params, const std::vector<std::int64_t>& quantities,
                     const std::vector<typename A::Answer>& answers, const Run& run) {
  if (answers.size() != quantities.size()) fail("a limiter answered not one per quantity");
  bool wrote = false;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    checkLimiterAnswer(answers[i], params, quantities[i]);
    wrote = wrote || (A::granted(answers[i]) && quantities[i] > 0);
  }
  if (run.change == MutableEntry::Change::kRemove) fail("a limiter removed its entry");
  if (wrote != run.stored.has_value()) fail("a limiter wrote without a grant, or did not write");
  if (!run.stored) return;
  const auto state = decodeOrFail<typename A::State>(run.stored->value, "the stored limiter");
  if (auto why = A::invalidState(state)) fail("a limiter stored an invalid state: " + *why);
  if (run.stored->expiresAt != A::expiresAt(state, params)) {
    fail("a limiter's entry does not expire when its state says");
  }
}

// P is a single request (params, quantity) of algorithm A, or its batch (params, quantities).
template <class A, class P>
void checkLimiter(const P& p, const Run& run) {
  if constexpr (requires { p.quantities; }) {
    const auto answers =
        decodeOrFail<std::vector<typename A::Answer>>(run.answer, "the limiter's answers");
    checkLimiterRun<A>(p.params, p.quantities, answers, run);
  } else {
    const auto a = decodeOrFail<typename A::Answer>(run.answer, "the limiter's answer");
    checkLimiterRun<A>(p.params, {p.quantity}, {a}, run);
  }
}

void checkRun(const GcraThrottle& p, const Run& run) { checkLimiter<Gcra>(p, run); }
void checkRun(const GcraBatchThrottle& p, const Run& run) { checkLimiter<Gcra>(p, run); }
void checkRun(const FixedWindowAcquire& p, const Run& run) { checkLimiter<FixedWindow>(p, run); }
void checkRun(const FixedWindowBatchAcquire& p, const Run& run) {
  checkLimiter<FixedWindow>(p, run);
}
void checkRun(const LeakyMeterAcquire& p, const Run& run) { checkLimiter<LeakyMeter>(p, run); }
void checkRun(const LeakyMeterBatchAcquire& p, const Run& run) { checkLimiter<LeakyMeter>(p, run); }
void checkRun(const LeakyShaperAcquire& p, const Run& run) { checkLimiter<LeakyShaper>(p, run); }
void checkRun(const LeakyShaperBatchAcquire& p, const Run& run) {
  checkLimiter<LeakyShaper>(p, run);
}
void checkRun(const SlidingLogAcquire& p, const Run& run) { checkLimiter<SlidingLog>(p, run); }
void checkRun(const SlidingLogBatchAcquire& p, const Run& run) { checkLimiter<SlidingLog>(p, run); }
void checkRun(const SlidingWindowAcquire& p, const Run& run) {
  checkLimiter<SlidingWindow>(p, run);
}
void checkRun(const SlidingWindowBatchAcquire& p, const Run& run) {
  checkLimiter<SlidingWindow>(p, run);
}

void checkRun(const WarmupAcquire& p, const Run& run) { checkLimiter<Warmup>(p, run); }
void checkRun(const WarmupBatchAcquire& p, const Run& run) { checkLimiter<Warmup>(p, run); }

void checkRun(const ConcurrencyAcquire& p, const Run& run) { checkLimiter<Concurrency>(p, run); }
void checkRun(const ConcurrencyBatchAcquire& p, const Run& run) {
  checkLimiter<Concurrency>(p, run);
}

// A release or an extension answers the lease asked, writes only for a live lease (an extension
// never removes), and stores a valid state that expires when the state says.
void checkLeaseRun(std::int64_t lease, const Run& run, bool isRelease) {
  const auto a = decodeOrFail<LeaseAnswer>(run.answer, "the lease answer");
  if (a.lease != lease || a.limit != 0 || a.held < 0 || a.retryAfter != 0) {
    fail("concurrency: a release or extension answers out of range");
  }
  if (!a.granted && run.change != MutableEntry::Change::kNone) {
    fail("concurrency: a release or extension of no live lease wrote");
  }
  if (run.change == MutableEntry::Change::kRemove && !isRelease) fail("an extension removed");
  if (isRelease ? a.expiresAfter != 0 : (a.granted != (a.expiresAfter > 0))) {
    fail("concurrency: expiresAfter out of range");
  }
  if (!run.stored) return;
  const auto state = decodeOrFail<ConcurrencyState>(run.stored->value, "the stored leases");
  if (auto why = Concurrency::invalidState(state)) fail("concurrency: invalid state: " + *why);
  if (run.stored->expiresAt != Concurrency::expiresAt(state)) {
    fail("concurrency: the entry does not expire when its state says");
  }
}
void checkRun(const ConcurrencyRelease& p, const Run& run) { checkLeaseRun(p.lease, run, true); }
void checkRun(const ConcurrencyExtend& p, const Run& run) { checkLeaseRun(p.lease, run, false); }

void checkRun(const Increment&, const Run& run) {
  const auto value = decodeOrFail<std::int64_t>(run.answer, "the counter");
  if (!run.stored) fail("an increment stored nothing");
  if (decodeOrFail<std::int64_t>(run.stored->value, "the stored counter") != value) {
    fail("an increment stored another value than it answered");
  }
}

void checkRun(const GetCounter&, const Run& run) {
  decodeOrFail<std::int64_t>(run.answer, "the counter");
  if (run.change != MutableEntry::Change::kNone) fail("GetCounter changed its entry");
}

void checkRun(const GetEntry&, const Run& run) {
  const auto got = decodeOrFail<EntrySnapshot>(run.answer, "the entry snapshot");
  if (run.change != MutableEntry::Change::kNone) fail("GetEntry changed its entry");
  if (got.exists != run.before.has_value() || (got.exists && got.value != *run.before)) {
    fail("GetEntry did not answer the entry");
  }
}

using Checker = void (*)(std::string_view args, const Run& run);

// The properties of P's successful runs; its arguments decoded once already.
template <class P>
void check(std::string_view args, const Run& run) {
  checkRun(decodeOrFail<P>(args, "arguments that ran"), run);
}

// Runs `fn` on `args` against `current` and checks what any processor must do.
std::optional<Run> runOnce(ErasedProcessorFn fn, std::string_view name, std::string_view args,
                           std::optional<EntryView> current, Nanos now) {
  MutableEntry entry("fuzz-key", current);
  Result<std::string> answer = fn(args, entry, now, nullptr);
  if (!answer) {
    const Error& e = answer.error();
    if (!(e == Errc::invalid_argument) && !(e == Errc::processor_failed)) {
      fail("failed with an unexpected code: " + e.message());
    }
    if (e.detail().find("processor '" + std::string(name) + "'") == std::string::npos) {
      fail("a failure does not name its processor: " + e.detail());
    }
    return std::nullopt;
  }
  Run run;
  if (current) run.before = std::string(current->value);
  run.answer = std::move(*answer);
  run.change = entry.change();
  if (run.change == MutableEntry::Change::kPut) run.stored = entry.takeEntry();
  return run;
}

struct Registered {
  std::string name;
  ErasedProcessorFn fn;
  Checker checker;  // nullptr for a processor this harness knows no properties of
};

std::vector<Registered> registered() {
  const std::map<std::string_view, Checker> checkers = {
      {TokenBucketAcquire::kName, &check<TokenBucketAcquire>},
      {TokenBucketBatchAcquire::kName, &check<TokenBucketBatchAcquire>},
      {TokenBucketReserve::kName, &check<TokenBucketReserve>},
      {CompositeBucketAcquire::kName, &check<CompositeBucketAcquire>},
      {CompositeBucketBatchAcquire::kName, &check<CompositeBucketBatchAcquire>},
      {TokenBucketBatchReserve::kName, &check<TokenBucketBatchReserve>},
      {Increment::kName, &check<Increment>},
      {GetCounter::kName, &check<GetCounter>},
      {GetEntry::kName, &check<GetEntry>},
      {GcraThrottle::kName, &check<GcraThrottle>},
      {GcraBatchThrottle::kName, &check<GcraBatchThrottle>},
      {FixedWindowAcquire::kName, &check<FixedWindowAcquire>},
      {FixedWindowBatchAcquire::kName, &check<FixedWindowBatchAcquire>},
      {SlidingLogAcquire::kName, &check<SlidingLogAcquire>},
      {LeakyMeterAcquire::kName, &check<LeakyMeterAcquire>},
      {LeakyMeterBatchAcquire::kName, &check<LeakyMeterBatchAcquire>},
      {LeakyShaperAcquire::kName, &check<LeakyShaperAcquire>},
      {LeakyShaperBatchAcquire::kName, &check<LeakyShaperBatchAcquire>},
      {SlidingLogBatchAcquire::kName, &check<SlidingLogBatchAcquire>},
      {SlidingWindowAcquire::kName, &check<SlidingWindowAcquire>},
      {SlidingWindowBatchAcquire::kName, &check<SlidingWindowBatchAcquire>},
      {ConcurrencyAcquire::kName, &check<ConcurrencyAcquire>},
      {ConcurrencyBatchAcquire::kName, &check<ConcurrencyBatchAcquire>},
      {ConcurrencyRelease::kName, &check<ConcurrencyRelease>},
      {ConcurrencyExtend::kName, &check<ConcurrencyExtend>},
      {WarmupAcquire::kName, &check<WarmupAcquire>},
      {WarmupBatchAcquire::kName, &check<WarmupBatchAcquire>},
  };
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  std::vector<Registered> out;
  for (const std::string& name : registry.names()) {
    auto it = checkers.find(name);
    out.push_back({name, registry.find(name), it == checkers.end() ? nullptr : it->second});
  }
  return out;
}

}  // namespace
}  // namespace ingrid::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ingrid;
  using namespace ingrid::fuzz;
  static const std::vector<Registered> processors = registered();
  const ProcessorInput in = ProcessorInput::parse(data, size);
  const Registered& p = processors[in.processor % processors.size()];

  auto checked = [&](std::optional<EntryView> current) -> std::optional<Run> {
    std::optional<Run> run = runOnce(p.fn, p.name, in.args, current, in.now);
    if (run && p.checker != nullptr) p.checker(in.args, *run);
    return run;
  };
  const std::optional<Run> first = checked(std::nullopt);
  checked(EntryView{in.value, kNever});
  if (first && first->stored) checked(first->stored->view());
  return 0;
}
