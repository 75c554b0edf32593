#include "cluster/rls_gateway/rls_gateway.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <variant>
#include <vector>

#include "cluster/rls_gateway/rls_mapping.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace ingrid {

namespace rls = envoy::service::ratelimit::v3;

namespace {

using Status = rls::RateLimitResponse::DescriptorStatus;

void setLimit(Status& s, const RlsRateLimit& limit) {
  auto* l = s.mutable_current_limit();
  l->set_name(limit.name);
  l->set_requests_per_unit(limit.requestsPerUnit);
  l->set_unit(static_cast<rls::RateLimitResponse::RateLimit::Unit>(limit.unit));
}

void setReset(Status& s, Nanos ns) {
  auto* d = s.mutable_duration_until_reset();
  d->set_seconds(ns / 1'000'000'000);
  d->set_nanos(static_cast<std::int32_t>(ns % 1'000'000'000));
}

// Nanoseconds to the end of the current window of `unit` (windows aligned to time 0, as the
// fixed window's): for an answer that reports no reset (nothing counted in this window).
Nanos untilWindowEnd(RlsUnit unit) {
  const Nanos now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  const Nanos length = rlsUnitNanos(unit);
  return length - now % length;
}

}  // namespace

class RlsGateway::Impl final : public rls::RateLimitService::CallbackService {
 public:
  Impl(Node& node, RlsGatewayOptions options) : node_(node), options_(std::move(options)) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const rls::RateLimitRequest* request,
                                            rls::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (inFlight_.fetch_add(1, std::memory_order_relaxed) >= options_.maxInFlight) {
      inFlight_.fetch_sub(1, std::memory_order_relaxed);
      refused_.fetch_add(1, std::memory_order_relaxed);
      reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                   "more than " + std::to_string(options_.maxInFlight) +
                                       " calls in progress (RlsGatewayOptions::maxInFlight)"));
      return reactor;
    }
    auto plans = planRateLimit(*request, *config());
    if (!plans) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      finish(reactor, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, plans.error().message()));
      return reactor;
    }
    auto call = std::make_shared<Call>(this, reactor, response, std::move(plans).value());
    for (std::size_t i = 0; i < call->plans.size(); ++i) response->add_statuses();
    // Answered here: the descriptors no bucket decides. The others count down `pending`.
    std::size_t limited = 0;
    for (std::size_t i = 0; i < call->plans.size(); ++i) {
      const RlsPlan& plan = call->plans[i];
      Status& s = *response->mutable_statuses(static_cast<int>(i));
      switch (plan.kind) {
        case RlsPlan::Kind::kNoRule:
          s.set_code(rls::RateLimitResponse::OK);
          break;
        case RlsPlan::Kind::kUnlimited:
          s.set_code(rls::RateLimitResponse::OK);
          s.set_limit_remaining(std::numeric_limits<std::uint32_t>::max());
          break;
        case RlsPlan::Kind::kBlocked:
          setLimit(s, plan.limit);
          setReset(s, untilWindowEnd(plan.limit.unit));
          call->over(i, s);
          break;
        case RlsPlan::Kind::kLimit:
          ++limited;
          break;
      }
    }
    call->pending.store(limited + 1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < call->plans.size(); ++i) {
      if (call->plans[i].kind != RlsPlan::Kind::kLimit) continue;
      std::visit(
          [&](const auto& limiter) {
            using Request = std::decay_t<decltype(limiter)>;
            if constexpr (std::is_same_v<Request, FixedWindowAcquire>) {
              node_.invokeAsync(call->plans[i].key, limiter, [call, i](Result<LimitAnswer> answer) {
                call->answered(i, std::move(answer));
              });
            } else {  // the mapping makes no other request
              call->answered(i, Error(Errc::invalid_argument, "not a fixed window"));
            }
          },
          *call->plans[i].request);
    }
    call->done();  // the initiating reference
    return reactor;
  }

  // One call: its plans, and its response, written by each answer in its own status.
  struct Call {
    Call(Impl* g, grpc::ServerUnaryReactor* r, rls::RateLimitResponse* out, std::vector<RlsPlan> p)
        : gateway(g), reactor(r), response(out), plans(std::move(p)) {}

    void over(std::size_t i, Status& s) {
      if (plans[i].shadowMode) {
        s.set_code(rls::RateLimitResponse::OK);
        gateway->shadowOver_.fetch_add(1, std::memory_order_relaxed);
      } else {
        s.set_code(rls::RateLimitResponse::OVER_LIMIT);
        anyOver.store(true, std::memory_order_relaxed);
      }
    }

    void answered(std::size_t i, Result<LimitAnswer> answer) {
      if (!answer) {
        std::lock_guard lock(errorMutex);
        if (error.empty()) error = answer.error().message();
      } else {
        const RlsPlan& plan = plans[i];
        Status& s = *response->mutable_statuses(static_cast<int>(i));
        setLimit(s, plan.limit);
        setReset(s, answer->resetAfter > 0 ? answer->resetAfter : untilWindowEnd(plan.limit.unit));
        if (answer->granted) {
          const std::int64_t remaining = std::clamp<std::int64_t>(
              answer->remaining, 0, std::numeric_limits<std::uint32_t>::max());
          s.set_code(rls::RateLimitResponse::OK);
          s.set_limit_remaining(static_cast<std::uint32_t>(remaining));
        } else {
          // Over (shadow mode too): limit_remaining 0, as envoyproxy/ratelimit answers, although
          // the denied hits took nothing from the window.
          over(i, s);
        }
      }
      done();
    }

    // Drops one reference of `pending`; the last finishes the call (acq_rel: it sees every
    // status the others wrote).
    void done() {
      if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      std::string failure;
      {
        std::lock_guard lock(errorMutex);
        failure = error;
      }
      if (!failure.empty()) {
        gateway->errors_.fetch_add(1, std::memory_order_relaxed);
        response->Clear();
        gateway->finish(reactor, grpc::Status(grpc::StatusCode::UNAVAILABLE, failure));
        return;
      }
      const bool over = anyOver.load(std::memory_order_relaxed);
      response->set_overall_code(over ? rls::RateLimitResponse::OVER_LIMIT
                                      : rls::RateLimitResponse::OK);
      (over ? gateway->overLimit_ : gateway->ok_).fetch_add(1, std::memory_order_relaxed);
      gateway->descriptors_.fetch_add(plans.size(), std::memory_order_relaxed);
      gateway->finish(reactor, grpc::Status::OK);
    }

    Impl* const gateway;
    grpc::ServerUnaryReactor* const reactor;
    rls::RateLimitResponse* const response;
    const std::vector<RlsPlan> plans;
    std::atomic<std::size_t> pending{0};
    std::atomic<bool> anyOver{false};
    std::mutex errorMutex;
    std::string error;  // the first answer's error, under errorMutex
  };

  void finish(grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
    inFlight_.fetch_sub(1, std::memory_order_relaxed);
    reactor->Finish(status);
  }

  RlsConfigPtr config() const {
    std::lock_guard lock(configMutex_);
    return config_;
  }

  Result<std::size_t> reload() {
    auto loaded = loadRlsConfig(options_.configFile);
    if (!loaded) {
      reloadsError_.fetch_add(1, std::memory_order_relaxed);
      return std::move(loaded).error();
    }
    const std::size_t rules = loaded.value()->ruleCount;
    {
      std::lock_guard lock(configMutex_);
      config_ = std::move(loaded).value();
    }
    reloadsOk_.fetch_add(1, std::memory_order_relaxed);
    return rules;
  }

  Node& node_;
  const RlsGatewayOptions options_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex configMutex_;
  RlsConfigPtr config_;  // under configMutex_
  std::atomic<std::size_t> inFlight_{0};
  std::atomic<std::uint64_t> ok_{0}, overLimit_{0}, refused_{0}, errors_{0}, descriptors_{0},
      shadowOver_{0}, reloadsOk_{0}, reloadsError_{0};
};

