// CommandFsm: a libraft state machine for tests whose commands are u64s. Each applied command is
// appended to `applied`, in log order; a snapshot holds every command so far, and a restore
// replaces them with the snapshot's (counted in `restores`). A test's Raft server derives from it
// and passes `&fsm` to raft_init. Not copyable or movable (raft keeps `fsm.data`).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

extern "C" {
#include <raft.h>  // a C header without its own extern "C"
}

namespace ingrid::testing {

struct CommandFsm {
  CommandFsm() {
    fsm.version = 1;
    fsm.data = this;
    fsm.apply = [](raft_fsm* f, const raft_buffer* buf, void** result) {
      std::uint64_t cmd = 0;
      if (buf->len != sizeof cmd) return RAFT_MALFORMED;
      std::memcpy(&cmd, buf->base, sizeof cmd);
      static_cast<CommandFsm*>(f->data)->applied.push_back(cmd);
      *result = nullptr;
      return 0;
    };
    fsm.snapshot = [](raft_fsm* f, raft_buffer* bufs[], unsigned* n) {
      const auto& cmds = static_cast<CommandFsm*>(f->data)->applied;
      const std::size_t len = cmds.size() * sizeof(std::uint64_t);
      *bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
      if (*bufs == nullptr) return RAFT_NOMEM;
      (*bufs)[0].base = raft_malloc(len == 0 ? 1 : len);
      if ((*bufs)[0].base == nullptr) {
        raft_free(*bufs);
        return RAFT_NOMEM;
      }
      (*bufs)[0].len = len;
      if (len > 0) std::memcpy((*bufs)[0].base, cmds.data(), len);
      *n = 1;
      return 0;
    };
    fsm.restore = [](raft_fsm* f, raft_buffer* buf) {
      auto& self = *static_cast<CommandFsm*>(f->data);
      self.applied.resize(buf->len / sizeof(std::uint64_t));
      if (buf->len > 0) std::memcpy(self.applied.data(), buf->base, buf->len);
      raft_free(buf->base);  // the FSM owns the restored buffer
      ++self.restores;
      return 0;
    };
  }
  CommandFsm(const CommandFsm&) = delete;
  CommandFsm& operator=(const CommandFsm&) = delete;

  raft_fsm fsm{};
  std::vector<std::uint64_t> applied;
  int restores = 0;
};

// Proposes command `cmd` on `r`; `done(status)` runs once raft answers (0: committed and
// applied here), or at once with raft_apply's refusal.
inline void proposeCommand(raft& r, std::uint64_t cmd, std::function<void(int)> done) {
  struct Request {
    struct raft_apply req;
    std::function<void(int)> done;
  };
  auto* request = new Request{{}, std::move(done)};
  request->req.data = request;
  raft_buffer buf{raft_malloc(sizeof cmd), sizeof cmd};
  std::memcpy(buf.base, &cmd, sizeof cmd);
  const int rv = raft_apply(&r, &request->req, &buf, 1, [](struct raft_apply* req, int st, void*) {
    auto* q = static_cast<Request*>(req->data);
    q->done(st);
    delete q;
  });
  if (rv != 0) {
    raft_free(buf.base);
    request->done(rv);
    delete request;
  }
}

}  // namespace ingrid::testing
