#include <ingrid/processors/registry.h>

#include <algorithm>

#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/counter.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

namespace ingrid {
namespace detail {

std::string describeProcessorFailure(std::string_view name, const char* what) {
  std::string text = "processor '";
  text += name;
  text += "': ";
  text += what;
  return text;
}

}  // namespace detail

ProcessorRegistry ProcessorRegistry::withBuiltins() {
  ProcessorRegistry registry;
  registry.add<TokenBucketAcquire>();
  registry.add<TokenBucketBatchAcquire>();
  registry.add<TokenBucketReserve>();
  registry.add<TokenBucketBatchReserve>();
  registry.add<Increment>();
  registry.add<GetCounter>();
  registry.add<GetEntry>();
  registry.add<GcraThrottle>();
  registry.add<GcraBatchThrottle>();
  registry.add<FixedWindowAcquire>();
  registry.add<FixedWindowBatchAcquire>();
  registry.add<SlidingLogAcquire>();
  registry.add<SlidingLogBatchAcquire>();
  registry.add<SlidingWindowAcquire>();
  registry.add<SlidingWindowBatchAcquire>();
  registry.add<LeakyMeterAcquire>();
  registry.add<LeakyMeterBatchAcquire>();
  registry.add<LeakyShaperAcquire>();
  registry.add<LeakyShaperBatchAcquire>();
  registry.add<ConcurrencyAcquire>();
  registry.add<ConcurrencyBatchAcquire>();
  registry.add<ConcurrencyRelease>();
  registry.add<ConcurrencyExtend>();
  registry.add<CompositeBucketAcquire>();
  registry.add<CompositeBucketBatchAcquire>();
  registry.add<WarmupAcquire>();
  registry.add<WarmupBatchAcquire>();
  return registry;
}

bool ProcessorRegistry::add(std::string name, ErasedProcessorFn fn) {
  const auto [it, added] = byName_.try_emplace(name, Registered{fn, order_.size()});
  if (added) order_.push_back(std::move(name));
  return added;
}

ErasedProcessorFn ProcessorRegistry::find(std::string_view name) const noexcept {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second.fn;
}

std::pair<ErasedProcessorFn, std::size_t> ProcessorRegistry::lookup(
    std::string_view name) const noexcept {
  auto it = byName_.find(name);
  if (it == byName_.end()) return {nullptr, order_.size()};
  return {it->second.fn, it->second.index};
}

std::size_t ProcessorRegistry::indexOf(std::string_view name) const noexcept {
  auto it = byName_.find(name);
  return it == byName_.end() ? order_.size() : it->second.index;
}

std::vector<std::string> ProcessorRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(byName_.size());
  for (const auto& [name, fn] : byName_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ingrid