RlsGateway::RlsGateway(Node& node, RlsGatewayOptions options)
    : impl_(std::make_unique<Impl>(node, std::move(options))) {}

RlsGateway::~RlsGateway() { stop(); }

Result<std::uint16_t> RlsGateway::start(const std::string& address) {
  if (impl_->server_) {
    return Error(Errc::invalid_configuration, "the RLS gateway was started already");
  }
  auto loaded = loadRlsConfig(impl_->options_.configFile);
  if (!loaded) return std::move(loaded).error();
  {
    std::lock_guard lock(impl_->configMutex_);
    impl_->config_ = std::move(loaded).value();
  }
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Error(Errc::invalid_configuration, "RLS address '" + address + "' is not HOST:PORT");
  }
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<std::size_t>(impl_->options_.maxMessageBytes, std::numeric_limits<int>::max())));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(impl_->options_.maxConcurrentStreams));
  // gRPC sets SO_REUSEPORT by default: a second process would bind the same port and share its
  // calls. Off, a port in use fails start() instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(impl_.get());
  impl_->server_ = builder.BuildAndStart();
  if (!impl_->server_ || port <= 0) {
    impl_->server_.reset();
    return Error(Errc::invalid_configuration,
                 "cannot listen for RLS (gRPC) on " + address + " (address in use, or not local)");
  }
  return static_cast<std::uint16_t>(port);
}

