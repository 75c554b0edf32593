// The bodies fuzz_messages decodes: every struct of cluster/transport/messages.h, the error reply's
// body, and the results of the built-in processors (a client decodes those from
// InvokeReply::result, and a node decodes a stored BucketState from Replicate and Snapshot values).
// The first input byte picks one (an index into kMessageBodies, modulo its size); the rest is the
// body. The corpus generator encodes one real body of each under the same index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/processors/codec.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

#include "cluster/transport/frame.h"
#include "cluster/transport/messages.h"

#include "fuzz_support.h"

namespace ingrid::fuzz {

// Decodes `body` as T with the nodes' decoder. Malformed input throws std::exception: refused,
// which is the expected outcome. A body that is accepted must survive a round trip: its encoding
// decodes again, to a value that encodes the same (one load accepting what its save cannot
// write back, or a save its load refuses, would be a bug). The encoding may differ from `body`
// itself: a big-endian archive is written back little-endian.
// Returns whether the body was accepted.
template <class T>
bool decodeBody(std::string_view name, std::string_view body) {
  T first{};
  try {
    decodeInto(body, first);
  } catch (const std::exception&) {
    return false;
  }
  const std::string once = encode(first);
  T second{};
  try {
    decodeInto(once, second);
  } catch (const std::exception& e) {
    fuzzFail("fuzz_messages",
             std::string(name) + " decoded, but its encoding does not: " + e.what());
  }
  if (encode(second) != once) {
    fuzzFail("fuzz_messages", std::string(name) + " does not encode the same after a round trip");
  }
  return true;
}

// The primary reads an Invoke's fields in place (InvokeRequestSpans) instead of decoding it: it
// must accept exactly what the decoder accepts, and find the same fields. (A byte-order flag
// above 1, which Cereal takes for big-endian, is refused in place: the reader must refuse it.)
inline bool invokeSpans(std::string_view name, std::string_view body) {
  bool inPlace = true;
  InvokeRequestSpans spans;
  try {
    spans = InvokeRequestSpans::of(body);
  } catch (const std::exception&) {
    inPlace = false;
  }
  const bool decoded = decodeBody<InvokeRequest>(name, body);
  if (!body.empty() && static_cast<unsigned char>(body[0]) > 1) {
    if (inPlace) fuzzFail("fuzz_messages", "Invoke read in place with a byte-order flag above 1");
    return decoded;
  }
  if (inPlace != decoded) {
    fuzzFail("fuzz_messages", std::string("an Invoke body the decoder ") +
                                  (decoded ? "accepts" : "refuses") + " is " +
                                  (inPlace ? "accepted" : "refused") + " when read in place");
  }
  if (decoded) {
    InvokeRequest request;
    decodeInto(body, request);
    if (spans.key.in(body) != request.key || spans.processor.in(body) != request.processor ||
        spans.args.in(body) != request.args || spans.client != request.client ||
        spans.seq != request.seq || spans.doneBelow != request.doneBelow ||
        spans.timeoutMs != request.timeoutMs || spans.deadlineUnixMs != request.deadlineUnixMs) {
      fuzzFail("fuzz_messages", "an Invoke read in place differs from the decoded one");
    }
  }
  return decoded;
}

// The backup reads a Replicate batch in place (ReplicateBatchIn): it must accept exactly what the
// decoder accepts, and find the same updates.
inline bool replicateInPlace(std::string_view name, std::string_view body) {
  bool inPlace = true;
  ReplicateBatchIn in;
  try {
    decodeInto(body, in);
  } catch (const std::exception&) {
    inPlace = false;
  }
  const bool decoded = decodeBody<ReplicateBatch>(name, body);
  if (inPlace != decoded) {
    fuzzFail("fuzz_messages", std::string("a Replicate batch the decoder ") +
                                  (decoded ? "accepts" : "refuses") + " is " +
                                  (inPlace ? "accepted" : "refused") + " when read in place");
  }
  if (decoded) {
    ReplicateBatch batch;
    decodeInto(body, batch);
    bool same = batch.updates.size() == in.updates.size();
    for (std::size_t i = 0; same && i < batch.updates.size(); ++i) {
      const ReplicateBody& a = batch.updates[i];
      const ReplicateUpdateView& b = in.updates[i];
      same = a.partition == b.partition && a.seq == b.seq && a.epoch == b.epoch &&
             a.prevEpoch == b.prevEpoch && a.kind == b.kind && a.key == b.key &&
             a.value == b.value && a.expiresAt == b.expiresAt && a.client == b.client &&
             a.requestSeq == b.requestSeq && a.doneBelow == b.doneBelow && a.result == b.result;
    }
    if (!same)
      fuzzFail("fuzz_messages", "a Replicate batch read in place differs from the decoded one");
  }
  return decoded;
}

struct MessageBody {
  std::string_view name;  // also the prefix of its seed files
  bool (*decode)(std::string_view name, std::string_view body);
};

// Append only: an entry's index is the first byte of its seeds in fuzz/corpus/fuzz_messages/.
inline constexpr MessageBody kMessageBodies[] = {
    {"ErrorBody", &decodeBody<ErrorBody>},  // every error reply (kFlagError)
    {"HelloBody", &decodeBody<HelloBody>},
    {"JoinRequest", &decodeBody<JoinRequest>},
    {"JoinReply", &decodeBody<JoinReply>},
    {"TopologyBody", &decodeBody<TopologyBody>},  // TopologyPrepare, GetTopology reply, Redirect
    {"InvokeRequest", &decodeBody<InvokeRequest>},
    {"InvokeReply", &decodeBody<InvokeReply>},
    {"ReplicateBody", &decodeBody<ReplicateBody>},
    {"SnapshotBody", &decodeBody<SnapshotBody>},
    {"SyncedBody", &decodeBody<SyncedBody>},
    {"LeaveBody", &decodeBody<LeaveBody>},
    {"HeartbeatBody", &decodeBody<HeartbeatBody>},
    {"LeaseBody", &decodeBody<LeaseBody>},
    {"LeaseGrant", &decodeBody<LeaseGrant>},
    {"MemberStatusBody", &decodeBody<MemberStatusBody>},
    {"AcquireAnswer", &decodeBody<AcquireAnswer>},                // TokenBucketAcquire's result
    {"AcquireAnswers", &decodeBody<std::vector<AcquireAnswer>>},  // TokenBucketBatchAcquire's
    {"Counter", &decodeBody<std::int64_t>},                       // Increment's and GetCounter's
    {"EntrySnapshot", &decodeBody<EntrySnapshot>},                // GetEntry's
    {"BucketState", &decodeBody<BucketState>},                    // a token bucket's stored value
    {"AuthBody", &decodeBody<AuthBody>},                          // member authentication
    // The limiters' results (a client decodes them) and stored states (ingrid-cli inspect).
    {"GcraAnswer", &decodeBody<GcraAnswer>},
    {"GcraAnswers", &decodeBody<std::vector<GcraAnswer>>},
    {"LimitAnswer", &decodeBody<LimitAnswer>},  // fixed window, sliding log and window, meter
    {"LimitAnswers", &decodeBody<std::vector<LimitAnswer>>},
    {"ShaperAnswer", &decodeBody<ShaperAnswer>},
    {"ShaperAnswers", &decodeBody<std::vector<ShaperAnswer>>},
    {"FixedWindowState", &decodeBody<FixedWindowState>},
    {"SlidingLogState", &decodeBody<SlidingLogState>},
    {"SlidingWindowState", &decodeBody<SlidingWindowState>},
    {"LeakyMeterState", &decodeBody<LeakyMeterState>},
    // Replication batches (protocol version 4) and an Invoke read in place by the primary.
    {"ReplicateBatch", &decodeBody<ReplicateBatch>},
    {"ReplicateAck", &decodeBody<ReplicateAck>},
    {"InvokeRequestSpans", &invokeSpans},
    // The concurrency limiter's result and stored state.
    {"LeaseAnswer", &decodeBody<LeaseAnswer>},
    {"LeaseAnswers", &decodeBody<std::vector<LeaseAnswer>>},
    {"ConcurrencyState", &decodeBody<ConcurrencyState>},
    // A reservation's result (TokenBucketReserve, TokenBucketBatchReserve).
    {"ReserveAnswer", &decodeBody<ReserveAnswer>},
    {"ReserveAnswers", &decodeBody<std::vector<ReserveAnswer>>},
    // The composite bucket's result and stored state.
    {"CompositeAnswer", &decodeBody<CompositeAnswer>},
    {"CompositeAnswers", &decodeBody<std::vector<CompositeAnswer>>},
    {"CompositeState", &decodeBody<CompositeState>},
    // The warm-up limiter's result and stored state (WarmupAcquire, WarmupBatchAcquire).
    {"WarmupAnswer", &decodeBody<WarmupAnswer>},
    {"WarmupAnswers", &decodeBody<std::vector<WarmupAnswer>>},
    {"WarmupState", &decodeBody<WarmupState>},
    // A Replicate batch read in place by the backup.
    {"ReplicateBatchIn", &replicateInPlace},
};
inline constexpr std::size_t kMessageBodyCount = std::size(kMessageBodies);

}  // namespace ingrid::fuzz
