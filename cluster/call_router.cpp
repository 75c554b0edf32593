#include <ingrid/cluster/call_router.h>

#include <algorithm>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <ingrid/cluster/messages.h>

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string partitionName(PartitionId p) { return "partition " + std::to_string(p); }

// Answers that say the request was not run, so sending it again cannot apply it twice.
bool notRun(const Error& e) {
  return e == Errc::unavailable || e == Errc::shutting_down || e == Errc::not_running;
}

}  // namespace

void CallRouter::start(std::string key, std::string_view processor, std::string args,
                       UniqueFunction<void(Result<std::string>)> done, std::uint32_t partitions,
                       std::chrono::milliseconds timeout) {
  auto call = std::make_unique<RoutedCall>();
  call->partition = partitionOf(key, partitions);
  call->key = std::move(key);
  call->processor = std::string(processor);
  call->args = std::move(args);
  call->done = std::move(done);
  call->deadline = SteadyClock::now() + timeout;
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
  std::shared_ptr<Peer> peer = info ? host_.peerFor(primary, info->address) : nullptr;
  if (!peer) {
    retryLater(std::move(call),
               Error(Errc::unavailable, "no link to member " + std::to_string(primary)));
    return;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(call->deadline - SteadyClock::now());
  if (left.count() <= 0) {
    retryLater(std::move(call), Error(Errc::timeout, "deadline passed before sending"));
    return;
  }
  ++call->attempts;
  host_.requestSent();
  std::string body = encode(InvokeRequestView{call->key, call->processor, call->args});
  const std::uint64_t version = routing->version;
  peer->request(
      MessageType::kInvoke, version, std::move(body), left,
      [this, call = std::move(call), primary,
       routing = std::move(routing)](Result<Frame> r) mutable {
        if (!r) {
          if (notRun(r.error())) {
            const Error why = r.error();
            retryLater(std::move(call), why);
          } else {
            // A member that let the call time out or dropped its link may be gone: the
            // cluster may have moved its partitions meanwhile.
            if (r.error() == Errc::timeout || r.error() == Errc::unreachable) {
              host_.routeLooksStale();
            }
            const MemberInfo* target = routing->member(primary);
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
          finish(std::move(call), decode<InvokeReply>(frame.body).result);
        } catch (const std::exception& e) {
          finish(std::move(call),
                 Error(Errc::malformed_message,
                       "reply from member " + std::to_string(primary) + ": " + e.what()));
        }
      });
}

void CallRouter::retryLater(RoutedCallPtr call, const Error& why) {
  const auto now = SteadyClock::now();
  if (call->attempts >= kMaxAttempts || now >= call->deadline) {
    const std::string detail =
        why.detail() + " (gave up after " + std::to_string(call->attempts) + " attempts)";
    finish(std::move(call),
           Error(now >= call->deadline ? make_error_code(Errc::timeout) : why.code(), detail));
    return;
  }
  ++call->attempts;
  host_.routeLooksStale();
  // Back off briefly (2 ms doubling, at most 50 ms): the topology that fixes this is on its way.
  // Never past the caller's deadline: the last retry fires at it (and fails as a timeout then).
  const auto delay = std::min<SteadyClock::duration>(
      std::chrono::milliseconds(std::min(50, 1 << std::min(call->attempts, 6))),
      call->deadline - now);
  auto timer = std::make_shared<asio::steady_timer>(net_, delay);
  timer->async_wait(
      [this, timer, call = std::move(call)](std::error_code) mutable { route(std::move(call)); });
}

void CallRouter::finish(RoutedCallPtr call, Result<std::string> result) {
  auto done = std::move(call->done);
  call.reset();
  done(std::move(result));
  host_.callFinished();
}

}  // namespace ingrid
