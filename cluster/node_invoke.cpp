// The invoke path: admission, routing to the primary (locally or in one round trip), execution
// on the partition's worker, synchronous replication to the backups, redirects and retries.
#include <algorithm>
#include <chrono>

#include <ingrid/cluster/node_impl.h>

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Redirects and "partition moving" answers are retried this often at most, within the deadline.
constexpr int kMaxAttempts = 32;

std::string partitionName(PartitionId p) { return "partition " + std::to_string(p); }

}  // namespace

struct NodeImpl::Call {
  std::string key;
  std::string_view processor;  // points into the registry, which outlives every call
  ErasedProcessorFn fn = nullptr;
  std::string args;
  RawCompletion done;
  PartitionId partition = 0;
  SteadyClock::time_point deadline;
  int attempts = 0;
  TopologyPtr hint;  // a newer topology learned from a redirect; used for routing only
};

void NodeImpl::finishInvocation() noexcept {
  if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

void NodeImpl::invokeRaw(std::string key, std::string_view processor, std::string args,
                         RawCompletion done) {
  // Count first, then check the state: stop() flips the state and then waits for the count.
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  const int state = state_.load(std::memory_order_acquire);
  Error refused;
  ErasedProcessorFn fn = nullptr;
  if (state != kRunning) {
    refused = Error(state == kCreated ? Errc::not_running : Errc::shutting_down,
                    "cannot run processor '" + std::string(processor) + "'");
  } else if (key.size() > kMaxKeyBytes) {
    refused = Error(Errc::invalid_key, "key of " + std::to_string(key.size()) +
                                           " bytes is longer than the limit of " +
                                           std::to_string(kMaxKeyBytes));
  } else if ((fn = registry_.find(processor)) == nullptr) {
    refused = Error(Errc::unknown_processor,
                    "no processor named '" + std::string(processor) + "' is registered");
  }
  if (fn == nullptr) {
    finishInvocation();
    done(std::move(refused));
    return;
  }
  auto call = std::make_unique<Call>();
  call->partition = partitionOf(key, options_.partitions);
  call->key = std::move(key);
  call->processor = processor;
  call->fn = fn;
  call->args = std::move(args);
  call->done = std::move(done);
  call->deadline = SteadyClock::now() + options_.requestTimeout;
  route(std::move(call));
}

void NodeImpl::route(CallPtr call) {
  TopologyPtr routing = topology();
  if (call->hint && call->hint->version > routing->version) routing = call->hint;
  const PartitionId p = call->partition;
  const MemberId primary = routing->table.primary(p);
  if (primary != 0 && primary == memberId()) {
    workers_->post(p, [this, call = std::move(call)](PartitionStore& store) mutable {
      Call& c = *call;
      execute(c.partition, store, c.key, c.fn, c.args,
              [this, call = std::move(call)](Result<std::string> r) mutable {
                if (!r && (r.error() == Errc::not_owner || r.error() == Errc::unavailable)) {
                  const Error why = r.error();
                  retryLater(std::move(call), why);
                } else {
                  finish(std::move(call), std::move(r));
                }
              });
    });
    return;
  }
  if (primary == 0 || !transport_) {
    retryLater(std::move(call),
               Error(Errc::unavailable, partitionName(p) + " has no primary at topology " +
                                            std::to_string(routing->version)));
    return;
  }
  asio::post(netIo_, [this, call = std::move(call), routing]() mutable {
    sendRemote(std::move(call), routing);
  });
}

void NodeImpl::sendRemote(CallPtr call, TopologyPtr routing) {
  const MemberId primary = routing->table.primary(call->partition);
  const MemberInfo* info = routing->member(primary);
  const auto now = SteadyClock::now();
  if (info == nullptr || now >= call->deadline) {
    retryLater(std::move(call), Error(Errc::unavailable, "no route to the primary of " +
                                                             partitionName(call->partition)));
    return;
  }
  std::shared_ptr<Peer> peer = peerFor(primary, info->address);
  if (!peer) {
    retryLater(std::move(call),
               Error(Errc::unavailable, "no link to member " + std::to_string(primary)));
    return;
  }
  ++call->attempts;
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(call->deadline - now);
  std::string body = encode(InvokeRequest{call->key, std::string(call->processor), call->args});
  const std::string target = info->address;
  peer->request(
      MessageType::kInvoke, topology()->version, std::move(body),
      std::max(timeout, std::chrono::milliseconds(1)),
      [this, call = std::move(call), primary, target](Result<Frame> r) mutable {
        if (!r) {
          // Not retried unless the primary said it did not run it (moving, stopping): a
          // request that reached it may have run, and running it twice would grant twice.
          if (r.error() == Errc::unavailable || r.error() == Errc::shutting_down ||
              r.error() == Errc::not_running) {
            const Error why = r.error();
            retryLater(std::move(call), why);
          } else {
            finish(std::move(call),
                   Error(r.error().code(), "member " + std::to_string(primary) + " (" + target +
                                               "): " + r.error().detail()));
          }
          return;
        }
        Frame& frame = r.value();
        try {
          if (frame.header.type == MessageType::kRedirect) {
            auto t = std::make_shared<Topology>(decode<TopologyBody>(frame.body).topology);
            if (!call->hint || t->version > call->hint->version) call->hint = std::move(t);
            retryLater(std::move(call), Error(Errc::not_owner, "member " + std::to_string(primary) +
                                                                   " is not the primary of " +
                                                                   partitionName(call->partition)));
            return;
          }
          finish(std::move(call), decode<InvokeReply>(frame.body).result);
        } catch (const std::exception& e) {
          finish(std::move(call),
                 Error(Errc::malformed_message,
                       "reply from member " + std::to_string(primary) + ": " + e.what()));
        }
      });
}

void NodeImpl::retryLater(CallPtr call, const Error& why) {
  const auto now = SteadyClock::now();
  if (call->attempts >= kMaxAttempts || now >= call->deadline || !transport_) {
    const std::string detail =
        why.detail() + " (gave up after " + std::to_string(call->attempts) + " attempts)";
    finish(std::move(call),
           Error(now >= call->deadline ? make_error_code(Errc::timeout) : why.code(), detail));
    return;
  }
  ++call->attempts;
  // Back off briefly (1 ms doubling, at most 50 ms): the topology that fixes this is on its way.
  const auto delay = std::chrono::milliseconds(std::min(50, 1 << std::min(call->attempts, 6)));
  auto timer = std::make_shared<asio::steady_timer>(netIo_, delay);
  timer->async_wait(
      [this, timer, call = std::move(call)](std::error_code) mutable { route(std::move(call)); });
}

void NodeImpl::finish(CallPtr call, Result<std::string> result) {
  RawCompletion done = std::move(call->done);
  call.reset();
  done(std::move(result));
  finishInvocation();
}

void NodeImpl::execute(PartitionId p, PartitionStore& store, std::string_view key,
                       ErasedProcessorFn fn, std::string_view args, RawCompletion done) {
  Replica& rep = replicas_[p];
  const TopologyPtr topo = topology();
  const MemberId self = memberId();
  if (topo->table.primary(p) != self) {
    done(Error(Errc::not_owner, "member " + std::to_string(self) + " is not the primary of " +
                                    partitionName(p) + " at topology " +
                                    std::to_string(topo->version)));
    return;
  }
  if (rep.fenced) {
    done(Error(Errc::unavailable, partitionName(p) + " is moving to another member"));
    return;
  }
  const Nanos now = clock_->now();
  MutableEntry entry(key, store.find(key, now));
  Result<std::string> result = fn(args, entry, now);
  executed_.fetch_add(1, std::memory_order_relaxed);
  if (!result.ok() || entry.change() == MutableEntry::Change::kNone) {
    done(std::move(result));  // a failed processor changes nothing (invariant 4)
    return;
  }
  store.apply(key, entry);
  ++rep.seq;
  const std::vector<MemberId>& owners = topo->table.owners(p);
  if (owners.size() <= 1) {
    done(std::move(result));
    return;
  }
  ReplicateBody update;
  update.partition = p;
  update.seq = rep.seq;
  update.key = std::string(key);
  if (const Entry* stored = store.find(key, now)) {
    update.kind = ReplicateBody::kPut;
    update.value = stored->value;
    update.expiresAt = stored->expiresAt;
  } else {
    update.kind = ReplicateBody::kRemove;
  }
  std::vector<MemberId> backups(owners.begin() + 1, owners.end());
  replicate(p, encode(update), backups, std::move(result), std::move(done));
}

void NodeImpl::replicate(PartitionId p, std::string body, const std::vector<MemberId>& backups,
                         Result<std::string> result, RawCompletion done) {
  struct Acks {
    std::size_t pending = 0;
    Result<std::string> result;
    RawCompletion done;
    std::string failures;
  };
  Replica& rep = replicas_[p];
  auto acks = std::make_shared<Acks>(Acks{backups.size(), std::move(result), {}, {}});
  if (options_.replication == ReplicationMode::kPrimarySync) {
    done(acks->result);  // answer first; a failover may lose this update (documented)
  } else {
    acks->done = std::move(done);
  }
  rep.outstanding.fetch_add(1, std::memory_order_acq_rel);
  const TopologyPtr topo = topology();
  asio::post(netIo_, [this, p, acks, body = std::move(body), backups, topo]() {
    for (MemberId b : backups) {
      const MemberInfo* info = topo->member(b);
      std::shared_ptr<Peer> peer = info ? peerFor(b, info->address) : nullptr;
      auto arrive = [this, p, acks, b](Result<Frame> r) {
        // A backup that left the partition's owners meanwhile (a committed topology moved it
        // away) no longer holds a copy anyone relies on: its answer is not needed.
        if (!r && !topology()->table.isOwner(p, b)) r = Frame{};
        if (!r) {
          if (!acks->failures.empty()) acks->failures += "; ";
          acks->failures += "backup member " + std::to_string(b) + ": " + r.error().message();
          if (r.error() == Errc::unavailable || r.error() == Errc::shutting_down ||
              r.error() == Errc::not_running) {
            // The backup missed an update and asks for a fresh snapshot.
            workers_->post(p, [this, p, b](PartitionStore& store) {
              const TopologyPtr t = topology();
              if (t->table.primary(p) == memberId() && t->table.isOwner(p, b)) {
                sendSnapshot(p, store, b, t->version);
              }
            });
          }
        }
        if (--acks->pending != 0) return;
        replicas_[p].outstanding.fetch_sub(1, std::memory_order_acq_rel);
        if (!acks->done) return;
        if (acks->failures.empty()) {
          acks->done(std::move(acks->result));
        } else {
          acks->done(Error(Errc::indeterminate, "applied on the primary of partition " +
                                                    std::to_string(p) + ", but " + acks->failures));
        }
      };
      if (!peer) {
        arrive(Error(Errc::unreachable, "no address known"));
        continue;
      }
      peer->request(MessageType::kReplicate, topo->version, body, options_.requestTimeout,
                    std::move(arrive));
    }
  });
}

void NodeImpl::handleInvoke(const std::shared_ptr<Connection>& conn, Frame frame) {
  InvokeRequest req;
  try {
    decodeInto(frame.body, req);
  } catch (const std::exception& e) {
    conn->replyError(frame.header, Error(Errc::malformed_message,
                                         std::string("Invoke body does not decode: ") + e.what()));
    return;
  }
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  const int state = state_.load(std::memory_order_acquire);
  ErasedProcessorFn fn = registry_.find(req.processor);
  Error refused;
  if (state != kRunning) {
    refused = Error(Errc::shutting_down, "member " + std::to_string(memberId()) + " is stopping");
  } else if (req.key.size() > kMaxKeyBytes) {
    refused = Error(Errc::invalid_key, "key of " + std::to_string(req.key.size()) +
                                           " bytes is longer than the limit of " +
                                           std::to_string(kMaxKeyBytes));
  } else if (fn == nullptr) {
    refused = Error(Errc::unknown_processor, "no processor named '" + req.processor +
                                                 "' is registered on member " +
                                                 std::to_string(memberId()));
  }
  if (refused.code()) {
    conn->replyError(frame.header, refused);
    finishInvocation();
    return;
  }
  const PartitionId p = partitionOf(req.key, options_.partitions);
  workers_->post(
      p, [this, p, conn, header = frame.header, req = std::move(req), fn](PartitionStore& store) {
        execute(p, store, req.key, fn, req.args, [this, conn, header](Result<std::string> r) {
          const std::uint64_t version = topology()->version;
          if (r.ok()) {
            conn->reply(header, MessageType::kInvoke, version, encode(InvokeReply{std::move(*r)}));
          } else if (r.error() == Errc::not_owner) {
            conn->reply(header, MessageType::kRedirect, version, encode(TopologyBody{*topology()}));
          } else {
            conn->replyError(header, r.error());
          }
          finishInvocation();
        });
      });
}

}  // namespace ingrid
