#include <ingrid/client.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "cluster/transport/call_router.h"
#include "cluster/transport/member_auth.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/shard_links.h"
#include "cluster/transport/tls.h"
#include "cluster/transport/topology_watch.h"
#include "cluster/transport/transport.h"

namespace ingrid {

class ClientImpl final : public ConnectionHandler,
                         private CallRouter::Host,
                         private TopologyWatch::Host {
 public:
  explicit ClientImpl(ClientOptions options) : options_(std::move(options)) {}
  ~ClientImpl() override { stop(); }

  Result<bool> start();
  void stop();
  void invokeRaw(std::string key, std::string_view processor, std::string args, RawCompletion done);
  TopologyPtr topology() const { return topology_.load(); }
  Result<Topology> topologyOf(const std::string& address);
  Result<MemberStatus> statusOf(const std::string& address);
  Result<std::string> recoverRaw(const std::string& address, std::string request,
                                 std::chrono::milliseconds timeout) {
    if (state_.load() != kRunning) return Error(Errc::not_running, "client is not running");
    Result<Frame> reply = requestOnce(address, MessageType::kRecover, std::move(request), timeout);
    if (!reply) return std::move(reply).error();
    return std::move(reply->body);
  }
  std::uint64_t requestsSent() const noexcept { return sent_.load(std::memory_order_relaxed); }
  const ClientOptions& options() const noexcept { return options_; }
  CallRouter& router() noexcept { return router_; }
  asio::io_context::executor_type ioExecutor() noexcept { return io_.get_executor(); }

  // ConnectionHandler: a client serves nothing.
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override {
    conn->replyError(frame.header, Error(Errc::protocol_error, "a client serves no requests"));
  }
  void onClosed(const std::shared_ptr<Connection>&, const Error&) override {}

 private:
  enum State : int { kCreated, kRunning, kStopping, kStopped };

  // CallRouter::Host.
  TopologyPtr routingTopology() const override { return topology(); }
  std::shared_ptr<Peer> peerForCall(const MemberInfo& primary, PartitionId p) override;
  // The link to member `id` at its member port `address`, made if needed. Network thread.
  std::shared_ptr<Peer> peerFor(MemberId id, const std::string& address);
  bool runLocally(RoutedCallPtr&, MemberId) override { return false; }
  void learnTopology(const TopologyPtr& t) override;
  void routeLooksStale() override;
  void requestSent() noexcept override { sent_.fetch_add(1, std::memory_order_relaxed); }
  void callFinished() noexcept override {
    if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
  }

  // TopologyWatch::Host.
  TopologyPtr watchedTopology() const override { return topology(); }
  void dialAuthenticated(const std::string& address,
                         UniqueFunction<void(Result<std::shared_ptr<Connection>>)> done) override;
  void topologyAnswered(const TopologyPtr& t) override { learnTopology(t); }
  void watchFailed() override { refreshAll(); }

  // One request on a connection of its own, answered through `answered` (any thread).
  void requestAsync(const std::string& address, MessageType type, std::string body,
                    std::chrono::milliseconds timeout,
                    UniqueFunction<void(Result<Frame>)> answered);
  // Connects to `address`, sends one request, closes. Blocking; not on the network thread.
  Result<Frame> requestOnce(const std::string& address, MessageType type, std::string body,
                            std::chrono::milliseconds timeout);
  // With a client secret, proves it on `c` (Hello, then Auth) before running `then`; at once
  // without one. A refused proof closes `c`, failing what `then` sent with the reason. Network
  // thread.
  void authenticate(const std::shared_ptr<Connection>& c, UniqueFunction<void()> then);
  // Asks every known member and seed at once for its topology; the newest valid one wins.
  // Network thread.
  void refreshAll();
  // Every suspectAfter/2: refreshes while some member leaves a request unanswered past
  // suspectAfter. Network thread.
  void watch();

  ClientOptions options_;
  asio::io_context io_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::thread thread_;
  std::unique_ptr<Transport> transport_;
  SharedTopology topology_;
  std::unordered_map<MemberId, std::shared_ptr<Peer>> peers_;  // network thread
  std::optional<ShardLinks> shardLinks_;  // made with transport_; network thread
  // Members and seeds being asked for their topology now (a frozen one is asked again only once
  // its ask timed out, while the others are asked on every refresh). Network thread.
  std::unordered_set<std::string> asking_;
  std::chrono::steady_clock::time_point nextRefreshAt_{};  // network thread
  std::optional<asio::steady_timer> watchdog_;             // network thread
  std::optional<TopologyWatch> topologyWatch_;             // network thread
  CallRouter router_{static_cast<CallRouter::Host&>(*this), io_};
  std::atomic<int> state_{kCreated};
  std::atomic<std::int64_t> inflight_{0};
  std::atomic<std::uint64_t> sent_{0};
};

Result<bool> ClientImpl::start() {
  if (state_.load() != kCreated) {
    return Error(Errc::not_running, "start(): a Client is started once; this one already was");
  }
  if (options_.seeds.empty()) {
    return Error(Errc::invalid_configuration, "ClientOptions.seeds is empty: name a member");
  }
  if (options_.suspectAfter.count() <= 0) {
    return Error(Errc::invalid_configuration, "ClientOptions.suspectAfter must be > 0, got " +
                                                  std::to_string(options_.suspectAfter.count()) +
                                                  " ms");
  }
  for (const auto& seed : options_.seeds) {
    if (!parseAddress(seed)) {
      return Error(Errc::invalid_configuration, "seed '" + seed + "' is not host:port");
    }
  }
  // A member silent past twice suspectAfter is asked again (same request id), by then perhaps the
  // member that took its partitions over: the watchdog has refreshed the topology meanwhile.
  router_.setAttemptTimeout(std::max(options_.suspectAfter * 2, std::chrono::milliseconds(100)));
  TransportOptions topts;
  topts.connectTimeout = options_.connectTimeout;
  if (options_.tls.configured()) {
    auto tls = makeTlsContext(options_.tls, "ClientOptions", /*needCertificate=*/false);
    if (!tls) return std::move(tls).error();
    topts.tls = std::move(tls).value();
  }
  transport_ = std::make_unique<Transport>(io_, topts, *this);
  shardLinks_.emplace(*transport_,
                      [this](MemberId) { return clientLinkOptions(options_.clientSecret); });
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
  state_.store(kRunning, std::memory_order_release);

  const auto deadline = std::chrono::steady_clock::now() + options_.connectTimeout;
  // A seed whose name does not exist will not start to (a typo, a host that is gone): if no
  // seed resolves, say so at once rather than retrying for the whole connect timeout. A seed that
  // fails only for now (no answer from DNS), or does not answer before the deadline, is tried.
  std::vector<std::string> seeds;
  std::string unresolvable;
  for (const auto& seed : options_.seeds) {
    const auto address = parseAddress(seed);
    auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
    auto resolved = std::make_shared<std::promise<std::error_code>>();
    auto outcome = resolved->get_future();
    resolver->async_resolve(address->first, std::to_string(address->second),
                            [resolver, resolved](const std::error_code& ec,
                                                 const asio::ip::tcp::resolver::results_type&) {
                              resolved->set_value(ec);
                            });
    if (outcome.wait_until(deadline) != std::future_status::ready) {
      asio::post(io_, [resolver] { resolver->cancel(); });
      seeds.push_back(seed);
      continue;
    }
    const std::error_code ec = outcome.get();
    if (ec == asio::error::host_not_found || ec == asio::error::service_not_found ||
        ec == asio::error::no_data) {
      unresolvable += (unresolvable.empty() ? "" : "; ") + seed + ": " + ec.message();
      continue;
    }
    seeds.push_back(seed);
  }
  if (seeds.empty()) {
    stop();
    return Error(Errc::invalid_configuration, "no seed resolves to an address: " + unresolvable);
  }
  std::string tried, lastError = "no seed answered";
  for (const auto& seed : seeds) tried += (tried.empty() ? "" : ", ") + seed;
  // Seeds in turn, and in parallel after a short delay: seed i is asked once the ones before it
  // have been silent for i * stagger (or all failed), each until the deadline, so a frozen seed
  // (it accepts the connection and never answers) costs one stagger, not the whole deadline.
  // The first valid topology wins; a round in which every seed failed is tried again after 50 ms.
  struct Race {
    std::mutex mu;
    std::condition_variable cv;
    TopologyPtr won;
    std::size_t outstanding = 0;
    std::string lastError;
    std::optional<Error> refused;  // a seed refused our credentials: final
  };
  auto race = std::make_shared<Race>();
  std::optional<Error> refused;
  const auto stagger = std::clamp(options_.connectTimeout / (2 * static_cast<int>(seeds.size())),
                                  std::chrono::milliseconds(50), std::chrono::milliseconds(500));
  auto ask = [&](const std::string& seed) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    requestAsync(
        seed, MessageType::kGetTopology, {}, std::max(left, std::chrono::milliseconds(1)),
        [race, seed](Result<Frame> reply) {
          std::string error;
          TopologyPtr t;
          if (!reply) {
            error = seed + ": " + reply.error().message();
          } else {
            try {
              t = std::make_shared<const Topology>(decode<TopologyBody>(reply->body).topology);
              if (t->members.empty()) {
                throw std::runtime_error("the member has no topology yet");
              }
            } catch (const std::exception& e) {
              error = seed + ": " + e.what();
              t = nullptr;
            }
          }
          std::lock_guard lock(race->mu);
          if (!reply && reply.error() == Errc::unauthenticated && !race->refused) {
            // The secret or the TLS setup will not change: say so now, not at the deadline.
            race->refused = Error(Errc::unauthenticated, seed + ": " + reply.error().detail());
          }
          --race->outstanding;
          if (t && !race->won) race->won = std::move(t);
          if (!error.empty()) race->lastError = std::move(error);
          race->cv.notify_all();
        });
  };
  {
    std::unique_lock lock(race->mu);
    std::size_t next = 0;
    auto nextAt = std::chrono::steady_clock::now();
    bool pausing = false;
    for (int step = 0; step < 100000 && !race->won && !race->refused; ++step) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      if (next == seeds.size() && race->outstanding == 0) {
        next = 0;  // every seed of this round failed: a new round, after a pause
        nextAt = now + std::chrono::milliseconds(50);
        pausing = true;
      }
      if (next < seeds.size() && (now >= nextAt || (race->outstanding == 0 && !pausing))) {
        ++race->outstanding;
        pausing = false;
        lock.unlock();
        ask(seeds[next++]);
        lock.lock();
        nextAt = std::chrono::steady_clock::now() + stagger;
        continue;
      }
      race->cv.wait_until(lock, next < seeds.size() ? std::min(nextAt, deadline) : deadline, [&] {
        return race->won || race->refused || (!pausing && race->outstanding == 0);
      });
    }
    if (!race->lastError.empty()) lastError = race->lastError;
    refused = race->refused;
    if (race->won) {
      topology_.store(race->won);
      lock.unlock();
      asio::post(io_, [this] {
        watchdog_.emplace(io_);
        watch();
        if (options_.watchTopology) {
          TopologyWatch::Options o;
          o.salt = std::random_device{}();
          o.salt = (o.salt << 32) ^ std::random_device{}();
          topologyWatch_.emplace(static_cast<TopologyWatch::Host&>(*this), io_, o);
          topologyWatch_->retarget();
        }
      });
      return true;
    }
  }
  stop();
  if (refused) return *refused;
  return Error(Errc::unreachable,
               "could not reach any seed of [" + tried + "] within " +
                   std::to_string(options_.connectTimeout.count()) + " ms; last error: " +
                   lastError + (unresolvable.empty() ? "" : "; unresolvable: " + unresolvable));
}

