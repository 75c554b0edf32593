// `ingrid-cli load`: a bounded closed-loop load test of one limiter request through the thin
// client, printing a summary line (granted, failed, messages) and the latency percentiles.
#pragma once

#include <string>

#include <ingrid/client.h>

namespace ingrid::cli {

struct LoadOptions {
  std::string limiter = "token-bucket";  // the --limiter name, for the summary line
  int keys = 1;                          // distinct keys, "load-0" ...; each request picks one
  int concurrency = 16;                  // requests in flight
  int seconds = 5;                       // duration
  bool batching = false;                 // through a Batcher (hot keys)
};

// Sends `request` (one unit) on `o.keys` keys with `o.concurrency` in flight for `o.seconds`
// through `client` (started), then prints the summary. Returns the exit status (0). Instantiated
// in cli_load.cpp for every request --limiter can make.
template <class P>
int runLoad(Client& client, const P& request, const LoadOptions& o);

}  // namespace ingrid::cli
