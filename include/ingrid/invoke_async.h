// The typed invoke surface shared by Node and Client: from a processor P and an Asio completion
// token to the erased invokeRaw(key, name, args, done) each of them implements, and back.
//
// asyncInvoke: completion signature void(Result<P::Result>); the handler runs on its associated
// executor, or on `fallback` if it has none. It never runs inside the initiating call (Asio's
// rule). When the answer arrives on a thread that is running `fallback` itself (the thin
// client's I/O thread) and the handler has no executor of its own, it runs right there with no
// hop, as a handler of an Asio I/O object does; in every other case it is posted. So a handler
// never runs on a partition worker (the Node's fallback is its completion pool).
// blockingInvoke waits on the caller's thread.
#pragma once

#include <exception>
#include <future>
#include <string>
#include <type_traits>
#include <utility>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/result.h>
#include <ingrid/string_pool.h>
#include <ingrid/unique_function.h>

namespace ingrid {

// The completion of an invocation in erased form: encoded result bytes or an Error.
using RawCompletion = UniqueFunction<void(Result<std::string>)>;

namespace detail {
// Marks the calling thread as inside an initiating call of asyncInvoke: a completion that
// arrives inline (a refusal, for instance) must then be posted, never run in place.
struct Initiating {
  static inline thread_local int depth = 0;
  Initiating() noexcept { ++depth; }
  ~Initiating() { --depth; }
  Initiating(const Initiating&) = delete;
  Initiating& operator=(const Initiating&) = delete;
};
}  // namespace detail

// Decodes an erased result into P::Result; a decode failure becomes an Error naming P. The
// result's string goes back to this thread's StringPool.
template <EntryProcessor P>
Result<typename P::Result> decodeResult(Result<std::string> raw) {
  if (!raw) return std::move(raw).error();
  struct GiveBack {
    std::string& bytes;
    ~GiveBack() { StringPool::give(std::move(bytes)); }
  } giveBack{raw.value()};
  try {
    return decode<typename P::Result>(raw.value());
  } catch (const std::exception& e) {
    return Error(Errc::malformed_message, "result of processor '" + std::string(P::kName) +
                                              "' does not decode: " + e.what());
  }
}

// invokeRaw: callable as invokeRaw(std::string key, std::string_view name, std::string args,
// RawCompletion done).
template <EntryProcessor P, class InvokeRaw, class Executor, class CompletionToken>
auto asyncInvoke(InvokeRaw invokeRaw, const Executor& fallback, std::string key, const P& processor,
                 CompletionToken&& token) {
  using Signature = void(Result<typename P::Result>);
  return asio::async_initiate<CompletionToken, Signature>(
      [invokeRaw, fallback](auto handler, std::string k, std::string args) {
        auto ex = asio::get_associated_executor(handler, fallback);
        auto work = asio::make_work_guard(ex);
        const detail::Initiating initiating;
        invokeRaw(std::move(k), P::kName, std::move(args),
                  [handler = std::move(handler), work = std::move(work),
                   fallback](Result<std::string> raw) mutable {
                    static_cast<void>(fallback);  // unused when Executor has no thread (clang)
                    auto target = work.get_executor();
                    if constexpr (std::is_same_v<decltype(target), Executor> &&
                                  requires { target.running_in_this_thread(); }) {
                      if (detail::Initiating::depth == 0 && target == fallback &&
                          target.running_in_this_thread()) {
                        // On the fallback's own thread, outside the initiating call: no hop.
                        auto held = std::move(work);  // released once the handler returns
                        std::move(handler)(decodeResult<P>(std::move(raw)));
                        return;
                      }
                    }
                    // Held until post() has returned: Asio wakes the target's thread after
                    // unlocking, and the handler's own guard may already be gone by then (the
                    // caller may destroy its io_context the moment run() returns).
                    auto posting = asio::make_work_guard(target);
                    asio::post(target, [handler = std::move(handler), raw = std::move(raw),
                                        work = std::move(work)]() mutable {
                      std::move(handler)(decodeResult<P>(std::move(raw)));
                    });
                  });
      },
      token, std::move(key), encode(processor));
}

template <EntryProcessor P, class InvokeRaw>
Result<typename P::Result> blockingInvoke(InvokeRaw invokeRaw, std::string key,
                                          const P& processor) {
  std::promise<Result<std::string>> done;
  auto answer = done.get_future();
  // Setting a promise is not user code, so it may run wherever the result arrives.
  invokeRaw(std::move(key), P::kName, encode(processor),
            [done = std::move(done)](Result<std::string> raw) mutable {
              done.set_value(std::move(raw));
            });
  return decodeResult<P>(answer.get());
}

}  // namespace ingrid