void ClientImpl::stop() {
  if (io_.get_executor().running_in_this_thread()) {
    std::fprintf(stderr,
                 "ingrid: Client::stop() called inside a completion, on the client's own "
                 "I/O thread, which it must join; stop the client from another thread\n");
    std::abort();
  }
  const int state = state_.exchange(kStopping);
  if (state == kStopping || state == kStopped || state == kCreated) {
    if (state == kCreated) state_.store(kStopped);
    return;
  }
  for (std::int64_t n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  asio::post(io_, [this] {
    if (watchdog_) watchdog_->cancel();
    if (topologyWatch_) topologyWatch_->stop();
    for (auto& [id, peer] : peers_) peer->close();
    peers_.clear();
    if (shardLinks_) shardLinks_->closeAll();
    transport_->stop();
  });
  guard_.reset();
  asio::post(io_, [this] { io_.stop(); });
  if (thread_.joinable()) thread_.join();
  // Completions posted while the thread stopped (refusals of calls that raced stop()) still run.
  io_.restart();
  io_.poll();
  state_.store(kStopped);
}

void ClientImpl::invokeRaw(std::string key, std::string_view processor, std::string args,
                           RawCompletion done) {
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  const int state = state_.load(std::memory_order_acquire);
  std::optional<Error> refused;
  if (state != kRunning) {
    refused = Error(state == kCreated ? Errc::not_running : Errc::shutting_down,
                    "client cannot send processor '" + std::string(processor) + "'");
  } else {
    refused = keyError(key);
  }
  if (refused) {
    router_.metrics().ended(*refused);
    done(std::move(*refused));
    callFinished();
    return;
  }
  // Never past the exactly-once window the cluster publishes: a retry after it could run again.
  const TopologyPtr t = topology();
  const auto timeout =
      t->dedupWindowMs == 0
          ? options_.requestTimeout
          : std::min(options_.requestTimeout, std::chrono::milliseconds(t->dedupWindowMs / 2));
  router_.start(std::move(key), processor, std::move(args), std::move(done),
                t->table.partitionCount(), timeout);
}

std::shared_ptr<Peer> ClientImpl::peerForCall(const MemberInfo& primary, PartitionId p) {
  if (options_.shardAware) {
    if (auto link = shardLinks_->forCall(primary, p)) return link;
  }
  return peerFor(primary.id, primary.address);
}

std::shared_ptr<Peer> ClientImpl::peerFor(MemberId id, const std::string& address) {
  if (auto it = peers_.find(id); it != peers_.end()) {
    if (it->second->address() == address) return it->second;
    it->second->close();  // the id now names another address (should not happen)
    peers_.erase(it);
  }
  auto peer = Peer::create(*transport_, address, clientLinkOptions(options_.clientSecret));
  peers_.emplace(id, peer);
  return peer;
}

void ClientImpl::learnTopology(const TopologyPtr& t) {
  const TopologyPtr cur = topology();
  // A topology that cannot follow ours (older, another partition count, an older term) is
  // ignored: routing keeps the one it has, and a stale route asks again.
  if (cur && successorInvalidReason(*cur, *t)) return;
  topology_.store(t);
  // Links to members that left are closed after a request's full deadline (in-flight answers),
  // but those that have owed an answer and heard nothing for suspectAfter (removed as failed:
  // dead or paused) are abandoned now: their calls go again, same id, to the new primaries.
  const auto silentSince = std::chrono::steady_clock::now() - options_.suspectAfter;
  const std::string why = "member left topology v" + std::to_string(t->version) + " while silent";
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (t->hasMember(it->first)) {
      ++it;
      continue;
    }
    if (it->second->unansweredSince() <= silentSince) {
      it->second->abandon(why);
    } else {
      auto timer = std::make_shared<asio::steady_timer>(io_, options_.requestTimeout);
      timer->async_wait([timer, peer = it->second](std::error_code) { peer->close(); });
    }
    it = peers_.erase(it);
  }
  shardLinks_->retain(*t, options_.requestTimeout, silentSince, why);
  if (topologyWatch_) topologyWatch_->retarget();
}

