// Helpers of the test kit's tests: REQUIRE_OK, keys by owner, and the owners of a key, read
// from a node's topology.
#pragma once

#include <string>
#include <vector>

#include <ingrid/hash.h>
#include <ingrid/testing/cluster.h>
#include <ingrid/topology.h>

// REQUIRE for a Result<bool>, with the error's message when it fails.
#define REQUIRE_OK(expr)                                                       \
  do {                                                                         \
    const auto requireOk_ = (expr);                                            \
    INFO(#expr << ": " << (requireOk_ ? "ok" : requireOk_.error().message())); \
    REQUIRE(requireOk_.ok());                                                  \
  } while (false)

namespace ingrid::testing {

// The owners (primary first) of `key`, as node `via` routes it.
inline std::vector<MemberId> ownersOf(Cluster& c, const std::string& key, std::size_t via = 0) {
  const TopologyPtr t = c.node(via).topology();
  return t->table.owners(partitionOf(key, t->table.partitionCount()));
}

// A key whose primary is node `primary` and whose first backup is node `backup`; empty if none
// of the first 100000 candidates.
inline std::string keyOwnedBy(Cluster& c, std::size_t primary, std::size_t backup,
                              const std::string& prefix = "k") {
  const MemberId p = c.node(primary).memberId(), b = c.node(backup).memberId();
  for (int k = 0; k < 100000; ++k) {
    std::string key = prefix + std::to_string(k);
    const std::vector<MemberId> owners = ownersOf(c, key, primary);
    if (owners.size() >= 2 && owners[0] == p && owners[1] == b) return key;
  }
  return {};
}

// The node whose member id is `id`, or c.size() if none is up with it.
inline std::size_t nodeOfMember(Cluster& c, MemberId id) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c.up(i) && c.node(i).memberId() == id) return i;
  }
  return c.size();
}

}  // namespace ingrid::testing
