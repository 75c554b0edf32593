// onFreshThread(): runs a test body on a new thread and joins it, for state kept per thread (the
// StringPool, the BlockCache): the body starts with that thread's state empty, whatever other
// tests left in theirs.
#pragma once

#include <thread>
#include <utility>

namespace ingrid::testing {

template <class F>
void onFreshThread(F body) {
  std::thread t(std::move(body));
  t.join();
}

}  // namespace ingrid::testing
