#include "cluster/transport/transport.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <asio/connect.hpp>
#include <asio/post.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cluster/transport/address.h"
#include "cluster/transport/sim_network.h"
#include "cluster/transport/timer.h"
#include "cluster/transport/tls.h"

namespace ingrid {
namespace {

// Wait before accepting again after an accept error (out of file descriptors, for instance).
constexpr std::chrono::milliseconds kAcceptRetry{100};

Error stoppedError(const std::string& what) {
  return Error(Errc::shutting_down, "transport stopped" + what);
}

// Whether the TLS peer presented a certificate that the CA verified.
bool certified(Stream::Tls& tls) {
  SSL* ssl = tls.native_handle();
  return SSL_get0_peer_certificate(ssl) != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
}

// A verified certificate whose extended key usage names serverAuth: a member's (members serve
// each other). A client's certificate names clientAuth only; one without the extension is no
// member's either.
bool memberCertificate(Stream::Tls& tls) {
  if (!certified(tls)) return false;
  X509* cert = SSL_get0_peer_certificate(tls.native_handle());
  return (X509_get_extension_flags(cert) & EXFLAG_XKUSAGE) != 0 &&
         (X509_get_extended_key_usage(cert) & XKU_SSL_SERVER) != 0;
}

// How long the server side of a TLS handshake may take when no handshake timeout is set.
constexpr std::chrono::milliseconds kTlsHandshakeLimit{10000};

}  // namespace

std::string joinAddress(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<std::pair<std::string, std::uint16_t>> parseAddress(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return std::nullopt;  // an IPv6 address must be written [addr]:port
  }
  if (port.empty() || port.size() > 5) return std::nullopt;
  unsigned value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value < 1 || value > 65535) return std::nullopt;
  return std::make_pair(std::move(host), static_cast<std::uint16_t>(value));
}

struct Transport::State {
  State(asio::io_context& context, TransportOptions opts, ConnectionHandler& h)
      : io(context),
        options(std::move(opts)),
        handler(h),
        sim(simulatedMember()),
        acceptor(context),
        retryTimer(context) {
    if (options.shared.budget) {
      budget = options.shared.budget;
    } else if (options.maxBufferedBytes > 0) {
      budget = std::make_shared<BufferBudget>(options.maxBufferedBytes);
    }
    inbound = options.shared.inbound ? options.shared.inbound
                                     : std::make_shared<std::atomic<std::size_t>>(0);
  }

  asio::io_context& io;
  const TransportOptions options;
  ConnectionHandler& handler;
  // The member whose transport this is, inside a simulation (runtime.h): it listens and dials on
  // the member's SimNetwork, through simAcceptor and SimStreams. Null: TCP.
  SimulatedMember* const sim;
  asio::ip::tcp::acceptor acceptor;        // opened by listen(), then network thread only
  std::optional<SimAcceptor> simAcceptor;  // in a simulation, made by listen()
  Timer retryTimer;
  std::shared_ptr<BufferBudget> budget;  // of accepted connections; null without a limit
  std::atomic<std::uint16_t> port{0};
  // Accepted connections still open (of every transport sharing the count).
  std::shared_ptr<std::atomic<std::size_t>> inbound;
  std::mutex mu;
  // Written under mu; atomic so that stopped() reads it without the lock (a worker asks it for
  // every replicated update).
  std::atomic<bool> stopped{false};
  bool listening = false;  // guarded by mu
  // By a serial number, not by address: stop() closes them in the same order in every run.
  std::uint64_t nextSerial = 1;                                    // guarded by mu
  std::map<std::uint64_t, std::weak_ptr<Connection>> connections;  // guarded by mu
  std::size_t sweepAt = 64;                                        // guarded by mu
  std::map<std::uint64_t, std::shared_ptr<Dial>> dials;            // guarded by mu
  std::map<std::uint64_t, std::shared_ptr<Handshake>> handshakes;  // guarded by mu
  // Listening on one specific address: outgoing connections leave from it too, so that a peer (or
  // a firewall rule) sees a member's traffic come from the address it listens on. Guarded by mu.
  std::optional<asio::ip::address> source;
};

// One dial in progress; network thread only.
struct Transport::Dial {
  std::uint64_t serial = 0;  // its key in State::dials
  Dial(asio::io_context& io, std::string addr, ConnectHandler handler)
      : socket(asio::any_io_executor(io.get_executor())),
        timer(io),
        resolver(io),
        address(std::move(addr)),
        done(std::move(handler)) {}

