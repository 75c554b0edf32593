#include "cluster/transport/call_router.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include <asio/post.hpp>

#include <ingrid/string_pool.h>
#include "cluster/transport/messages.h"
#include "cluster/transport/runtime.h"
#include "cluster/transport/timer.h"

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string partitionName(PartitionId p) { return "partition " + std::to_string(p); }

// Answers that say "ask again": the request was not run (fenced, no primary, stopping), or it ran
// and its outcome is not settled yet (a copy of one still replicating, or one whose barrier
// failed). Sending it again is safe either way: with the same request id it runs at most once.
bool notRun(const Error& e) {
  return e == Errc::unavailable || e == Errc::shutting_down || e == Errc::not_running;
}

std::uint64_t unixMillis() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(systemNow().time_since_epoch())
          .count());
}

// A random, non-zero client id: two routers (clients, nodes, restarts) never share one in practice.
// In a simulation (runtime.h), the simulated member's generator draws it.
std::uint64_t randomClientId() {
  std::uint64_t id = 0;
  if (SimulatedMember* sim = simulatedMember()) {
    while (id == 0) id = sim->random();
    return id;
  }
  std::random_device rd;
  while (id == 0) id = (std::uint64_t{rd()} << 32) ^ rd();
  return id;
}

}  // namespace

CallRouter::CallRouter(Host& host, asio::io_context& net)
    : host_(host), net_(net), clientId_(randomClientId()) {}

void CallRouter::settled(std::uint64_t seq) {
  unanswered_.erase(seq);
  doneBelow_.store(unanswered_.empty() ? lastSeq_ + 1 : *unanswered_.begin(),
                   std::memory_order_release);
}

void CallRouter::start(std::string key, std::string_view processor, std::string args,
                       UniqueFunction<void(Result<std::string>)> done, std::uint32_t partitions,
                       std::chrono::milliseconds timeout) {
  auto call = std::make_unique<RoutedCall>();
  call->partition = partitionOf(key, partitions);
  call->key = std::move(key);
  call->processor = InlineBytes(processor);
  call->args = std::move(args);
  call->done = std::move(done);
  call->deadline = steadyNow() + timeout;
  route(std::move(call));
}

void CallRouter::route(RoutedCallPtr call) {
  TopologyPtr routing = host_.routingTopology();
  if (call->hint && (!routing || call->hint->version > routing->version)) routing = call->hint;
  const MemberId primary = routing ? routing->table.primary(call->partition) : 0;
  if (primary != 0 && host_.runLocally(call, primary)) return;
  if (primary == 0) {
    retryLater(std::move(call),
               Error(Errc::unavailable, partitionName(call->partition) + " has no primary yet"));
    return;
  }
  if (net_.get_executor().running_in_this_thread()) {  // already there: no re-post
    sendRemote(std::move(call), std::move(routing));
    return;
  }
  asio::post(net_, [this, call = std::move(call), routing]() mutable {
    sendRemote(std::move(call), std::move(routing));
  });
}

