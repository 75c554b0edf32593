#include "cluster/resp/resp_server.h"

#include <array>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>

#include "cluster/resp/resp_commands.h"
#include "cluster/transport/timer.h"

namespace ingrid {
namespace {

// Replies queued beyond this while a write is in flight pause the connection's commands until
// the write completes.
constexpr std::size_t kMaxQueuedReply = 64 * 1024;

}  // namespace

class RespConnection;

// Everything here runs on the serving thread (the node's, or the server's own: resp_server.h),
// except start() and stop(), which run before it serves and to post to it, and hold()/release().
class RespServerImpl {
 public:
  RespServerImpl(Node& node, RespOptions options) : node_(node), options_(options) {}

  Node& node_;
  const RespOptions options_;
  // RespCounts, written on the serving thread, read from any.
  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, idleClosed_{0}, protocolErrors_{0},
      commands_{0}, authFailures_{0}, open_{0}, writes_{0};
  std::atomic<std::thread::id> commandThread_{};
  // The serving thread's context: ownIo_ (run by thread_), or the node's. Set by start().
  std::optional<asio::io_context> ownIo_;
  asio::io_context* io_ = nullptr;
  std::optional<asio::ip::tcp::acceptor> acceptor_;
  std::set<std::shared_ptr<RespConnection>> connections_;
  std::uint64_t lastId_ = 0;
  std::thread thread_;
  enum class State { kNew, kServing, kStopped } state_ = State::kNew;  // the owner's thread

  bool onServingThread() const noexcept { return io_->get_executor().running_in_this_thread(); }
  void accept();
  void remove(const std::shared_ptr<RespConnection>& c) {
    connections_.erase(c);
    open_.store(connections_.size(), std::memory_order_relaxed);
  }

  // Holds on this object by work of the serving thread: the listener until its accept ends, each
  // connection for its life, stop()'s closing task. stop() waits until none is left, so that on
  // the node's thread nothing of the server runs after stop() returns. release() is the last
  // touch of this object by its caller.
  void hold() {
    std::lock_guard lock(liveMu_);
    ++live_;
  }
  void release() {
    std::lock_guard lock(liveMu_);
    if (--live_ == 0) liveCv_.notify_all();
  }
  void awaitReleased() {
    std::unique_lock lock(liveMu_);
    liveCv_.wait(lock, [this] { return live_ == 0; });
  }

 private:
  std::mutex liveMu_;
  std::condition_variable liveCv_;
  std::size_t live_ = 0;
};

// One client connection: reads, parses and answers in order; one write in flight with the next
// replies queued behind it. Its lifetime is held by its pending operations (shared_from_this) and
// by the server's set until it closes.
class RespConnection : public std::enable_shared_from_this<RespConnection> {
 public:
  RespConnection(RespServerImpl& server, asio::ip::tcp::socket socket, std::uint64_t id)
      : held_(server),
        server_(server),
        socket_(std::move(socket)),
        idle_(*server.io_),
        parser_(server.options_.limits),
        secret_(server.node_.options().clientSecret) {
    session_.id = id;
    session_.secret = secret_;
    session_.authenticated = secret_.empty();
  }

  void start() { read(); }

  // Closes the socket; pending reads and writes complete with operation_aborted.
  void close() {
    assert(server_.onServingThread());
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.close(ignored);
    idle_.cancel();
    server_.remove(shared_from_this());
  }