  asio::ip::tcp::socket socket;
  std::optional<Stream::Tls> tls;  // once connected, under TLS: the handshake's stream
  std::optional<SimStream> sim;    // in a simulation, instead of socket
  Timer timer;
  asio::ip::tcp::resolver resolver;
  std::string address;
  ConnectHandler done;
  std::optional<asio::ip::address> source;  // the local address to leave from, if any
  std::chrono::milliseconds timeout{0};     // of the connect and the TLS handshake
  bool finished = false;
  bool timedOut = false;
  bool cancelled = false;  // by stop()

  void abort() {
    if (sim) {
      sim->close();  // the dial completes with operation_aborted
      return;
    }
    resolver.cancel();
    std::error_code ignored;
    (tls ? tls->next_layer() : socket).close(ignored);
  }
};

// The server side of one TLS handshake in progress; network thread only.
struct Transport::Handshake {
  std::uint64_t serial = 0;  // its key in State::handshakes
  explicit Handshake(asio::ip::tcp::socket s)
      : socket(std::move(s)), timer(socket.get_executor()) {}
  asio::ip::tcp::socket socket;
  std::optional<Stream::Tls> tls;
  Timer timer;

  void abort() {
    std::error_code ignored;
    (tls ? tls->next_layer() : socket).close(ignored);
  }
};

Transport::Transport(asio::io_context& io, TransportOptions options, ConnectionHandler& handler)
    : io_(io), options_(options), state_(std::make_shared<State>(io, options, handler)) {}

Transport::~Transport() { stop(); }

Result<std::uint16_t> Transport::listen() {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  const std::string where = joinAddress(options_.listenHost, options_.listenPort);
  if (s.stopped) return stoppedError("; not listening on " + where);
  if (s.listening) {
    return Error(Errc::invalid_configuration,
                 "already listening on " + joinAddress(options_.listenHost, s.port.load()));
  }
  if (s.sim != nullptr) return listenSimulated();
  std::error_code ec;
  asio::ip::tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(options_.listenHost, ec);
  if (!ec) {
    endpoint = {address, options_.listenPort};
  } else {
    asio::ip::tcp::resolver resolver(io_);
    const auto results =
        resolver.resolve(options_.listenHost, std::to_string(options_.listenPort), ec);
    if (ec || results.empty()) {
      return Error(Errc::invalid_configuration,
                   "cannot listen on " + where + ": " +
                       (ec ? ec.message() : std::string("host has no address")));
    }
    endpoint = results.begin()->endpoint();
  }
  auto fail = [&](const char* step) -> Error {
    std::error_code ignored;
    s.acceptor.close(ignored);
    return Error(Errc::unavailable,
                 "cannot listen on " + where + ": " + step + ": " + ec.message());
  };
  s.acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  s.acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("set SO_REUSEADDR");
  s.acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  const auto local = s.acceptor.local_endpoint(ec);
  if (ec) return fail("local address");
  s.port.store(local.port());
  if (!local.address().is_unspecified()) s.source = local.address();
  s.listening = true;
  asio::post(io_, [state = state_] { accept(state); });
  return local.port();
}

// With s.mu held, not yet listening.
Result<std::uint16_t> Transport::listenSimulated() {
  State& s = *state_;
  const std::string where = joinAddress(options_.listenHost, options_.listenPort);
  if (options_.tls) {
    return Error(Errc::invalid_configuration,
                 "cannot listen on " + where + ": TLS is not supported in a simulation");
  }
  s.simAcceptor.emplace(s.sim->network(), *s.sim, asio::any_io_executor(io_.get_executor()));
  std::error_code ec;
  const std::uint16_t port = s.simAcceptor->listen(options_.listenHost, options_.listenPort, ec);
  if (ec) {
    s.simAcceptor.reset();
    return Error(Errc::unavailable, "cannot listen on " + where + ": " + ec.message());
  }
  s.port.store(port);
  s.listening = true;
  asio::post(io_, [state = state_] { accept(state); });
  return port;
}

std::uint16_t Transport::listenPort() const noexcept { return state_->port.load(); }

std::size_t Transport::bufferedBytes() const noexcept {
  return state_->budget ? state_->budget->used() : 0;
}

std::size_t Transport::bufferedBytesPeak() const noexcept {
  return state_->budget ? state_->budget->peak() : 0;
}

TransportOptions::Shared Transport::shared() const { return {state_->budget, state_->inbound}; }

std::string Transport::listenAddress() const {
  return joinAddress(options_.listenHost, state_->port.load());
}

bool Transport::stopped() const { return state_->stopped.load(std::memory_order_acquire); }