void ClientImpl::routeLooksStale() {
  asio::post(io_, [this] { refreshAll(); });
}

void ClientImpl::watch() {
  if (state_.load() != kRunning || !watchdog_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto suspect = [&](const auto& link) {
    return link.second->unansweredSince() <= now - options_.suspectAfter;
  };
  if (std::any_of(peers_.begin(), peers_.end(), suspect) ||
      shardLinks_->unansweredSince(now - options_.suspectAfter)) {
    refreshAll();
  }
  watchdog_->expires_after(std::max(options_.suspectAfter / 2, std::chrono::milliseconds(10)));
  watchdog_->async_wait([this](std::error_code ec) {
    if (!ec) watch();
  });
}

void ClientImpl::refreshAll() {
  if (state_.load() != kRunning) return;
  // At most one round every suspectAfter / 2, however many calls look stale: a slow cluster is
  // asked a bounded number of times (one ask per member per round), not once per call.
  const auto now = std::chrono::steady_clock::now();
  if (now < nextRefreshAt_) return;
  nextRefreshAt_ = now + std::max(options_.suspectAfter / 2, std::chrono::milliseconds(10));
  router_.metrics().topologyRefreshes.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> addresses;
  const TopologyPtr known = topology();  // held: a range-for over a temporary's member dangles
  for (const auto& m : known->members) addresses.push_back(m.address);
  addresses.insert(addresses.end(), options_.seeds.begin(), options_.seeds.end());
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  // A paused member accepts the connection and never answers: each ask is bounded.
  const auto timeout = std::clamp(options_.suspectAfter * 2,
                                  std::min(std::chrono::milliseconds(100), options_.requestTimeout),
                                  options_.requestTimeout);
  for (const std::string& address : addresses) {
    if (!asking_.insert(address).second) continue;  // still waiting for its last answer
    transport_->connect(address,
                        [this, timeout, address](Result<std::shared_ptr<Connection>> conn) {
                          if (!conn) {
                            asking_.erase(address);
                            return;
                          }
                          auto c = conn.value();
                          authenticate(c, [this, c, timeout, address] {
                            c->request(MessageType::kGetTopology, topology()->version, {}, timeout,
                                       [this, c, address](Result<Frame> r) {
                                         asking_.erase(address);
                                         c->close(Error(Errc::shutting_down, "topology refreshed"));
                                         if (!r) return;
                                         try {
                                           learnTopology(std::make_shared<const Topology>(
                                               decode<TopologyBody>(r->body).topology));
                                         } catch (const std::exception&) {
                                           // A bad answer is ignored; the others' count.
                                         }
                                       });
                          });
                        });
  }
}

void ClientImpl::requestAsync(const std::string& address, MessageType type, std::string body,
                              std::chrono::milliseconds timeout,
                              UniqueFunction<void(Result<Frame>)> answered) {
  auto once = std::make_shared<UniqueFunction<void(Result<Frame>)>>(std::move(answered));
  transport_->connect(address, [this, once, type, body = std::move(body),
                                timeout](Result<std::shared_ptr<Connection>> conn) mutable {
    if (!conn) {
      (*once)(std::move(conn).error());
      return;
    }
    auto c = conn.value();
    authenticate(c, [once, c, type, body = std::move(body), timeout]() mutable {
      c->request(type, 0, std::move(body), timeout, [once, c](Result<Frame> r) mutable {
        (*once)(std::move(r));
        c->close(Error(Errc::shutting_down, "one request done"));
      });
    });
  });
}

Result<Frame> ClientImpl::requestOnce(const std::string& address, MessageType type,
                                      std::string body, std::chrono::milliseconds timeout) {
  // Shared with the callbacks: if stop() races this call, a callback may be dropped uncalled or
  // run after the bounded wait below gave up.
  auto answered = std::make_shared<std::promise<Result<Frame>>>();
  auto answer = answered->get_future();
  requestAsync(address, type, std::move(body), timeout,
               [answered](Result<Frame> r) { answered->set_value(std::move(r)); });
  const auto limit = options_.connectTimeout + timeout + std::chrono::seconds(1);
  if (answer.wait_for(limit) != std::future_status::ready) {
    return Error(Errc::timeout, address + ": no answer within " + std::to_string(limit.count()) +
                                    " ms (client stopping?)");
  }
  return answer.get();
}

void ClientImpl::dialAuthenticated(const std::string& address,
                                   UniqueFunction<void(Result<std::shared_ptr<Connection>>)> done) {
  transport_->connect(
      address, [this, done = std::move(done)](Result<std::shared_ptr<Connection>> conn) mutable {
        if (!conn) {
          done(std::move(conn).error());
          return;
        }
        auto c = conn.value();
        authenticate(c, [c, done = std::move(done)]() mutable { done(c); });
      });
}

void ClientImpl::authenticate(const std::shared_ptr<Connection>& c, UniqueFunction<void()> then) {
  if (options_.clientSecret.empty()) {
    then();
    return;
  }
  std::string hello = clientHelloBody(options_.clientSecret);
  c->request(MessageType::kHello, 0, hello, options_.connectTimeout,
             [this, c, hello, then = std::move(then)](Result<Frame> reply) mutable {
               if (reply) {
                 // Frames on a connection are handled in order: the Auth is checked before the
                 // request that `then` sends behind it; a refused one closes the connection.
                 c->request(MessageType::kAuth, 0,
                            clientAuthBody(options_.clientSecret, hello, reply.value()),
                            options_.connectTimeout, [](Result<Frame>) {});
               }
               then();
             });
}

Result<Topology> ClientImpl::topologyOf(const std::string& address) {
  if (state_.load() != kRunning) return Error(Errc::not_running, "client is not running");
  Result<Frame> reply =
      requestOnce(address, MessageType::kGetTopology, {}, options_.requestTimeout);
  if (!reply) return std::move(reply).error();
  try {
    return decode<TopologyBody>(reply->body).topology;
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message, address + ": topology does not decode: " + e.what());
  }
}