 private:
  // Reads, with the idle timer running until something arrives.
  void read() {
    const auto timeout = server_.options_.idleTimeout;
    if (timeout.count() > 0) {
      idle_.expires_after(timeout);
      idle_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (ec || self->closed_) return;  // cancelled: input came, or the connection closed
        self->server_.idleClosed_.fetch_add(1, std::memory_order_relaxed);
        self->close();
      });
    }
    socket_.async_read_some(asio::buffer(input_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              self->idle_.cancel();
                              // EOF, reset and cancel all end the connection alike.
                              if (ec) return self->close();
                              self->parser_.feed(std::string_view(self->input_.data(), n));
                              self->run();
                            });
  }

  // Answers every complete command received, in order, until one must wait (a throttle, a full
  // reply queue) or more input is needed.
  void run() {
    assert(server_.onServingThread());
    server_.commandThread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    while (!closed_ && !waiting_ && !closing_) {
      if (writing_ && queued_.size() >= kMaxQueuedReply) {
        pausedForWrite_ = true;
        return;
      }
      switch (parser_.next(args_)) {
        case RespParser::Status::kNeedMore:
          flush();
          return read();
        case RespParser::Status::kError:
          // A protocol error ends this connection only, after its -ERR line.
          queued_ += respError(parser_.error());
          server_.protocolErrors_.fetch_add(1, std::memory_order_relaxed);
          closing_ = true;
          return flush();
        case RespParser::Status::kCommand:
          break;
      }
      const bool wasAuthenticated = session_.authenticated;
      RespAction action = respCommand(args_, session_);
      server_.commands_.fetch_add(1, std::memory_order_relaxed);
      if (!session_.authenticated && !wasAuthenticated && !action.reply.empty() &&
          action.reply[0] == '-') {
        server_.authFailures_.fetch_add(1, std::memory_order_relaxed);
      }
      queued_ += action.reply;
      closing_ = action.close;
      if (action.request) {
        waiting_ = true;
        const std::uint64_t wait = ++waits_;
        std::visit([&](auto& request) { invoke(std::move(action.key), request, action.throttle); },
                   *action.request);
        // The replies before it go out now only if this wait is not over by the time the serving
        // thread gets to it: a throttle that ran in place has its answer queued ahead of this
        // check, and a pipeline's replies then leave in one write when its input runs out.
        if (!queued_.empty()) {
          asio::post(*server_.io_, [self = shared_from_this(), wait] {
            if (self->waiting_ && self->waits_ == wait) self->flush();
          });
        }
      }
    }
    if (closing_) flush();
  }

  // Runs `request` on `key`; its answer is queued, then the commands after it run. The answer
  // is posted to the serving thread, never run inside this call (asyncInvoke's rule), even when
  // the throttle itself ran in place (a local partition on the node's thread): so run() is never
  // re-entered from inside itself, and a pipelined connection's next command starts only after
  // this one's reply is queued. Asio's rule keeps work on that executor until the answer has
  // been handled (the own thread's run() waits for it).
  template <class Request>
  void invoke(std::string key, const Request& request, bool throttle) {
    using Answer = typename Request::Result;
    server_.node_.invokeAsync(
        std::move(key), request,
        asio::bind_executor(
            *server_.io_, [self = shared_from_this(), throttle](Result<Answer> answer) {
              assert(self->server_.onServingThread());
              self->waiting_ = false;
              if (self->closed_) return;
              if constexpr (std::is_same_v<Answer, GcraAnswer>) {
                self->queued_ += throttle ? respThrottleReply(answer)
                                          : respAcquireReply(answer, self->session_.protocol);
              } else {
                static_cast<void>(throttle);  // only CL.THROTTLE's GCRA has a reply of its own
                self->queued_ += respAcquireReply(answer, self->session_.protocol);
              }
              self->run();
            }));
  }

  void flush() {
    if (writing_ || closed_) return;
    if (queued_.empty()) {
      if (closing_) close();
      return;
    }
    writing_ = true;
    server_.writes_.fetch_add(1, std::memory_order_relaxed);
    sending_.swap(queued_);
    queued_.clear();
    asio::async_write(socket_, asio::buffer(sending_),
                      [self = shared_from_this()](std::error_code ec, std::size_t) {
                        self->writing_ = false;
                        if (ec) return self->close();
                        if (self->pausedForWrite_) {
                          self->pausedForWrite_ = false;
                          return self->run();
                        }
                        self->flush();
                      });
  }

  // Counts this connection among the server's holds for its whole life: declared first, so it is
  // released last, once the socket and the timer are gone.
  struct Held {
    RespServerImpl& server;
    explicit Held(RespServerImpl& s) : server(s) { server.hold(); }
    ~Held() { server.release(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
  } held_;
  RespServerImpl& server_;
  asio::ip::tcp::socket socket_;
  Timer idle_;
  RespParser parser_;
  const std::string secret_;
  RespSession session_;
  std::array<char, 16 * 1024> input_{};
  std::vector<std::string> args_;
  std::string queued_;   // replies not yet handed to a write
  std::string sending_;  // the write in flight
  bool writing_ = false;
  bool waiting_ = false;         // a throttle is running on the node
  std::uint64_t waits_ = 0;      // throttles started, the running one's number while waiting_
  bool pausedForWrite_ = false;  // run() stopped for a full reply queue
  bool closing_ = false;         // close once the queued replies are written
  bool closed_ = false;
};

void RespServerImpl::accept() {
  acceptor_->async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    assert(onServingThread());
    if (ec == asio::error::operation_aborted || !acceptor_->is_open()) {
      release();  // the listener's hold: the last touch of this object here
      return;
    }
    if (!ec) {
      std::error_code ignored;
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      if (connections_.size() >= options_.maxConnections) {
        // Told why, then closed: one short line, written without blocking (a new socket's send
        // buffer holds it).
        refused_.fetch_add(1, std::memory_order_relaxed);
        static constexpr std::string_view kFull = "-ERR max number of clients reached\r\n";
        socket.non_blocking(true, ignored);
        socket.write_some(asio::buffer(kFull.data(), kFull.size()), ignored);
        socket.close(ignored);
      } else {
        accepted_.fetch_add(1, std::memory_order_relaxed);
        auto c = std::make_shared<RespConnection>(*this, std::move(socket), ++lastId_);
        connections_.insert(c);
        open_.store(connections_.size(), std::memory_order_relaxed);
        c->start();
      }
    }
    accept();  // a failed accept (out of descriptors) does not end the listener
  });
}

RespServer::RespServer(Node& node, RespOptions options)
    : impl_(std::make_unique<RespServerImpl>(node, options)) {}

