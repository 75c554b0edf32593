#include "cluster/transport/frame_faults.h"

#include <algorithm>

namespace ingrid {

int FrameFaults::add(Rule rule) {
  std::lock_guard lock(mu_);
  const int id = nextId_++;
  rules_.emplace(id, std::move(rule));
  active_.store(true, std::memory_order_relaxed);
  return id;
}

void FrameFaults::remove(int id) {
  std::lock_guard lock(mu_);
  rules_.erase(id);
  active_.store(!rules_.empty(), std::memory_order_relaxed);
}

void FrameFaults::clear() {
  std::lock_guard lock(mu_);
  rules_.clear();
  active_.store(false, std::memory_order_relaxed);
}

FrameFaults::Decision FrameFaults::decide(const std::string& fromIp, const std::string& toIp,
                                          MessageType type) {
  std::lock_guard lock(mu_);
  Decision d;
  ++counts_.judged;
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (const auto& [id, r] : rules_) {
    if ((r.from != "*" && r.from != fromIp) || (r.to != "*" && r.to != toIp)) continue;
    if (!r.types.empty() && std::find(r.types.begin(), r.types.end(), type) == r.types.end()) {
      continue;
    }
    if (r.cut || (r.drop > 0 && coin(rng_) < r.drop)) {
      d.drop = true;
      break;
    }
    if (r.duplicate > 0 && coin(rng_) < r.duplicate) d.duplicate = true;
    if (r.delayMax.count() > 0 && d.delay.count() == 0) {
      std::uniform_int_distribution<std::int64_t> ms(r.delayMin.count(), r.delayMax.count());
      d.delay = std::chrono::milliseconds(ms(rng_));
    }
  }
  if (d.drop) {
    ++counts_.dropped;
    return Decision{true, false, {}};
  }
  if (d.duplicate) ++counts_.duplicated;
  if (d.delay.count() > 0) ++counts_.delayed;
  return d;
}

FrameFaults::Counts FrameFaults::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

}  // namespace ingrid