void Transport::accept(const std::shared_ptr<State>& state) {
  if (state->simAcceptor) {
    state->simAcceptor->asyncAccept([state](const std::error_code& ec, SimStream stream) {
      if (ec) return;  // closed: stop() or a crash (no other accept error in a simulation)
      {
        std::lock_guard lock(state->mu);
        if (state->stopped) return;
      }
      admit(state, Stream(std::move(stream)), false, nullptr);
      accept(state);
    });
    return;
  }
  state->acceptor.async_accept(
      asio::any_io_executor(state->io.get_executor()),
      [state](const std::error_code& ec, asio::ip::tcp::socket socket) {
        if (ec == asio::error::operation_aborted) return;
        {
          std::lock_guard lock(state->mu);
          if (state->stopped) return;
        }
        if (ec) {  // e.g. out of descriptors: not fatal, try again shortly
          state->retryTimer.expires_after(kAcceptRetry);
          state->retryTimer.async_wait([state](const std::error_code& timerEc) {
            if (!timerEc) accept(state);
          });
          return;
        }
        if (state->options.tls) {
          acceptTls(state, std::move(socket));
        } else {
          admit(state, Stream(std::move(socket)), false, nullptr);
        }
        accept(state);
      });
}

void Transport::admit(const std::shared_ptr<State>& state, Stream stream, bool peerCertified,
                      const Error* refusal, bool memberCertified) {
  ConnectionOptions options = state->options.connection;
  options.handshakeTimeout = state->options.handshakeTimeout;
  options.idleTimeout = state->options.idleTimeout;
  options.maxQueuedBytes = state->options.maxQueuedBytes;
  options.budget = state->budget;
  auto conn = std::make_shared<Connection>(std::move(stream), options, state->handler);
  conn->peerCertified = peerCertified;
  conn->peerMemberCertificate = memberCertified;
  if (!track(state, conn)) return;
  if (refusal != nullptr) {
    conn->refuse(*refusal);
    return;
  }
  // Counted first, then checked: the member port and the shard ports (other threads) share it.
  const std::size_t open = state->inbound->fetch_add(1);
  if (open >= state->options.maxConnections + TransportOptions::kMemberReserve) {
    --*state->inbound;
    conn->refuse(
        Error(Errc::overloaded,
              "member at " + joinAddress(state->options.listenHost, state->port.load()) +
                  " refuses the connection from " + conn->remote() + ": " + std::to_string(open) +
                  " connections are open, the limit (maxConnections " +
                  std::to_string(state->options.maxConnections) + ", and the members' reserve)"));
    return;
  }
  conn->overLimit = open >= state->options.maxConnections;
  conn->onClose([inbound = state->inbound](const Error&) { --*inbound; });
  conn->start();
}

void Transport::acceptTls(const std::shared_ptr<State>& state, asio::ip::tcp::socket socket) {
  auto hs = std::make_shared<Handshake>(std::move(socket));
  {
    std::lock_guard lock(state->mu);
    if (state->stopped) return;
    hs->serial = state->nextSerial++;
    state->handshakes.emplace(hs->serial, hs);
  }
  auto finished = [state, hs] {
    hs->timer.cancel();
    std::lock_guard lock(state->mu);
    state->handshakes.erase(hs->serial);
  };
  const auto limit = state->options.handshakeTimeout.count() > 0 ? state->options.handshakeTimeout
                                                                 : kTlsHandshakeLimit;
  hs->timer.expires_after(limit);
  hs->timer.async_wait([hs](const std::error_code& ec) {
    if (!ec) hs->abort();  // the handshake (or the wait for its first byte) fails
  });
  // Look at the first byte: a TLS handshake record starts one; anything else is a peer without
  // TLS, told so in our framing (which it speaks) rather than in a TLS alert (which it cannot
  // read).
  hs->socket.async_wait(
      asio::ip::tcp::socket::wait_read, [state, hs, finished](const std::error_code& ec) {
        unsigned char first = 0;
        std::error_code peekEc = ec;
        std::size_t n = 0;
        if (!peekEc) {
          n = hs->socket.receive(asio::buffer(&first, 1), asio::socket_base::message_peek, peekEc);
        }
        if (peekEc || n == 0) {  // closed, timed out or stopped before a byte came
          finished();
          hs->abort();
          return;
        }
        if (first != kTlsHandshakeRecord) {
          finished();
          const std::string remote = [&] {
            std::error_code ignored;
            const auto endpoint = hs->socket.remote_endpoint(ignored);
            return ignored ? std::string("?")
                           : joinAddress(endpoint.address().to_string(), endpoint.port());
          }();
          const Error refusal(Errc::unauthenticated,
                              "member at " +
                                  joinAddress(state->options.listenHost, state->port.load()) +
                                  " requires TLS, and the connection from " + remote +
                                  " speaks plain TCP: give the client or member TlsOptions (a "
                                  "caFile, and a member its certificate and key)");
          admit(state, Stream(std::move(hs->socket)), false, &refusal);
          return;
        }
        hs->tls.emplace(std::move(hs->socket), *state->options.tls);
        hs->tls->async_handshake(asio::ssl::stream_base::server,
                                 [state, hs, finished](const std::error_code& handshakeEc) {
                                   finished();
                                   if (handshakeEc) {  // an untrusted certificate, a timeout, ...
                                     hs->abort();
                                     return;
                                   }
                                   const bool peer = certified(*hs->tls);
                                   const bool member = memberCertificate(*hs->tls);
                                   admit(state, Stream(std::move(*hs->tls)), peer, nullptr, member);
                                 });
      });
}

