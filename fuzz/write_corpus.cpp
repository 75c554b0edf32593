// fuzz_write_corpus DIR: writes the seed corpus of every harness, DIR/<harness>/<seed>, from real
// messages encoded by the real encoders. fuzz/corpus/ is its output (see fuzz/README.md).
// Every seed is checked to be valid (its decoder accepts it; a processor's arguments run). It
// fails, writing nothing, on an invalid seed, or if a message body or a registered processor has
// no seed here, so a new one cannot be left out of the corpus silently.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/io_context.hpp>

#include <ingrid/partition_table.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/counter.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/registry.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>
#include <ingrid/topology.h>

#include "cluster/control/raft_codec.h"
#include "cluster/control/raft_io.h"
#include "cluster/transport/frame.h"
#include "cluster/transport/messages.h"

#include "message_table.h"
#include "processor_input.h"

namespace ingrid::fuzz {
namespace {

constexpr Nanos kNow = 1'790'000'000 * kNanosPerSecond;  // a wall-clock time in 2026
constexpr Nanos kMs = 1'000'000;

// harness -> seed name -> bytes
using Corpus = std::map<std::string, std::map<std::string, std::string>>;

void require(bool valid, const std::string& seed) {
  if (!valid) throw std::logic_error("seed " + seed + " is not accepted by its decoder");
}

std::string frame(MessageType type, std::uint16_t flags, std::uint64_t requestId,
                  const std::string& body) {
  FrameHeader h;
  h.type = type;
  h.flags = flags;
  h.bodyLength = static_cast<std::uint32_t>(body.size());
  h.requestId = requestId;
  h.topologyVersion = 7;
  const HeaderBytes bytes = encodeHeader(h);
  return std::string(bytes.begin(), bytes.end()) + body;
}

// Three members, 16 partitions with one backup, committed at version 7 in term 2 by member 1;
// member 3 still receiving partition 5.
Topology topology() {
  Topology t;
  t.version = 7;
  t.members = {
      {1, "127.0.0.1:7400", 0x1111}, {2, "127.0.0.1:7401", 0x2222}, {3, "127.0.0.1:7402", 0x3333}};
  const std::vector<MemberId> ids = t.memberIds();
  t.table = PartitionTable::balanced(16, ids, 1);
  t.backups = 1;
  t.nextMemberId = 4;
  const PartitionId p = 5;
  for (MemberId m : t.table.owners(p)) {
    if (m != t.table.primary(p)) t.syncing.push_back({p, m, 6, false});
  }
  t.term = 2;
  t.leader = 1;
  t.stampEpochs(nullptr);
  if (auto why = t.invalidReason()) throw std::logic_error("seed topology: " + *why);
  return t;
}

const BucketParams kLimit = BucketParams::perPeriod(100, 60 * kNanosPerSecond);

std::string acquireArgs() { return encode(TokenBucketAcquire{kLimit, 1}); }

// Designated initializers throughout: a field added to a message later keeps its default here.
const HelloBody kHello{.role = HelloBody::kPeer, .memberId = 2, .address = "127.0.0.1:7401"};

InvokeRequest invokeRequest() {
  return InvokeRequest{.key = "api-key:42",
                       .processor = std::string(TokenBucketAcquire::kName),
                       .args = acquireArgs(),
                       .client = 0x5eed5eed5eedull,
                       .seq = 42,
                       .doneBelow = 40,
                       .timeoutMs = 5000,
                       .deadlineUnixMs = 1'790'000'000'000};
}

ReplicateBatch replicateBatch() {
  ReplicateBatch batch;
  for (std::uint32_t i = 0; i < 2; ++i) {
    batch.updates.push_back(
        ReplicateBody{.partition = 5 + i,
                      .seq = 9,
                      .epoch = 7,
                      .prevEpoch = 7,
                      .kind = i == 0 ? ReplicateBody::kPut : ReplicateBody::kRemove,
                      .key = "api-key:4" + std::to_string(i),
                      .value = i == 0 ? encode(BucketState{99, 0, kNow}) : "",
                      .expiresAt = kNow + 600'000'000,
                      .client = i == 0 ? 0x5eed5eed5eedull : 0,
                      .requestSeq = i == 0 ? 42u : 0u,
                      .doneBelow = i == 0 ? 40u : 0u,
                      .result = i == 0 ? encode(AcquireAnswer{true, 99, 0}) : ""});
  }
  return batch;
}

std::map<std::string, std::string> messageSeeds() {
  const std::vector<std::string> names = ProcessorRegistry::withBuiltins().names();
  SnapshotBody snapshot;
  snapshot.partition = 5;
  snapshot.id = 42;
  snapshot.seq = 9;
  snapshot.epoch = snapshot.lastEpoch = 7;
  snapshot.entries = {{.key = "api-key:42",
                       .value = encode(BucketState{99, 0, kNow}),
                       .expiresAt = kNow + 600'000'000},
                      {.key = "visits", .value = encode(std::int64_t{12}), .expiresAt = kNever}};
  MemberStatusBody status;
  status.memberId = 1;
  status.topologyVersion = 7;
  status.term = 2;
  status.leader = 1;
  status.isLeader = true;
  status.voters = {1, 2, 3};
  status.leaseLeftMs = 2500;
  status.fenced = {5};
  status.incomplete = {5};
  status.suspects = {3};
  status.wantedVoters = {1, 2, 3};
  return {
      {"ErrorBody",
       encode(ErrorBody{.code = 13, .message = "partition 5 is moving: retry shortly"})},
      {"HelloBody", encode(kHello)},
      {"AuthBody", encode(AuthBody{.proof = std::string(32, '\x5a')})},
      {"JoinRequest", encode(JoinRequest{.address = "127.0.0.1:7403",
                                         .partitions = 16,
                                         .backups = 1,
                                         .processors = names,
                                         .incarnation = 0x4444,
                                         .leaseDurationMs = 750,
                                         .failureTimeoutMs = 1500,
                                         .dedupWindowMs = 60000})},
      {"JoinReply", encode(JoinReply{.memberId = 4, .coordinatorAddress = "127.0.0.1:7400"})},
      {"TopologyBody", encode(TopologyBody{topology()})},
      {"InvokeRequest", encode(invokeRequest())},
      {"InvokeRequestSpans", encode(invokeRequest())},
      {"ReplicateBatch", encode(replicateBatch())},
      {"ReplicateBatchIn", encode(replicateBatch())},
      {"ReplicateAck",
       encode(ReplicateAck{
           .refused = {UpdateRefusal{
               .index = 1,
               .error =
                   ErrorBody{.code = 13, .message = "replica of partition 5 is resyncing"}}}})},
      {"InvokeReply", encode(InvokeReply{.result = encode(AcquireAnswer{true, 99, 0})})},
      {"ReplicateBody", encode(ReplicateBody{.partition = 5,
                                             .seq = 9,
                                             .epoch = 7,
                                             .prevEpoch = 7,
                                             .kind = ReplicateBody::kPut,
                                             .key = "api-key:42",
                                             .value = encode(BucketState{99, 0, kNow}),
                                             .expiresAt = kNow + 600'000'000})},
      {"SnapshotBody", encode(snapshot)},
      {"SyncedBody", encode(SyncedBody{.partition = 5, .member = 3, .topologyVersion = 7})},
      {"LeaveBody", encode(LeaveBody{.memberId = 2})},
      {"HeartbeatBody", encode(HeartbeatBody{.memberId = 3})},
      {"LeaseBody",
       encode(LeaseBody{
           .memberId = 2, .incarnation = 0x2222, .topologyVersion = 7, .unreachable = {3}})},
      {"LeaseGrant", encode(LeaseGrant{.leaseMs = 3000})},
      {"MemberStatusBody", encode(status)},
      {"AcquireAnswer", encode(AcquireAnswer{false, 0, 600'000'000})},
      {"AcquireAnswers",
       encode(std::vector<AcquireAnswer>{{true, 2, 0}, {false, 2, 1'200'000'000}})},
      {"Counter", encode(std::int64_t{-3})},
      {"EntrySnapshot", encode(EntrySnapshot{true, encode(std::int64_t{12}), kNever})},
      {"BucketState", encode(BucketState{40, 17, kNow})},
      {"GcraAnswer", encode(GcraAnswer{false, 5, 4, 0, 200 * kMs})},
      {"GcraAnswers", encode(std::vector<GcraAnswer>{{false, 5, 0, 0, kNanosPerSecond},
                                                     {true, 5, 0, kNever, kNanosPerSecond}})},
      {"LimitAnswer", encode(LimitAnswer{true, 5, 2, 0, 700 * kMs})},
      {"LimitAnswers", encode(std::vector<LimitAnswer>{{true, 5, 0, 0, 100 * kMs},
                                                       {false, 5, 0, 100 * kMs, 100 * kMs}})},
      {"ShaperAnswer", encode(ShaperAnswer{true, 100 * kMs, 3, 1, 0, 200 * kMs})},
      {"ShaperAnswers", encode(std::vector<ShaperAnswer>{{true, 0, 3, 2, 0, 100 * kMs},
                                                         {false, 0, 3, 0, kNever, 100 * kMs}})},
      {"FixedWindowState", encode(FixedWindowState{kNow, 3})},
      {"SlidingLogState", encode(SlidingLogState{{{kNow - 900 * kMs, 2}, {kNow, 1}}})},
      {"SlidingWindowState", encode(SlidingWindowState{kNow, 4, 8})},
      {"LeakyMeterState", encode(LeakyMeterState{9, 500'000'000, kNow})},
      {"LeaseAnswer", encode(LeaseAnswer{true, kNow, 3, 2, 0, kNanosPerSecond})},
      {"LeaseAnswers", encode(std::vector<LeaseAnswer>{{true, kNow, 3, 3, 0, kNanosPerSecond},
                                                       {false, 0, 3, 3, 200 * kMs, 0}})},
      {"ReserveAnswer", encode(ReserveAnswer{true, 300 * kMs, 0})},
      {"ReserveAnswers", encode(std::vector<ReserveAnswer>{{true, 0, 2}, {false, kNever, 2}})},
      {"CompositeAnswer", encode(CompositeAnswer{false, 2, 100 * kMs, 3})},
      {"CompositeAnswers",
       encode(std::vector<CompositeAnswer>{{true, 9, 0, 1}, {false, 0, kNever, 1}})},
      {"CompositeState", encode(CompositeState{1, {Band{kLimit, BucketState{3, 0, kNow}}}})},
      {"ConcurrencyState",
       encode(ConcurrencyState{kNow + 2, {{kNow, kNow + kMs, 1}, {kNow + 1, kNow + kMs, 2}}})},
      {"WarmupAnswer", encode(WarmupAnswer{true, 290 * kMs, 270 * kMs, 18})},
      {"WarmupAnswers", encode(std::vector<WarmupAnswer>{{true, 0, 290 * kMs, 19},
                                                         {false, 290 * kMs, 270 * kMs, 19}})},
      {"WarmupState", encode(WarmupState{19, 0, kNow + 290 * kMs})},
  };
}

// The fuzz_messages seeds: a body's index in kMessageBodies, then the body.
void addMessages(Corpus& corpus) {
  const auto bodies = messageSeeds();
  for (std::size_t i = 0; i < kMessageBodyCount; ++i) {
    const std::string name(kMessageBodies[i].name);
    auto it = bodies.find(name);
    if (it == bodies.end()) throw std::logic_error("no seed for message body " + name);
    require(kMessageBodies[i].decode(name, it->second), name);
    corpus["fuzz_messages"][name] = std::string(1, static_cast<char>(i)) + it->second;
  }
}

void addFrames(Corpus& corpus) {
  auto& seeds = corpus["fuzz_frame_header"];
  const std::string invoke = encode(invokeRequest());
  seeds["hello"] = frame(MessageType::kHello, 0, 1, encode(kHello));
  seeds["invoke"] = frame(MessageType::kInvoke, 0, 2, invoke);
  seeds["invoke_reply"] = frame(MessageType::kInvoke, kFlagResponse, 2,
                                encode(InvokeReply{.result = encode(AcquireAnswer{true, 99, 0})}));
  seeds["error_reply"] =
      frame(MessageType::kInvoke, kFlagResponse | kFlagError, 2,
            encode(ErrorBody{.code = 12, .message = "not the primary of partition 5"}));
  seeds["get_topology"] = frame(MessageType::kGetTopology, 0, 3, "");
  seeds["raft_one_way"] = frame(MessageType::kRaft, kFlagOneWay, 0, std::string(40, '\x01'));
  seeds["heartbeats"] = frame(MessageType::kHeartbeat, 0, 4, encode(HeartbeatBody{.memberId = 2})) +
                        frame(MessageType::kHeartbeat, kFlagResponse, 4, "") +
                        frame(MessageType::kStatus, 0, 5, "");
  // Each is whole frames: headers that decode, with exactly their bodies after them.
  for (const auto& [name, bytes] : seeds) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      require(bytes.size() - pos >= kFrameHeaderBytes, name);
      HeaderBytes header;
      std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(pos), kFrameHeaderBytes,
                  header.begin());
      FrameHeader h;
      require(!decodeHeader(header, kDefaultMaxBodyBytes, h), name);
      pos += kFrameHeaderBytes + h.bodyLength;
    }
    require(pos == bytes.size(), name);
  }
}

class NullNetwork final : public RaftNetwork {
 public:
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override {}
};

// m as member 2 sends it, checked to decode: a RaftIo that is not started decodes what it is
// given and drops it (false); a message that does not decode is an Error.
std::string raftMessage(const raft_message& m, const std::string& seed) {
  static asio::io_context context;
  static NullNetwork network;
  static RaftIo io(context, network);
  std::string bytes = encodeRaftMessage(m, 2, "127.0.0.1:7401");
  require(io.deliver(bytes).ok(), seed);
  return bytes;
}

void addRaft(Corpus& corpus) {
  auto& seeds = corpus["fuzz_raft"];
  raft_message m{};
  m.type = RAFT_IO_REQUEST_VOTE;
  m.request_vote = {3, 2, 12, 2, false, true};
  seeds["request_vote"] = raftMessage(m, "request_vote");
  m = {};
  m.type = RAFT_IO_REQUEST_VOTE_RESULT;
  m.request_vote_result = {3, true, raft_tribool_true};
  seeds["request_vote_result"] = raftMessage(m, "request_vote_result");
  m = {};
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.append_entries = {2, 12, 2, 11, nullptr, 0};
  seeds["heartbeat"] = raftMessage(m, "heartbeat");

  // Two entries: a command (an encoded topology, what the control plane commits) and a
  // configuration change encoded by raft itself.
  raft_configuration conf;
  raft_configuration_init(&conf);
  raft_configuration_add(&conf, 1, "127.0.0.1:7400", RAFT_VOTER);
  raft_configuration_add(&conf, 2, "127.0.0.1:7401", RAFT_VOTER);
  raft_configuration_add(&conf, 3, "127.0.0.1:7402", RAFT_STANDBY);
  raft_buffer confBytes{};
  if (raft_configuration_encode(&conf, &confBytes) != 0) throw std::runtime_error("raft encode");
  std::string command = encode(TopologyBody{topology()});
  raft_entry entries[2]{};
  entries[0].term = 2;
  entries[0].type = RAFT_COMMAND;
  entries[0].buf = {command.data(), command.size()};
  entries[1].term = 2;
  entries[1].type = RAFT_CHANGE;
  entries[1].buf = confBytes;
  m = {};
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.append_entries = {2, 12, 2, 11, entries, 2};
  seeds["append_entries"] = raftMessage(m, "append_entries");
  m = {};
  m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  m.append_entries_result = {2, 0, 14};
  seeds["append_entries_result"] = raftMessage(m, "append_entries_result");
  m = {};
  m.type = RAFT_IO_INSTALL_SNAPSHOT;
  m.install_snapshot.term = 2;
  m.install_snapshot.last_index = 14;
  m.install_snapshot.last_term = 2;
  m.install_snapshot.conf = conf;
  m.install_snapshot.conf_index = 13;
  m.install_snapshot.data = {command.data(), command.size()};
  seeds["install_snapshot"] = raftMessage(m, "install_snapshot");
  m = {};
  m.type = RAFT_IO_TIMEOUT_NOW;
  m.timeout_now = {2, 14, 2};
  seeds["timeout_now"] = raftMessage(m, "timeout_now");
  raft_free(confBytes.base);
  raft_configuration_close(&conf);
}

// Per processor: (seed name, stored value, arguments).
struct ProcessorSeed {
  std::string name;
  std::string value;
  std::string args;
};

std::map<std::string_view, std::vector<ProcessorSeed>> processorSeeds() {
  const std::string bucket = encode(BucketState{3, 0, kNow - kNanosPerSecond});
  const std::string counter = encode(std::int64_t{41});
  BucketParams startEmpty = kLimit;
  startEmpty.initialTokens = 0;
  return {
      {TokenBucketAcquire::kName,
       {{"acquire", bucket, acquireArgs()},
        {"acquire_empty_start", bucket, encode(TokenBucketAcquire{startEmpty, 5})}}},
      {TokenBucketBatchAcquire::kName,
       {{"batch_acquire", bucket, encode(TokenBucketBatchAcquire{kLimit, {1, 2, 3}})}}},
      {CompositeBucketAcquire::kName,
       {{"composite_acquire",
         encode(CompositeState{
             1,
             {Band{kLimit, BucketState{3, 0, kNow}},
              Band{BucketParams::perPeriod(5, kNanosPerSecond), BucketState{5, 0, kNow}}}}),
         encode(CompositeBucketAcquire{
             CompositeParams{{kLimit, BucketParams::perPeriod(10, kNanosPerSecond)},
                             2,
                             Replacement::kProportional},
             2})}}},
      {CompositeBucketBatchAcquire::kName,
       {{"composite_batch_acquire",
         encode(CompositeState{0, {Band{kLimit, BucketState{100, 0, kNow - kNanosPerSecond}}}}),
         encode(CompositeBucketBatchAcquire{CompositeParams{{kLimit}, 0, Replacement::kAsIs},
                                            {1, 2, 200}})}}},
      {TokenBucketReserve::kName,
       {{"reserve", encode(BucketState{1, 0, kNow + 300 * kMs}),
         encode(TokenBucketReserve{kLimit, 3, 2 * kNanosPerSecond})}}},
      {TokenBucketBatchReserve::kName,
       {{"batch_reserve", bucket, encode(TokenBucketBatchReserve{kLimit, {4, 2, 3}, 500 * kMs})}}},
      {Increment::kName, {{"increment", counter, encode(Increment{5})}}},
      {GetCounter::kName, {{"get_counter", counter, encode(GetCounter{})}}},
      {GetEntry::kName, {{"get_entry", bucket, encode(GetEntry{})}}},
      {GcraThrottle::kName,
       {{"gcra_throttle", encode(std::int64_t{kNow + kNanosPerSecond}),
         encode(GcraThrottle{GcraParams{4, 5, kNanosPerSecond}, 1})}}},
      {FixedWindowAcquire::kName,
       {{"fixed_window_acquire", encode(FixedWindowState{kNow - kNanosPerSecond / 2, 3}),
         encode(FixedWindowAcquire{WindowParams{5, kNanosPerSecond}, 2})}}},
      {FixedWindowBatchAcquire::kName,
       {{"fixed_window_batch_acquire", encode(FixedWindowState{kNow, 1}),
         encode(FixedWindowBatchAcquire{WindowParams{5, kNanosPerSecond}, {2, 6, 3}})}}},
      {LeakyMeterAcquire::kName,
       {{"leaky_meter_acquire", encode(LeakyMeterState{9, 500'000'000, kNow - 250 * kMs}),
         encode(LeakyMeterAcquire{LeakyMeterParams{10, 10, kNanosPerSecond}, 2})}}},
      {LeakyMeterBatchAcquire::kName,
       {{"leaky_meter_batch_acquire", encode(LeakyMeterState{4, 0, kNow}),
         encode(LeakyMeterBatchAcquire{LeakyMeterParams{10, 7, kNanosPerSecond}, {3, 11, 4}})}}},
      {LeakyShaperAcquire::kName,
       {{"leaky_shaper_acquire", encode(std::int64_t{kNow + 200 * kMs}),
         encode(LeakyShaperAcquire{LeakyShaperParams{3, 10, kNanosPerSecond}, 1})}}},
      {LeakyShaperBatchAcquire::kName,
       {{"leaky_shaper_batch_acquire", encode(std::int64_t{kNow}),
         encode(
             LeakyShaperBatchAcquire{LeakyShaperParams{3, 10, kNanosPerSecond}, {1, 4, 2, 1}})}}},
      {SlidingLogAcquire::kName,
       {{"sliding_log_acquire",
         encode(SlidingLogState{{{kNow - 900 * kMs, 2}, {kNow - 100 * kMs, 1}}}),
         encode(SlidingLogAcquire{SlidingLogParams{5, kNanosPerSecond}, 2})}}},
      {SlidingLogBatchAcquire::kName,
       {{"sliding_log_batch_acquire", encode(SlidingLogState{{{kNow, 1}}}),
         encode(SlidingLogBatchAcquire{SlidingLogParams{5, kNanosPerSecond}, {1, 6, 3}})}}},
      {SlidingWindowAcquire::kName,
       {{"sliding_window_acquire", encode(SlidingWindowState{kNow - kNanosPerSecond / 4, 2, 8}),
         encode(SlidingWindowAcquire{WindowParams{10, kNanosPerSecond}, 3})}}},
      {SlidingWindowBatchAcquire::kName,
       {{"sliding_window_batch_acquire", encode(SlidingWindowState{kNow, 4, 0}),
         encode(SlidingWindowBatchAcquire{WindowParams{10, kNanosPerSecond}, {1, 11, 5}})}}},
      {ConcurrencyAcquire::kName,
       {{"concurrency_acquire",
         encode(
             ConcurrencyState{kNow + 2, {{kNow, kNow + kNanosPerSecond, 2}, {kNow + 1, kNow, 1}}}),
         encode(ConcurrencyAcquire{ConcurrencyParams{3, kNanosPerSecond}, 1})}}},
      {ConcurrencyBatchAcquire::kName,
       {{"concurrency_batch_acquire", encode(ConcurrencyState{kNow + 1, {{kNow, kNow + kMs, 1}}}),
         encode(ConcurrencyBatchAcquire{ConcurrencyParams{3, kNanosPerSecond}, {1, 4, 2, 1}})}}},
      {ConcurrencyRelease::kName,
       {{"concurrency_release",
         encode(ConcurrencyState{kNow + 2, {{kNow, kNow + kMs, 1}, {kNow + 1, kNow + kMs, 2}}}),
         encode(ConcurrencyRelease{kNow + 1})}}},
      {ConcurrencyExtend::kName,
       {{"concurrency_extend", encode(ConcurrencyState{kNow + 1, {{kNow, kNow + kMs, 1}}}),
         encode(ConcurrencyExtend{kNow, kNanosPerSecond})}}},
      {GcraBatchThrottle::kName,
       {{"gcra_batch_throttle", encode(std::int64_t{kNow}),
         encode(GcraBatchThrottle{GcraParams{4, 5, kNanosPerSecond}, {1, 0, 6, 2}})}}},
      {WarmupAcquire::kName,
       {{"warmup_acquire", encode(WarmupState{19, 0, kNow + 290 * kMs}),
         encode(WarmupAcquire{WarmupParams{10, kNanosPerSecond, 2 * kNanosPerSecond, 3, 0}, 1})}}},
      {WarmupBatchAcquire::kName,
       {{"warmup_batch_acquire", encode(WarmupState{8, 500'000'000, kNow - kNanosPerSecond}),
         encode(WarmupBatchAcquire{
             WarmupParams{10, kNanosPerSecond, 2 * kNanosPerSecond, 3, kNanosPerSecond},
             {1, 10, 3}})}}},
  };
}

void addProcessors(Corpus& corpus) {
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  const std::vector<std::string> names = registry.names();
  const auto seeds = processorSeeds();
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto it = seeds.find(names[i]);
    if (it == seeds.end()) throw std::logic_error("no seed for processor " + names[i]);
    for (const ProcessorSeed& s : it->second) {
      ProcessorInput in;
      in.processor = static_cast<std::uint8_t>(i);
      in.now = kNow;
      in.value = s.value;
      in.args = s.args;
      corpus["fuzz_processors"][s.name] = in.bytes();
      // The arguments run, on no entry and on the seed's value.
      const ErasedProcessorFn fn = registry.find(names[i]);
      MutableEntry absent("seed", std::nullopt);
      MutableEntry present("seed", EntryView{s.value, kNever});
      require(fn(s.args, absent, kNow, nullptr).ok() && fn(s.args, present, kNow, nullptr).ok(),
              s.name);
    }
  }
}

// fuzz_resp: chunk size, limits, session (fuzz_resp.cpp), then a RESP stream.
std::string respSeed(std::uint8_t chunk, std::uint8_t limits, std::uint8_t session,
                     const std::string& stream) {
  return std::string{static_cast<char>(chunk), static_cast<char>(limits),
                     static_cast<char>(session)} +
         stream;
}

std::string respCommand(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

void addResp(Corpus& corpus) {
  auto& seeds = corpus["fuzz_resp"];
  seeds["throttle_pipelined"] =
      respSeed(255, 0, 0,
               respCommand({"CL.THROTTLE", "k", "4", "5", "3600"}) +
                   respCommand({"CL.THROTTLE", "k", "4", "5", "3600", "0"}) + "PING\r\n" +
                   respCommand({"QUIT"}));
  seeds["acquire_split"] =
      respSeed(3, 0, 0,
               respCommand({"INGRID.ACQUIRE", "k", "2", "token-bucket", "capacity", "5",
                            "period-ms", "1000", "initial", "3"}) +
                   respCommand({"INGRID.ACQUIRE", "c", "1", "composite", "band", "5/1000", "band",
                                "100/60000", "replacement", "reset"}) +
                   respCommand({"INGRID.ACQUIRE", "w", "1", "token-bucket", "warmup-ms", "100",
                                "cold-factor", "3", "max-wait-ms", "5"}));
  seeds["auth_small_limits"] =
      respSeed(16, 1, 1,
               respCommand({"PING"}) + respCommand({"AUTH", "wrong"}) +
                   respCommand({"HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "n"}) +
                   respCommand({"CLIENT", "SETNAME", "me"}) + respCommand({"COMMAND", "DOCS"}) +
                   respCommand({"ECHO", std::string(80, 'x')}));
  seeds["inline_and_errors"] =
      respSeed(7, 0, 0, "ping hi\r\n\r\nECHO  a\nhello 3\r\n*1\r\n$-5\r\n");
}

void addGubernatorJson(Corpus& corpus) {
  auto& seeds = corpus["fuzz_gubernator_json"];
  seeds["token_bucket"] =
      R"({"requests":[{"name":"api","unique_key":"k","hits":1,"limit":"10","duration":60000}]})";
  seeds["leaky_bucket_camel"] =
      R"({"requests":[{"name":"api","uniqueKey":"k","hits":"0","limit":5,"duration":"1000",)"
      R"("algorithm":"LEAKY_BUCKET","burst":8,"behavior":"GLOBAL","metadata":{"a":"b"},)"
      R"("createdAt":"1790000000000"}]})";
  seeds["refused_items"] =
      R"({"requests":[{"unique_key":"k","limit":1,"duration":1},{"name":"n","unique_key":"k",)"
      R"("limit":1,"duration":1,"behavior":12},{"name":"n","unique_key":"k","hits":-1}]})";
  seeds["bad_type"] = R"({"requests":[{"name":"n","hits":"many"}]})";
}

// Protocol Buffers' encoding of a length-delimited field (tag `field`, wire type 2) and of a
// varint field (wire type 0), for the RLS seeds: the corpus generator links no protobuf.
std::string pbVarint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string pbBytes(int field, const std::string& bytes) {
  return pbVarint(static_cast<std::uint64_t>(field) << 3 | 2) + pbVarint(bytes.size()) + bytes;
}
std::string pbUint(int field, std::uint64_t v) {
  return pbVarint(static_cast<std::uint64_t>(field) << 3) + pbVarint(v);
}
// A RateLimitDescriptor (envoy/extensions/common/ratelimit/v3/ratelimit.proto) of these entries.
std::string rlsDescriptor(const std::vector<std::pair<std::string, std::string>>& entries,
                          const std::string& extra = "") {
  std::string d;
  for (const auto& [k, v] : entries) d += pbBytes(1, pbBytes(1, k) + pbBytes(2, v));
  return d + extra;
}

// fuzz_rls: byte 0 even, a RateLimitRequest; odd, a YAML configuration.
void addRls(Corpus& corpus) {
  auto& seeds = corpus["fuzz_rls"];
  const std::string request(1, '\0');
  seeds["request_nested"] = request + pbBytes(1, "edge") +
                            pbBytes(2, rlsDescriptor({{"tenant", "acme"}, {"path", "/login"}})) +
                            pbBytes(2, rlsDescriptor({{"tenant", "vip"}})) +
                            pbBytes(2, rlsDescriptor({{"closed", "x"}})) + pbUint(3, 5);
  seeds["request_override_hits"] =
      request + pbBytes(1, "edge") +
      pbBytes(2, rlsDescriptor({{"big", "1"}}, pbBytes(2, pbUint(1, 10) + pbUint(2, 2)) +
                                                   pbBytes(3, pbUint(1, 1000)))) +
      pbBytes(2, rlsDescriptor({{"tenant", "a|b=c"}}, pbBytes(3, "")));
  seeds["request_refused"] = request + pbBytes(1, "") + pbBytes(2, rlsDescriptor({{"", ""}}));
  const std::string yaml = "\x01";
  seeds["config_nested"] = yaml + R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 7, name: t}
    detailed_metric: true
    descriptors:
      - key: path
        value: /login
        shadow_mode: true
        rate_limit:
          unit: second
          requests_per_unit: 2
  - key: tenant
    value: vip
    rate_limit: {unlimited: true}
)";
  seeds["config_refused"] = yaml +
                            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: "
                            "{unit: week}\n  - key: a\n";
}

void write(const Corpus& corpus, const std::filesystem::path& dir) {
  for (const auto& [harness, seeds] : corpus) {
    std::filesystem::create_directories(dir / harness);
    for (const auto& [name, bytes] : seeds) {
      std::ofstream out(dir / harness / name, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) throw std::runtime_error("cannot write " + (dir / harness / name).string());
    }
    std::printf("%s: %zu seeds\n", harness.c_str(), seeds.size());
  }
}

}  // namespace
}  // namespace ingrid::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes DIR/<harness>/<seed>)\n", argv[0]);
    return 2;
  }
  try {
    ingrid::fuzz::Corpus corpus;
    ingrid::fuzz::addFrames(corpus);
    ingrid::fuzz::addMessages(corpus);
    ingrid::fuzz::addRaft(corpus);
    ingrid::fuzz::addProcessors(corpus);
    ingrid::fuzz::addResp(corpus);
    ingrid::fuzz::addGubernatorJson(corpus);
    ingrid::fuzz::addRls(corpus);
    ingrid::fuzz::write(corpus, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_write_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
