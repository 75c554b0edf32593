// completeNow: completes an Asio completion token with a result known at once, never inline
// (Asio's rule): for the in-process limiters (LocalTokenBucket) and the facades' refusals.
//
// Thread safety: a pure function; the handler runs on its associated executor.
#pragma once

#include <utility>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include <ingrid/result.h>

namespace ingrid {

// Completes `token` with an immediate result without running it inline (Asio's rule): posted to
// the handler's associated executor, else to the system executor.
template <class T, class CompletionToken>
auto completeNow(Result<T> result, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Result<T>)>(
      [](auto handler, Result<T> r) {
        auto ex = asio::get_associated_executor(handler, asio::system_executor());
        // Guards the target until post() has returned (see include/ingrid/invoke_async.h).
        auto posting = asio::make_work_guard(ex);
        asio::post(ex, [handler = std::move(handler), r = std::move(r)]() mutable {
          std::move(handler)(std::move(r));
        });
      },
      token, std::move(result));
}

}  // namespace ingrid
