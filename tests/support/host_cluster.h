// One ingrid-node per host of a HostLab (support/hosts.h), for the multi-host fault tests: the
// FaultCluster options that put member i on host i, listening on 0.0.0.0 and advertising its
// host's address, and the check that a lab can be used (or why the test skips). Catch2 tests
// only: labUsable() reports through Catch's FAIL and WARN.
//
// Thread safety: one test thread, as HostLab and FaultCluster.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "support/fault_harness.h"
#include "support/hosts.h"

namespace ingrid::testing {

// Whether `lab` can be used. Not where the namespaces cannot be made: a visible skip (WARN) on a
// developer's machine, a failure as root or with CI set (a green run must have made the hosts).
inline bool labUsable(const HostLab& lab) {
  if (lab.error().empty()) return true;
  if (HostLab::required())
    FAIL("cannot make the hosts' namespaces (required as root or with CI set): " << lab.error());
  WARN("skipped: " << lab.error());
  return false;
}

// `o` with one member per host of `lab`: member i runs on host i (its launcher) and listens on
// every interface there.
inline FaultClusterOptions onHosts(const HostLab& lab, FaultClusterOptions o = {}) {
  o.members = lab.hosts();
  o.launchers = lab.launchers();
  o.listen.assign(static_cast<std::size_t>(lab.hosts()), HostLab::listen());
  return o;
}

// Starts `cluster` (made with onHosts) and checks that each member is known by its host's address,
// not the wildcard it listens on. Empty on success, else what went wrong.
inline std::string startOnHosts(FaultCluster& cluster) {
  if (std::string failed = cluster.start(); !failed.empty()) return failed;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const std::string want = HostLab::endpoint(static_cast<int>(i));
    if (cluster[i].address != want) {
      return "member " + std::to_string(i) + " is known as " + cluster[i].address + ", not " + want;
    }
  }
  return {};
}

}  // namespace ingrid::testing
