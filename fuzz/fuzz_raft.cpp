// fuzz_raft: RaftIo::deliver (cluster/control/raft_io.h), which decodes the Raft messages that
// kRaft frames carry (decodeRaftMessage, cluster/control/raft_codec.h) and hands them to raft.
// Input: one encoded message, as the body of a kRaft frame.
//
// The RaftIo is started through its raft_io table with this harness's receive callback in place
// of raft's, so an accepted message reaches the callback, which does with it what raft does: it
// takes ownership and frees the entries, their batch, a snapshot's configuration and data (a
// leak or double free there is a finding). Properties: a refused message is refused with
// malformed_message; an accepted one has none of the zero ids and terms the decoder promises to
// refuse (raft asserts on them), and its encoding (encodeRaftMessage) is accepted again and
// encodes the same.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>

#include <ingrid/error.h>

#include "cluster/control/raft_codec.h"
#include "cluster/control/raft_io.h"

#include "fuzz_support.h"

namespace ingrid::fuzz {
namespace {

[[noreturn]] void fail(const std::string& what) { fuzzFail("fuzz_raft", what); }

// Raft's sends go nowhere: nothing here runs raft.
class NullNetwork final : public RaftNetwork {
 public:
  void sendRaftMessage(std::uint64_t, const std::string&, std::string) override {}
};

// What the receive callback saw last: the accepted message, encoded again.
std::optional<std::string> gReceived;

raft_term termOf(const raft_message& m) {
  switch (m.type) {
    case RAFT_IO_REQUEST_VOTE:
      return m.request_vote.term;
    case RAFT_IO_REQUEST_VOTE_RESULT:
      return m.request_vote_result.term;
    case RAFT_IO_APPEND_ENTRIES:
      return m.append_entries.term;
    case RAFT_IO_APPEND_ENTRIES_RESULT:
      return m.append_entries_result.term;
    case RAFT_IO_INSTALL_SNAPSHOT:
      return m.install_snapshot.term;
    case RAFT_IO_TIMEOUT_NOW:
      return m.timeout_now.term;
    default:
      fail("an accepted message has unknown type " + std::to_string(m.type));
  }
}

// Raft's part after receiving: ownership of what the message points to (libraft frees an
// AppendEntries' entries with entryBatchesDestroy, a snapshot's parts once installed).
void releaseLikeRaft(raft_message& m) {
  if (m.type == RAFT_IO_APPEND_ENTRIES) {
    auto& a = m.append_entries;
    void* freed = nullptr;
    for (unsigned i = 0; i < a.n_entries; ++i) {
      if (a.entries[i].batch != freed) {
        freed = a.entries[i].batch;
        raft_free(freed);
      }
    }
    raft_free(a.entries);
  } else if (m.type == RAFT_IO_INSTALL_SNAPSHOT) {
    raft_configuration_close(&m.install_snapshot.conf);
    raft_free(m.install_snapshot.data.base);
  }
}

void onReceive(raft_io*, raft_message* m) {
  if (m->server_id == 0 || termOf(*m) == 0) fail("an accepted message has sender id or term 0");
  if (m->server_address == nullptr) fail("an accepted message has no sender address");
  if (m->type == RAFT_IO_APPEND_ENTRIES) {
    for (unsigned i = 0; i < m->append_entries.n_entries; ++i) {
      if (m->append_entries.entries[i].term == 0) fail("an accepted entry has term 0");
    }
  }
  if (m->type == RAFT_IO_INSTALL_SNAPSHOT &&
      (m->install_snapshot.last_index == 0 || m->install_snapshot.last_term == 0)) {
    fail("an accepted snapshot has index or term 0");
  }
  gReceived = encodeRaftMessage(*m, m->server_id, m->server_address);
  releaseLikeRaft(*m);
}

void onTick(raft_io*) {}

// One RaftIo for the whole run, started with the callbacks above (its tick timer is armed on an
// io_context nothing runs).
RaftIo& startedIo() {
  static asio::io_context context;
  static NullNetwork network;
  static RaftIo io(context, network);
  static const bool started = [] {
    raft_io* table = io.get();
    return table->init(table, 1, "fuzz:1") == 0 &&
           table->start(table, 1000, &onTick, &onReceive) == 0;
  }();
  if (!started) fail("RaftIo does not start");
  return io;
}

// Delivers `bytes`: the encoding of the accepted message, or nullopt if it was refused.
std::optional<std::string> deliver(std::string_view bytes) {
  gReceived.reset();
  Result<bool> delivered = startedIo().deliver(bytes);
  if (!delivered) {
    if (!(delivered.error() == Errc::malformed_message)) {
      fail("refused with an unexpected code: " + delivered.error().message());
    }
    if (gReceived) fail("a refused message reached raft");
    return std::nullopt;
  }
  if (!*delivered || !gReceived) fail("an accepted message did not reach raft");
  return std::move(gReceived);
}

}  // namespace
}  // namespace ingrid::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ingrid::fuzz::deliver;
  const auto once = deliver(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!once) return 0;
  const auto twice = deliver(*once);
  if (!twice) ingrid::fuzz::fail("an accepted message's encoding is refused");
  if (*twice != *once) ingrid::fuzz::fail("an accepted message does not encode the same twice");
  return 0;
}
