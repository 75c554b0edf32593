// The JSON that ingrid-cli's --json outputs share: an array of numbers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ingrid::cli {

// `[1,2,3]`: each item through std::to_string (integers).
template <class T>
std::string jsonArray(const std::vector<T>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + std::to_string(items[i]);
  return out + "]";
}

}  // namespace ingrid::cli
