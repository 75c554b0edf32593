// RawClient: a bare client for tests that speak the wire directly (frames, not the Client API).
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "cluster/transport/connection.h"
#include "cluster/transport/transport.h"

namespace ingrid::testing {

// A bare client: a transport of its own that only dials, and answers nothing.
class RawClient final : public ConnectionHandler {
 public:
  RawClient() : transport_(io_, TransportOptions{}, *this), guard_(io_.get_executor()) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RawClient() override {
    transport_.stop();
    guard_.reset();
    io_.stop();
    thread_.join();
  }
  void onRequest(const std::shared_ptr<Connection>&, Frame) override {}
  void onClosed(const std::shared_ptr<Connection>&, const Error&) override {}

  std::shared_ptr<Connection> connect(const std::string& address) {
    std::promise<Result<std::shared_ptr<Connection>>> p;
    transport_.connect(address,
                       [&p](Result<std::shared_ptr<Connection>> c) { p.set_value(std::move(c)); });
    auto c = p.get_future().get();
    REQUIRE(c.ok());
    return c.value();
  }
  static Result<Frame> send(Connection& conn, MessageType type, std::uint64_t version,
                            std::string body) {
    std::promise<Result<Frame>> p;
    conn.request(type, version, std::move(body), std::chrono::milliseconds(5000),
                 [&p](Result<Frame> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

 private:
  asio::io_context io_;
  Transport transport_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace ingrid::testing