Result<MemberStatus> ClientImpl::statusOf(const std::string& address) {
  if (state_.load() != kRunning) return Error(Errc::not_running, "client is not running");
  Result<Frame> reply = requestOnce(address, MessageType::kStatus, {}, options_.requestTimeout);
  if (!reply) return std::move(reply).error();
  try {
    MemberStatusBody s = decode<MemberStatusBody>(reply->body);
    return MemberStatus{s.memberId,
                        s.topologyVersion,
                        s.term,
                        s.leader,
                        s.isLeader,
                        std::move(s.voters),
                        std::move(s.standbys),
                        std::max<std::int64_t>(s.leaseLeftMs, 0),
                        std::move(s.fenced),
                        s.rejoining,
                        std::move(s.incomplete),
                        std::move(s.behind),
                        s.leaseLapses,
                        std::move(s.suspects),
                        std::move(s.wantedVoters)};
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message, address + ": status does not decode: " + e.what());
  }
}

// --- Client ---

Client::Client(ClientOptions options) : impl_(std::make_unique<ClientImpl>(std::move(options))) {}

Client::~Client() { stop(); }
Result<bool> Client::start() { return impl_->start(); }
void Client::stop() {
  completionsClosed_.store(true, std::memory_order_release);
  impl_->stop();
}
asio::io_context::executor_type Client::ioExecutor() const noexcept { return impl_->ioExecutor(); }
bool Client::onIoThread() const noexcept { return ioExecutor().running_in_this_thread(); }
void Client::invokeRaw(std::string key, std::string_view processor, std::string args,
                       RawCompletion done) {
  impl_->invokeRaw(std::move(key), processor, std::move(args), std::move(done));
}
TopologyPtr Client::topology() const { return impl_->topology(); }
std::string Client::metricsText() { return callMetricsText(impl_->router().metrics(), true); }
Result<Topology> Client::topologyOf(const std::string& address) {
  return impl_->topologyOf(address);
}
Result<MemberStatus> Client::statusOf(const std::string& address) {
  return impl_->statusOf(address);
}
Result<std::string> Client::recoverRaw(const std::string& address, std::string request,
                                       std::chrono::milliseconds timeout) {
  return impl_->recoverRaw(address, std::move(request), timeout);
}
std::uint64_t Client::requestsSent() const noexcept { return impl_->requestsSent(); }
const ClientOptions& Client::options() const noexcept { return impl_->options(); }

}  // namespace ingrid