bool Transport::track(const std::shared_ptr<State>& state,
                      const std::shared_ptr<Connection>& conn) {
  {
    std::lock_guard lock(state->mu);
    if (!state->stopped) {
      // Closed connections stay listed until they are destroyed, so that stop() also ends one
      // that is still flushing an error reply; expired entries are swept as the set grows.
      state->connections.emplace(state->nextSerial++, conn);
      if (state->connections.size() >= state->sweepAt) {
        std::erase_if(state->connections, [](const auto& kv) { return kv.second.expired(); });
        state->sweepAt = std::max<std::size_t>(64, 2 * state->connections.size());
      }
      return true;
    }
  }
  conn->close(stoppedError(""));
  return false;
}

void Transport::connect(const std::string& address, ConnectHandler done,
                        std::chrono::milliseconds timeout) {
  auto parsed = parseAddress(address);
  auto failSoon = [this](ConnectHandler handler, Error error) {
    asio::post(io_, [handler = std::move(handler), error = std::move(error)]() mutable {
      handler(std::move(error));
    });
  };
  if (!parsed) {
    failSoon(std::move(done),
             Error(Errc::unreachable, "cannot dial '" + address + "': not a host:port address"));
    return;
  }
  if (state_->sim != nullptr && state_->options.tls) {
    const std::string why = "cannot dial " + address + ": TLS is not supported in a simulation";
    failSoon(std::move(done), Error(Errc::invalid_configuration, why));
    return;
  }
  auto dial = std::make_shared<Dial>(io_, address, std::move(done));
  dial->timeout = timeout.count() > 0 ? timeout : state_->options.connectTimeout;
  {
    std::lock_guard lock(state_->mu);
    dial->source = state_->source;
    if (!state_->stopped) {
      dial->serial = state_->nextSerial++;
      state_->dials.emplace(dial->serial, dial);
    } else {
      failSoon(std::move(dial->done), stoppedError("; not dialing " + address));
      return;
    }
  }
  asio::post(io_, [state = state_, dial, host = std::move(parsed->first), port = parsed->second] {
    startDial(state, dial, host, port);
  });
}

void Transport::startDial(const std::shared_ptr<State>& state, const std::shared_ptr<Dial>& dial,
                          const std::string& host, std::uint16_t port) {
  if (dial->cancelled) {
    finishDial(state, dial, asio::error::operation_aborted);
    return;
  }
  dial->timer.expires_after(dial->timeout);
  dial->timer.async_wait([dial](const std::error_code& ec) {
    if (ec || dial->finished) return;
    dial->timedOut = true;
    dial->abort();  // the connect completes with operation_aborted
  });
  if (state->sim != nullptr) {
    dial->sim.emplace(state->sim->network(), *state->sim,
                      asio::any_io_executor(state->io.get_executor()));
    dial->sim->asyncConnect(joinAddress(host, port), [state, dial](const std::error_code& ec) {
      finishDial(state, dial, ec);
    });
    return;
  }
  auto connected = [state, dial](const std::error_code& ec, const asio::ip::tcp::endpoint&) {
    finishDial(state, dial, ec);
  };
  std::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec && dial->source && dial->source->is_v4() == address.is_v4()) {
    // Leave from the listen address (the range form of async_connect would reopen the socket
    // and lose the bind): open, bind to port 0 there, connect.
    const asio::ip::tcp::endpoint remote{address, port};
    dial->socket.open(remote.protocol(), ec);
    if (!ec) dial->socket.bind({*dial->source, 0}, ec);
    if (ec) {
      finishDial(state, dial, ec);
      return;
    }
    dial->socket.async_connect(remote, [state, dial](const std::error_code& connectEc) {
      finishDial(state, dial, connectEc);
    });
    return;
  }
  if (!ec) {
    const std::array<asio::ip::tcp::endpoint, 1> endpoints{{{address, port}}};
    asio::async_connect(dial->socket, endpoints, std::move(connected));
    return;
  }
  dial->resolver.async_resolve(
      host, std::to_string(port),
      [state, dial, connected = std::move(connected)](
          const std::error_code& resolveEc, asio::ip::tcp::resolver::results_type results) mutable {
        if (resolveEc) {
          finishDial(state, dial, resolveEc);
        } else {
          asio::async_connect(dial->socket, results, std::move(connected));
        }
      });
}

