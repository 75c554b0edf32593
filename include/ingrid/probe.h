// Probe: the verdict of a health check (Node::liveness, readiness, clusterSafe).
#pragma once

#include <string>

namespace ingrid {

// A probe's verdict, with a one-line reason a person can act on.
struct Probe {
  bool ok = false;
  std::string reason;
};

}  // namespace ingrid