RespCounts RespServer::counts() const noexcept {
  constexpr auto r = std::memory_order_relaxed;
  const RespServerImpl& i = *impl_;
  return RespCounts{i.open_.load(r),         i.accepted_.load(r),       i.refused_.load(r),
                    i.idleClosed_.load(r),   i.protocolErrors_.load(r), i.commands_.load(r),
                    i.authFailures_.load(r), i.writes_.load(r)};
}

std::string RespServer::metricsText() const {
  const RespCounts c = counts();
  std::string out;
  const auto metric = [&out](const char* name, const char* type, const char* help,
                             std::uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  metric("ingrid_resp_connections", "gauge", "RESP gateway connections open now.", c.connections);
  metric("ingrid_resp_connections_accepted_total", "counter", "RESP gateway connections accepted.",
         c.accepted);
  metric("ingrid_resp_connections_refused_total", "counter",
         "RESP gateway connections refused at the connection cap.", c.refused);
  metric("ingrid_resp_idle_closed_total", "counter",
         "RESP gateway connections closed by the idle timeout.", c.idleClosed);
  metric("ingrid_resp_protocol_errors_total", "counter",
         "RESP gateway connections closed for a protocol error.", c.protocolErrors);
  metric("ingrid_resp_commands_total", "counter", "RESP gateway commands run.", c.commands);
  metric("ingrid_resp_auth_failures_total", "counter",
         "RESP gateway AUTH refusals and commands refused before AUTH.", c.authFailures);
  metric("ingrid_resp_writes_total", "counter",
         "RESP gateway socket writes of replies (a pipeline's replies may share one).", c.writes);
  return out;
}

bool RespServer::servesOnNodeThread() const noexcept {
  return impl_->io_ != nullptr && !impl_->ownIo_;
}

std::thread::id RespServer::TEST_commandThread() const noexcept {
  return impl_->commandThread_.load(std::memory_order_relaxed);
}

RespServer::~RespServer() { stop(); }

Result<std::uint16_t> RespServer::start(const std::string& address) {
  RespServerImpl& impl = *impl_;
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || impl.state_ != RespServerImpl::State::kNew) {
    return Error(Errc::invalid_configuration,
                 "RESP address '" + address + "' is not HOST:PORT, or the server was started");
  }
  std::optional<asio::io_context::executor_type> nodeThread;
  if (impl.options_.onNodeThread) nodeThread = impl.node_.partitionExecutor();
  if (!impl.io_) {
    impl.io_ = nodeThread ? &nodeThread->context() : &impl.ownIo_.emplace(1);
    impl.acceptor_.emplace(*impl.io_);
  }
  std::error_code ec;
  asio::ip::tcp::resolver resolver(*impl.io_);
  const auto endpoints = resolver.resolve(
      address.substr(0, colon), address.substr(colon + 1),
      asio::ip::tcp::resolver::numeric_service | asio::ip::tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return Error(Errc::invalid_configuration,
                 "cannot resolve RESP address '" + address + "': " + ec.message());
  }
  // Set up here, before the serving thread uses it: then only there.
  auto& acceptor = *impl.acceptor_;
  const auto endpoint = endpoints.begin()->endpoint();
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) {
    const std::uint16_t port = acceptor.local_endpoint(ec).port();
    impl.state_ = RespServerImpl::State::kServing;
    impl.hold();  // the listener's, released when its accept ends
    asio::post(*impl.io_, [&impl] { impl.accept(); });
    if (impl.ownIo_) impl.thread_ = std::thread([&impl] { impl.ownIo_->run(); });
    return port;
  }
  std::error_code ignored;
  acceptor.close(ignored);
  return Error(Errc::invalid_configuration,
               "cannot listen for RESP on " + address + ": " + ec.message());
}

void RespServer::stop() {
  RespServerImpl& impl = *impl_;
  if (impl.state_ != RespServerImpl::State::kServing) return;
  // Both would wait forever: for this very thread, or for a thread that no longer runs tasks.
  if (impl.onServingThread()) {
    std::fprintf(stderr,
                 "ingrid: RespServer::stop() called on the thread that serves its connections, "
                 "which it waits for; stop the server from another thread\n");
    std::abort();
  }
  if (!impl.ownIo_ && !impl.node_.running()) {
    std::fprintf(stderr,
                 "ingrid: RespServer::stop() after its Node began to stop: the server serves on "
                 "the node's thread; stop the server first\n");
    std::abort();
  }
  impl.state_ = RespServerImpl::State::kStopped;
  impl.hold();  // the closing task's
  asio::post(*impl.io_, [&impl] {
    {
      std::error_code ignored;
      impl.acceptor_->close(ignored);
      // close() erases from the set: close a copy.
      const auto connections = impl.connections_;
      for (const auto& c : connections) c->close();
    }
    impl.release();
  });
  // The accept and the reads end (cancelled); each throttle in flight keeps its connection until
  // its answer has been handled. On the server's own thread, run() returns then.
  impl.awaitReleased();
  if (impl.thread_.joinable()) impl.thread_.join();
}

}  // namespace ingrid