void CallRouter::sendRemote(RoutedCallPtr call, TopologyPtr routing) {
  const MemberId primary = routing->table.primary(call->partition);
  const MemberInfo* info = routing->member(primary);
  std::shared_ptr<Peer> peer = info ? host_.peerForCall(*info, call->partition) : nullptr;
  if (!peer) {
    retryLater(std::move(call),
               Error(Errc::unavailable, "no link to member " + std::to_string(primary)));
    return;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(call->deadline - steadyNow());
  if (left.count() <= 0) {
    // Under a millisecond left: too little for an attempt, so out of time now. The call ends as
    // a timeout at once (retryLater), never retried for this, so the reason it was last retried
    // for, named at the end (finish), stays the last real refusal.
    call->deadline = std::min(call->deadline, steadyNow());
    retryLater(std::move(call), Error(Errc::timeout, "deadline passed before sending"));
    return;
  }
  ++call->attempts;
  host_.requestSent();
  if (call->seq == 0) {
    call->seq = ++lastSeq_;
    unanswered_.insert(call->seq);
    if (unanswered_.size() == 1) doneBelow_.store(call->seq, std::memory_order_release);
  }
  // Into a pooled string (string_pool.h): the reply's body, read into one and given back once
  // decoded, keeps the pool filled.
  const InvokeRequestView request{
      call->key,
      call->processor,
      call->args,
      clientId_,
      call->seq,
      doneBelow_.load(std::memory_order_relaxed),
      static_cast<std::uint32_t>(std::min<std::int64_t>(left.count(), UINT32_MAX)),
      unixMillis() + static_cast<std::uint64_t>(left.count())};
  std::string body = StringPool::take(request.encodedSize());
  encodeInto(body, request);
  const std::uint64_t version = routing->version;
  peer->request(
      MessageType::kInvoke, version, std::move(body), std::min(left, attemptTimeout_),
      [this, call = std::move(call), primary,
       routing = std::move(routing)](Result<Frame> r) mutable {
        if (!r) {
          const MemberInfo* target = routing->member(primary);
          if (notRun(r.error())) {
            const Error why = r.error();
            retryLater(std::move(call), why);
          } else if (r.error() == Errc::timeout || r.error() == Errc::unreachable) {
            // No answer: it may have run or not. The member may be gone (the cluster may have
            // moved its partitions meanwhile): sent again with the same id, it runs at most once.
            call->mayHaveRun = true;
            host_.memberUnanswered(primary);
            const Error why(r.error().code(), "member " + std::to_string(primary) + " (" +
                                                  (target ? target->address : "?") +
                                                  "): " + r.error().detail());
            retryLater(std::move(call), why);
          } else {
            finish(std::move(call),
                   Error(r.error().code(), "member " + std::to_string(primary) + " (" +
                                               (target ? target->address : "?") +
                                               "): " + r.error().detail()));
          }
          return;
        }
        Frame& frame = r.value();
        try {
          if (frame.header.type == MessageType::kRedirect) {
            auto t = std::make_shared<const Topology>(decode<TopologyBody>(frame.body).topology);
            if (!call->hint || t->version > call->hint->version) call->hint = t;
            host_.learnTopology(t);
            retryLater(std::move(call), Error(Errc::not_owner, "member " + std::to_string(primary) +
                                                                   " is not the primary of " +
                                                                   partitionName(call->partition)));
            return;
          }
          // The answer read in place and copied into a pooled string (the caller's decode gives
          // it back); the body goes back at once.
          Result<std::string> result = StringPool::copy(decode<InvokeReplyIn>(frame.body).result);
          StringPool::give(std::move(frame.body));
          finish(std::move(call), std::move(result));
        } catch (const std::exception& e) {
          finish(std::move(call),
                 Error(Errc::malformed_message,
                       "reply from member " + std::to_string(primary) + ": " + e.what()));
        }
      });
}

void CallRouter::retryLater(RoutedCallPtr call, const Error& why) {
  const auto now = steadyNow();
  if (call->attempts >= kMaxAttempts || now >= call->deadline) {
    const std::string detail =
        why.detail() + " (gave up after " + std::to_string(call->attempts) + " attempts)";
    // Out of time or attempts. If an earlier attempt may have run, the outcome is unknown: a
    // timeout, never the last attempt's "not run" refusal.
    const bool unknown = now >= call->deadline || call->mayHaveRun;
    finish(std::move(call), Error(unknown ? make_error_code(Errc::timeout) : why.code(), detail));
    return;
  }
  ++call->attempts;
  metrics_.retries.fetch_add(1, std::memory_order_relaxed);
  // The reason a timeout at the end names: an attempt that ran out of time is no news after one
  // refused for a reason (the last try, sent with a few ms left, times out).
  if (why != Errc::timeout || call->retriedFor.empty()) call->retriedFor = why.detail();
  host_.routeLooksStale();
  // Back off briefly (2 ms doubling, at most 50 ms): the topology that fixes this is on its way.
  // Never past the caller's deadline: the last retry fires at it (and fails as a timeout then).
  const auto delay = std::min<SteadyClock::duration>(
      std::chrono::milliseconds(std::min(50, 1 << std::min(call->attempts, 6))),
      call->deadline - now);
  auto timer = std::make_shared<Timer>(net_, delay);
  timer->async_wait(
      [this, timer, call = std::move(call)](std::error_code) mutable { route(std::move(call)); });
}

void CallRouter::finish(RoutedCallPtr call, Result<std::string> result) {
  if (const std::uint64_t seq = call->seq; seq != 0) {
    if (net_.get_executor().running_in_this_thread()) {
      settled(seq);
    } else {
      asio::post(net_, [this, seq] { settled(seq); });
    }
  }
  if (!result && result.error() == Errc::timeout && !call->retriedFor.empty() &&
      result.error().detail().find(call->retriedFor) == std::string::npos) {
    result = Error(Errc::timeout,
                   result.error().detail() + "; it was being retried for: " + call->retriedFor);
  }
  metrics_.ended(result);
  auto done = std::move(call->done);
  call.reset();
  done(std::move(result));
  host_.callFinished();
}

}  // namespace ingrid
