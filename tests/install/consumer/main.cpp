// A program outside the ingrid tree, built against the installed package.
#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

#include <iostream>

int main() {
  ingrid::Node node(ingrid::NodeOptions{.partitions = 16, .workerThreads = 1});
  if (!node.start()) return 1;
  auto r = node.invoke("k", ingrid::TokenBucketAcquire{ingrid::BucketParams::perPeriod(1, 1), 1});
  if (!r || !r->granted) return 1;
  std::cout << "consumer: granted\n";
  return 0;
}