void Transport::finishDial(const std::shared_ptr<State>& state, const std::shared_ptr<Dial>& dial,
                           const std::error_code& ec) {
  if (dial->finished) return;
  if (!ec && !dial->cancelled && state->options.tls && !dial->tls) {
    // Connected: now the client side of TLS, within what is left of connectTimeout (the timer
    // runs on), the dial still listed (stop() aborts it).
    dial->tls.emplace(std::move(dial->socket), *state->options.tls);
    dial->tls->async_handshake(asio::ssl::stream_base::client,
                               [state, dial](const std::error_code& handshakeEc) {
                                 finishDial(state, dial, handshakeEc);
                               });
    return;
  }
  dial->finished = true;
  dial->timer.cancel();
  {
    std::lock_guard lock(state->mu);
    state->dials.erase(dial->serial);
  }
  auto done = std::move(dial->done);
  if (dial->cancelled) {
    done(stoppedError(" while dialing " + dial->address));
    return;
  }
  if (ec && dial->tls && !dial->timedOut) {
    const long verify = SSL_get_verify_result(dial->tls->native_handle());
    done(Error(tlsFailureIsFinal(ec, verify) ? Errc::unauthenticated : Errc::unreachable,
               "cannot connect to " + dial->address +
                   ": TLS handshake failed: " + describeTlsFailure(ec, verify)));
    return;
  }
  if (ec) {
    const std::string reason =
        dial->timedOut ? "timed out after " + std::to_string(dial->timeout.count()) + " ms"
                       : ec.message();
    done(Error(Errc::unreachable, "cannot connect to " + dial->address + ": " + reason));
    return;
  }
  const bool peer = dial->tls && certified(*dial->tls);
  const bool member = dial->tls && memberCertificate(*dial->tls);
  Stream stream = dial->sim   ? Stream(std::move(*dial->sim))
                  : dial->tls ? Stream(std::move(*dial->tls))
                              : Stream(std::move(dial->socket));
  auto conn =
      std::make_shared<Connection>(std::move(stream), state->options.connection, state->handler);
  conn->peerCertified = peer;
  conn->peerMemberCertificate = member;
  if (!track(state, conn)) {
    done(stoppedError(" while dialing " + dial->address));
    return;
  }
  conn->start();
  done(std::move(conn));
}

void Transport::stop() {
  std::vector<std::shared_ptr<Connection>> connections;
  std::vector<std::shared_ptr<Dial>> dials;
  std::vector<std::shared_ptr<Handshake>> handshakes;
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
    for (const auto& [serial, weak] : state_->connections) {
      if (auto conn = weak.lock()) connections.push_back(std::move(conn));
    }
    state_->connections.clear();
    for (const auto& [serial, dial] : state_->dials) dials.push_back(dial);
    for (const auto& [serial, hs] : state_->handshakes) handshakes.push_back(hs);
    state_->handshakes.clear();
  }
  // On the network thread, or when nothing runs the io_context any more, no handler can race
  // us: close here, so that peers see the sockets close even if the owner stops the io_context
  // right after. From any other thread, post to the network thread.
  const bool runInline = io_.get_executor().running_in_this_thread() || io_.stopped();
  auto closeAcceptor = [state = state_] {
    std::lock_guard lock(state->mu);  // listen() may be running on another thread
    std::error_code ignored;
    state->acceptor.close(ignored);
    if (state->simAcceptor) state->simAcceptor->close();
    state->retryTimer.cancel();
  };
  if (runInline) {
    closeAcceptor();
  } else {
    asio::post(io_, closeAcceptor);
  }
  for (const auto& dial : dials) {
    auto cancel = [dial] {
      dial->cancelled = true;
      dial->abort();
    };
    if (runInline) {
      cancel();
    } else {
      asio::post(io_, cancel);
    }
  }
  for (const auto& hs : handshakes) {
    if (runInline) {
      hs->abort();
    } else {
      asio::post(io_, [hs] { hs->abort(); });
    }
  }
  for (const auto& conn : connections) conn->close(stoppedError(""));
}

}  // namespace ingrid
