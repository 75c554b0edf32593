#include "cluster/resp/resp_server.h"

#include <array>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <asio/bind_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>

#include "cluster/resp/resp_commands.h"

namespace ingrid {
namespace {

// Replies queued beyond this while a write is in flight pause the connection's commands until
// the write completes.
constexpr std::size_t kMaxQueuedReply = 64 * 1024;

}  // namespace

class RespConnection;

// Everything here runs on the server's thread, except start() and stop(), which run before it
// starts and to post to it.
class RespServerImpl {
 public:
  RespServerImpl(Node& node, RespLimits limits) : node_(node), limits_(limits) {}

  Node& node_;
  const RespLimits limits_;
  asio::io_context io_{1};
  asio::ip::tcp::acceptor acceptor_{io_};
  std::set<std::shared_ptr<RespConnection>> connections_;
  std::uint64_t lastId_ = 0;
  std::thread thread_;

  void accept();
  void remove(const std::shared_ptr<RespConnection>& c) { connections_.erase(c); }
};

// One client connection: reads, parses and answers in order; one write in flight with the next
// replies queued behind it. Its lifetime is held by its pending operations (shared_from_this) and
// by the server's set until it closes.
class RespConnection : public std::enable_shared_from_this<RespConnection> {
 public:
  RespConnection(RespServerImpl& server, asio::ip::tcp::socket socket, std::uint64_t id)
      : server_(server), socket_(std::move(socket)), parser_(server.limits_), id_(id) {}

  void start() { read(); }

  // Closes the socket; pending reads and writes complete with operation_aborted.
  void close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    socket_.close(ignored);
    server_.remove(shared_from_this());
  }

 private:
  void read() {
    socket_.async_read_some(asio::buffer(input_),
                            [self = shared_from_this()](std::error_code ec, std::size_t n) {
                              // EOF, reset and cancel all end the connection alike.
                              if (ec) return self->close();
                              self->parser_.feed(std::string_view(self->input_.data(), n));
                              self->run();
                            });
  }

  // Answers every complete command received, in order, until one must wait (a throttle, a full
  // reply queue) or more input is needed.
  void run() {
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
          closing_ = true;
          return flush();
        case RespParser::Status::kCommand:
          break;
      }
      RespAction action = respCommand(args_, id_);
      queued_ += action.reply;
      closing_ = action.close;
      if (action.throttle) {
        waiting_ = true;
        flush();
        server_.node_.invokeAsync(
            std::move(action.throttleKey), *action.throttle,
            asio::bind_executor(
                server_.io_, [self = shared_from_this(), work = asio::make_work_guard(server_.io_)](
                                 Result<GcraAnswer> answer) {
                  self->waiting_ = false;
                  if (self->closed_) return;
                  self->queued_ += respThrottleReply(answer);
                  self->run();
                }));
      }
    }
    if (closing_) flush();
  }

  void flush() {
    if (writing_ || closed_) return;
    if (queued_.empty()) {
      if (closing_) close();
      return;
    }
    writing_ = true;
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

  RespServerImpl& server_;
  asio::ip::tcp::socket socket_;
  RespParser parser_;
  const std::uint64_t id_;
  std::array<char, 16 * 1024> input_{};
  std::vector<std::string> args_;
  std::string queued_;   // replies not yet handed to a write
  std::string sending_;  // the write in flight
  bool writing_ = false;
  bool waiting_ = false;         // a throttle is running on the node
  bool pausedForWrite_ = false;  // run() stopped for a full reply queue
  bool closing_ = false;         // close once the queued replies are written
  bool closed_ = false;
};

void RespServerImpl::accept() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      std::error_code ignored;
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      auto c = std::make_shared<RespConnection>(*this, std::move(socket), ++lastId_);
      connections_.insert(c);
      c->start();
    }
    accept();  // a failed accept (out of descriptors) does not end the listener
  });
}

RespServer::RespServer(Node& node, RespLimits limits)
    : impl_(std::make_unique<RespServerImpl>(node, limits)) {}

RespServer::~RespServer() { stop(); }

Result<std::uint16_t> RespServer::start(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || impl_->thread_.joinable() ||
      impl_->acceptor_.is_open()) {
    return Error(Errc::invalid_configuration,
                 "RESP address '" + address + "' is not HOST:PORT, or the server was started");
  }
  std::error_code ec;
  asio::ip::tcp::resolver resolver(impl_->io_);
  const auto endpoints = resolver.resolve(
      address.substr(0, colon), address.substr(colon + 1),
      asio::ip::tcp::resolver::numeric_service | asio::ip::tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return Error(Errc::invalid_configuration,
                 "cannot resolve RESP address '" + address + "': " + ec.message());
  }
  auto& acceptor = impl_->acceptor_;
  const auto endpoint = endpoints.begin()->endpoint();
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) {
    const std::uint16_t port = acceptor.local_endpoint(ec).port();
    impl_->accept();
    impl_->thread_ = std::thread([impl = impl_.get()] { impl->io_.run(); });
    return port;
  }
  std::error_code ignored;
  acceptor.close(ignored);
  return Error(Errc::invalid_configuration,
               "cannot listen for RESP on " + address + ": " + ec.message());
}

void RespServer::stop() {
  if (!impl_->thread_.joinable()) return;
  asio::post(impl_->io_, [impl = impl_.get()] {
    std::error_code ignored;
    impl->acceptor_.close(ignored);
    // close() erases from the set: close a copy.
    const auto connections = impl->connections_;
    for (const auto& c : connections) c->close();
  });
  // run() returns once nothing is pending: the accept and reads are cancelled, and each
  // throttle in flight holds a work guard until its answer has been handled.
  impl_->thread_.join();
}

}  // namespace ingrid