void RlsGateway::stop() {
  if (!impl_->server_) return;
  impl_->server_->Shutdown(std::chrono::system_clock::now() + impl_->options_.shutdownGrace);
  impl_->server_->Wait();
  impl_->server_.reset();
}

Result<std::size_t> RlsGateway::reload() { return impl_->reload(); }

RlsConfigPtr RlsGateway::config() const { return impl_->config(); }

RlsGatewayCounts RlsGateway::counts() const noexcept {
  constexpr auto r = std::memory_order_relaxed;
  const Impl& i = *impl_;
  return RlsGatewayCounts{i.ok_.load(r),        i.overLimit_.load(r),   i.refused_.load(r),
                          i.errors_.load(r),    i.descriptors_.load(r), i.shadowOver_.load(r),
                          i.reloadsOk_.load(r), i.reloadsError_.load(r)};
}

std::string RlsGateway::metricsText() const {
  const RlsGatewayCounts c = counts();
  std::string out;
  const auto family = [&out](const char* name, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
  };
  const auto sample = [&out](const char* name, const char* labels, std::uint64_t value) {
    out += std::string(name) + labels + " " + std::to_string(value) + "\n";
  };
  family("ingrid_rls_calls_total", "ShouldRateLimit calls answered, by overall code.");
  sample("ingrid_rls_calls_total", "{code=\"ok\"}", c.ok);
  sample("ingrid_rls_calls_total", "{code=\"over_limit\"}", c.overLimit);
  family("ingrid_rls_refused_total",
         "ShouldRateLimit calls the gateway refused: INVALID_ARGUMENT (past a request bound) or "
         "RESOURCE_EXHAUSTED (past max in flight). Messages gRPC refuses for their size never "
         "reach the gateway and are not counted.");
  sample("ingrid_rls_refused_total", "", c.refused);
  family("ingrid_rls_errors_total", "ShouldRateLimit calls answered UNAVAILABLE.");
  sample("ingrid_rls_errors_total", "", c.errors);
  family("ingrid_rls_descriptors_total", "Descriptors answered.");
  sample("ingrid_rls_descriptors_total", "", c.descriptors);
  family("ingrid_rls_shadow_over_limit_total",
         "Shadow-mode descriptors that were over the limit, answered OK.");
  sample("ingrid_rls_shadow_over_limit_total", "", c.shadowOver);
  family("ingrid_rls_config_reloads_total", "Configuration reloads, by result.");
  sample("ingrid_rls_config_reloads_total", "{result=\"ok\"}", c.reloadsOk);
  sample("ingrid_rls_config_reloads_total", "{result=\"error\"}", c.reloadsError);
  return out;
}

}  // namespace ingrid
