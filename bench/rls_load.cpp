#include "rls_load.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace ingrid::bench {

namespace rls = envoy::service::ratelimit::v3;

std::string rlsBenchConfig() {
  return "domain: bench\n"
         "descriptors:\n"
         "  - key: user\n"
         "    rate_limit: {unit: day, requests_per_unit: 4294967295}\n";
}

namespace {

// One call's state; gRPC needs the context, request and response until the callback runs.
struct Call {
  grpc::ClientContext context;
  rls::RateLimitRequest request;
  rls::RateLimitResponse response;
};

}  // namespace

struct RlsLoad::Impl {
  std::string address;
  std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs;  // one per channel

  // One hit on the descriptor {user: value} of the domain "bench".
  static void prepare(Call& call, const std::string& value) {
    call.request.set_domain("bench");
    auto* entry = call.request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(value);
  }

  // Channels until `count` exist. Each has a local subchannel pool and an argument of its own,
  // so gRPC gives it its own connection instead of sharing one.
  void channels(std::size_t count) {
    while (stubs.size() < count) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("ingrid.bench.channel", static_cast<int>(stubs.size()));
      auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
      if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
        std::fprintf(stderr, "bench_vs_redis: the RLS channel to %s did not connect in 10 s\n",
                     address.c_str());
        std::exit(1);
      }
      stubs.push_back(rls::RateLimitService::NewStub(channel));
    }
  }
};

RlsLoad::RlsLoad(std::string address) : impl_(std::make_unique<Impl>()) {
  impl_->address = std::move(address);
}

RlsLoad::~RlsLoad() = default;

std::uint64_t RlsLoad::fill(const std::vector<std::string>& values) {
  impl_->channels(1);
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<int> running{kStreamsPerChannel};
  std::promise<void> finished;
  std::function<void()> step = [&] {
    const std::size_t k = next.fetch_add(1);
    if (k >= values.size()) {
      if (running.fetch_sub(1) == 1) finished.set_value();
      return;
    }
    auto call = std::make_shared<Call>();
    impl_->prepare(*call, values[k]);
    impl_->stubs[0]->async()->ShouldRateLimit(
        &call->context, &call->request, &call->response, [&, call](grpc::Status status) {
          if (!status.ok() || call->response.overall_code() != rls::RateLimitResponse::OK) {
            failed.fetch_add(1);
          }
          step();
        });
  };
  for (int c = 0; c < kStreamsPerChannel; ++c) step();
  finished.get_future().wait();
  return failed.load();
}

LoopResult RlsLoad::run(int inflight, double seconds,
                        const std::function<const std::string&(int, std::uint64_t)>& value) {
  impl_->channels(
      static_cast<std::size_t>((inflight + kStreamsPerChannel - 1) / kStreamsPerChannel));
  return runClosedLoop(
      [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
        auto call = std::make_shared<Call>();
        impl_->prepare(*call, value(chain, i));
        auto& stub = *impl_->stubs[static_cast<std::size_t>(chain / kStreamsPerChannel)];
        stub.async()->ShouldRateLimit(
            &call->context, &call->request, &call->response,
            [call, done = std::move(done)](grpc::Status status) {
              done(status.ok() && call->response.overall_code() == rls::RateLimitResponse::OK);
            });
      },
      inflight, seconds);
}

}  // namespace ingrid::bench
